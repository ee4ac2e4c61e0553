package applog

import (
	"fmt"
	"strings"
)

// Changed is what a version changed, path by path (versions.Changes as the AI's text lists it).
type Changed struct {
	Added, Changed, Removed []string
}

// AIText is a problem as a plain text ready to paste into the builder's AI: the version, what
// failed, the detail as printed, and the files that version changed, so the AI looks where the
// breakage came from (docs/architecture.md, "The app's health").
func AIText(p Problem, files Changed) string {
	var b strings.Builder
	what := map[Source]string{SourceApp: "The dev server exited", SourceInstall: "The install failed",
		SourceBrowser: "The preview's page reported an error"}[p.Source]
	if what == "" {
		what = "Something failed"
	}
	fmt.Fprintf(&b, "Version %d of my app has a problem. %s:\n%s\n", p.Version, what, p.Message)
	if d := strings.TrimSpace(p.Detail); d != "" {
		fmt.Fprintf(&b, "\nDetail:\n%s\n", d)
	}
	list := func(label string, paths []string) {
		for _, path := range paths {
			fmt.Fprintf(&b, "- %s (%s)\n", path, label)
		}
	}
	if n := len(files.Added) + len(files.Changed) + len(files.Removed); n > 0 {
		fmt.Fprintf(&b, "\nFiles version %d changed:\n", p.Version)
		list("added", files.Added)
		list("changed", files.Changed)
		list("removed", files.Removed)
	} else {
		fmt.Fprintf(&b, "\nVersion %d changed no files.\n", p.Version)
	}
	b.WriteString("\nPlease find the cause and fix it.\n")
	return b.String()
}
