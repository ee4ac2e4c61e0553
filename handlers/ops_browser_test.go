package handlers_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
)

// textOf is the JavaScript expression of the trimmed text of the element with the test id.
func textOf(testID string) string {
	return `(document.querySelector("[data-testid=` + testID + `]")?.textContent ?? "").trim()`
}

// The console follows the fleet live: an operator's open /ops page shows the cost now and the
// count running change when a founder pauses and resumes, with no reload and no request of its
// own; the chart is drawn on the server (there without JavaScript, with its table); the
// console, a preview's page and the kill's question pass axe-core and fit 390 px; with
// JavaScript the Kill link asks in a dialog naming the founder and the project.
func TestBrowserOpsFollowsTheFleetLive(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	founder := s.NewClient(t)
	founder.SignUp("fleet@example.com")
	_, sandboxID := founder.BuildCounter()
	founder.WaitSandbox(sandboxID, "running", time.Minute)
	operator := s.NewClient(t)
	operator.SignUp("console@example.com")
	s.makeOperator(t, "console@example.com")

	browser, _ := s.Browse(t, "console@example.com")
	page := browser.Open(t, s.URL()+"/ops")
	page.WaitFor(t, "the event stream", `document.querySelector("[sse-connect]")?.["htmx-internal-data"]?.sseEventSource?.readyState === 1`)
	page.WaitFor(t, "one running", textOf("fleet-running")+`.startsWith("1 ")`)
	running := apptest.Eval[string](t, page, textOf("cost-per-hour"))
	if running == "$0.0000" {
		t.Fatalf("one preview running costs %s an hour", running)
	}
	apptest.Eval[bool](t, page, `window.sandmanNoReload = true`)
	before := len(page.Requests())

	founder.Pause(sandboxID)
	founder.WaitSandbox(sandboxID, "paused", 30*time.Second)
	page.WaitFor(t, "no cost once paused", textOf("cost-per-hour")+` === "$0.0000" && `+textOf("fleet-running")+`.startsWith("0 ")`)
	page.WaitFor(t, "the pause counted", textOf("fleet-paused-memory")+`.startsWith("1 ")`)
	apptest.RequireStatus(t, founder.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
	founder.WaitSandbox(sandboxID, "running", 30*time.Second)
	// Its cost, at the size the provider reports once the reconcile has read it (sandboxd's).
	page.WaitFor(t, "the cost back after the resume", textOf("cost-per-hour")+` !== "$0.0000" && `+textOf("fleet-running")+`.startsWith("1 ")`)
	if !apptest.Eval[bool](t, page, `window.sandmanNoReload === true`) {
		t.Fatal("the console reloaded")
	}
	assertNoSandmanRequests(t, s.URL(), "console", page.Requests()[before:])
	if dir := os.Getenv("SANDMAN_SCREENSHOTS"); dir != "" {
		page.SaveScreenshot(t, filepath.Join(dir, "ops-console.png"))
	}
	checkForEveryone(t, page, "ops-console", `!!document.querySelector("[data-testid=ops-console]")`)

	// The preview's page: the kill asks first, in a dialog naming the founder and the project.
	sbPage := browser.Open(t, s.URL()+"/ops/sandboxes/"+sandboxID)
	checkForEveryone(t, sbPage, "ops-sandbox", `!!document.querySelector("[data-testid=ops-kill]")`)
	click(t, sbPage, "[data-testid=ops-kill]")
	sbPage.WaitFor(t, "the kill's dialog", `document.getElementById("kill-dialog").open`)
	if q := apptest.Eval[string](t, sbPage, textOf("kill-dialog")); !strings.Contains(q, "fleet@example.com") || !strings.Contains(q, "Counter") {
		t.Fatalf("the kill's dialog says %q", q)
	}
	click(t, sbPage, "[data-testid=kill-cancel]")
	sbPage.WaitFor(t, "the dialog closed, nothing sent", `!document.getElementById("kill-dialog").open`)
	founder.WaitSandbox(sandboxID, "running", time.Second)

	// Without JavaScript: the chart and its table are in the page, and the kill asks on a page.
	noJS := browser.OpenWithoutJavaScript(t, s.URL()+"/ops")
	noJS.ScriptsBack(t) // to read the page drawn without them
	if n := apptest.Eval[int](t, noJS, `document.querySelectorAll("[data-testid=chart-svg] rect.chart-bar").length`); n != 24+7*24 {
		t.Fatalf("%d bars in the charts without JavaScript, want %d", n, 24+7*24)
	}
	if n := apptest.Eval[int](t, noJS, `document.querySelectorAll("[data-testid=chart-table] tbody tr").length`); n != 24+7 {
		t.Fatalf("%d rows in the charts' tables, want %d", n, 24+7)
	}
	confirm := browser.OpenWithoutJavaScript(t, s.URL()+"/ops/sandboxes/"+sandboxID+"/kill")
	confirm.ScriptsBack(t)
	checkForEveryone(t, confirm, "ops-kill-question", `!!document.querySelector("[data-testid=kill-confirm]")`)
}
