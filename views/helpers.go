package views

import (
	"encoding/json"
	"fmt"
	"strconv"

	"sandman/sandbox"

	"github.com/a-h/templ"
)

func csrfHeader(token string) string {
	b, _ := json.Marshal(map[string]string{"X-CSRF-Token": token})
	return string(b)
}

func creditsText(n int32) string {
	if n == 1 {
		return "1 credit"
	}
	return fmt.Sprintf("%d credits", n)
}

func invalidClass(errs map[string]string, name string) string {
	if _, ok := errs[name]; ok {
		return "invalid"
	}
	return ""
}

// invalidAttrs mark a field with an error as invalid and point to the error's text (fieldError),
// so a screen reader reads why.
func invalidAttrs(errs map[string]string, name string) templ.Attributes {
	if _, ok := errs[name]; ok {
		return templ.Attributes{"aria-invalid": "true", "aria-describedby": "err-" + name}
	}
	return templ.Attributes{}
}

func fileCount(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}

func pauseKindText(k sandbox.PauseKind) string {
	if k == sandbox.PauseFilesystem {
		return "Files only (the dev server restarts on resume)"
	}
	return "Memory snapshot"
}

func itoa32(n int32) string { return strconv.Itoa(int(n)) }

// versionPath is a version's page on the build page's side (its changes; /restore restores it).
func versionPath(projectID string, n int32) string {
	return "/projects/" + projectID + "/versions/" + itoa32(n)
}

// archivePath is a version's zip.
func archivePath(projectID string, n int32) string {
	return "/api/projects/" + projectID + "/versions/" + itoa32(n) + "/archive"
}

// changeCounts is "+2 ~1 −0".
func changeCounts(r VersionRow) string {
	return "+" + itoa32(r.Added) + " ~" + itoa32(r.Changed) + " −" + itoa32(r.Removed)
}

// PreviewSandbox is what a preview may do in the frames that show it (the build page's and a
// share link's): run its scripts, send its forms, keep its own origin (its cookies and storage;
// it is another site than Sandman's, so this gives it nothing of Sandman's), open windows,
// show dialogs and download files, as the app would in a tab of its own. Never navigate the page
// around it, not even after a click: the page is Sandman's, and a preview that could replace it
// could put a look-alike log-in page at Sandman's place in the visitor's tab.
const PreviewSandbox = "allow-scripts allow-forms allow-same-origin allow-popups allow-modals allow-downloads"
