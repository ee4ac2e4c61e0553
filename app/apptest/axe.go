package apptest

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// axeSource is axe-core 4.14.1, vendored (axe/README.md): accessibility checks with no network.
//
//go:embed axe/axe.min.js
var axeSource string

// AxeViolation is one accessibility rule that axe-core finds broken on a page, with the
// elements that break it.
type AxeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target         []any  `json:"target"`
		FailureSummary string `json:"failureSummary"`
	} `json:"nodes"`
}

func (v AxeViolation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s", v.ID, v.Impact, v.Help)
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, "\n    %v: %s", n.Target, strings.ReplaceAll(n.FailureSummary, "\n", " "))
	}
	return b.String()
}

// Axe runs axe-core's default rules (WCAG 2 A and AA, and its best practices) on the tab's page
// as it is now, and returns the violations of serious or critical impact. Previews in iframes
// are the founders' own pages and are not checked. The page's Content-Security-Policy does not
// apply: the script is evaluated through the DevTools protocol.
func (tab *Tab) Axe(t testing.TB) []AxeViolation {
	t.Helper()
	if !Eval[bool](t, tab, `typeof window.axe === "object"`) {
		Eval[bool](t, tab, axeSource+";\ntrue")
	}
	ctx, cancel := context.WithTimeout(tab.ctx, time.Minute)
	defer cancel()
	all, err := chromedp.Run(ctx, chromedp.Evaluate[[]AxeViolation](
		`axe.run(document, {resultTypes: ["violations"], iframes: false}).then(r => r.violations)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("axe.run: %v", err)
	}
	var out []AxeViolation
	for _, v := range all {
		if v.Impact == "serious" || v.Impact == "critical" {
			out = append(out, v)
		}
	}
	return out
}
