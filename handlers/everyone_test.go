package handlers_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/sandbox"
	"sandman/views"
)

// forced is a state a page is shown in, written by plain SQL (the test's fixture, not a state
// change): every state of docs/states.md on one web-only instance, with no sandbox to wait for.
type forced struct {
	name       string
	status     string // the sandbox's
	build      string // the build's status
	stage      string
	buildError string
	snapshot   string
	cause      string
	from       string // the event that explains it
	source     string
	reason     string
	notBuilt   bool
}

var forcedStates = []forced{
	{name: "not-built", notBuilt: true},
	{name: "starting", status: "starting", build: "building", stage: "installing", from: "starting", source: "user", reason: "created"},
	{name: "running", status: "running", build: "ready", from: "starting", source: "build", reason: "ready"},
	{name: "sleeping-memory", status: "paused", build: "ready", snapshot: "memory", from: "running", source: "scheduler", reason: "idle"},
	{name: "sleeping-files", status: "paused", build: "ready", snapshot: "filesystem", from: "running", source: "user", reason: "requested"},
	{name: "resuming", status: "resuming", build: "ready", from: "paused", source: "user", reason: "resume"},
	{name: "resume-failed", status: "resume_failed", build: "ready", cause: string(sandbox.CauseNotFound), from: "resuming", source: "user", reason: "resume_not_found"},
	{name: "files-lost", status: "resume_failed", build: "ready", cause: string(sandbox.CauseFilesLost), from: "resuming", source: "user", reason: "resume_files_lost"},
	{name: "gone-killed", status: "killed", build: "ready", from: "running", source: "webhook", reason: "provider_request"},
	{name: "gone-expired", status: "expired", build: "ready", from: "running", source: "webhook", reason: "provider_timeout"},
	{name: "gone-stopped", status: "terminated", build: "ready", from: "paused", source: "webhook", reason: "provider_request"},
	{name: "unknown", status: "unknown", build: "ready", from: "running", source: "reconciler", reason: "cannot_verify"},
	{name: "build-failed", status: "terminated", build: "failed", buildError: "npm install exited with status 1:\n…npm ERR! 404 Not Found - GET https://registry.npmjs.org/left-padd", from: "starting", source: "build", reason: "build_failed"},
}

// forceState builds the project (its sandbox row and build; no worker runs them here) and
// puts them in the state.
func (s *stack) forceState(t *testing.T, c *apptest.Client, projectID string, f forced) {
	t.Helper()
	if f.notBuilt {
		return
	}
	var res struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+projectID+"/builds", map[string]string{"idempotencyKey": "k-" + projectID}, &res), http.StatusAccepted)
	ctx := context.Background()
	preview := s.Host.PreviewURL("i"+strings.ReplaceAll(projectID[:8], "-", ""), 3000)
	var snapshot any
	if f.snapshot != "" {
		snapshot = f.snapshot
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		// A failure's sentence as a build stored it before the codes (views shows it as it is).
		{"UPDATE builds SET status = $2, stage = $3, failure_detail = $4, failure_code = CASE WHEN $4 <> '' THEN 'other'::build_failure END WHERE id = (SELECT build_id FROM sandboxes WHERE id = $1)",
			[]any{res.Sandbox.ID, f.build, f.stage, f.buildError}},
		{"UPDATE sandboxes SET status = $2, snapshot_kind = $3, failure_cause = nullif($4, '')::failure_cause, preview_url = $5, last_active_at = now() WHERE id = $1",
			[]any{res.Sandbox.ID, f.status, snapshot, f.cause, preview}},
		{"INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) VALUES ($1, $2, $3, $4, $5)",
			[]any{res.Sandbox.ID, f.from, f.status, f.source, f.reason}},
	} {
		if _, err := s.Pool().Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}
}

// screenshotDir is where SANDMAN_SCREENSHOTS asks the browser tests to save what they show,
// for people to look at ("" saves nothing).
func screenshotDir(t *testing.T) string {
	dir := os.Getenv("SANDMAN_SCREENSHOTS")
	if dir == "" {
		return ""
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkForEveryone checks the tab's page once it shows what the page is meant to (the JavaScript
// condition shows: a redirect to the log-in page or an error page must fail, not be checked in
// its place): no serious or critical accessibility violation (axe-core) at desktop and phone
// width, nothing scrolling sideways on a phone, and no template code shown as text. With
// SANDMAN_SCREENSHOTS it saves both widths.
func checkForEveryone(t *testing.T, tab *apptest.Tab, name, shows string) {
	t.Helper()
	tab.WaitFor(t, "the "+name+" page", shows)
	if code := tab.TemplateLeftovers(t); len(code) > 0 {
		t.Errorf("%s shows template code as text: %q", name, code)
	}
	dir := screenshotDir(t)
	for _, width := range []int64{1280, apptest.Phone} {
		tab.Viewport(t, width, 844)
		for _, v := range tab.Axe(t) {
			t.Errorf("%s at %d px: %s", name, width, v)
		}
		if width == apptest.Phone {
			if o := tab.Overflow(t); o != "" {
				t.Errorf("%s scrolls sideways at %d px: %s", name, width, o)
			}
		}
		if dir != "" {
			tab.SaveScreenshot(t, filepath.Join(dir, name+"-"+strconv.Itoa(int(width))+".png"))
		}
	}
	tab.Viewport(t, 1280, 844)
}

// Every page, and the build page and the card in every state, for everyone: axe-core finds
// nothing serious or critical, nothing scrolls sideways at 390 px, and the dashboard works
// with the keyboard alone, focus visible all the way, the rebuild dialog included.
func TestBrowserEveryPageForEveryone(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.StartCredits = 20 }})
	c := s.NewClient(t)
	c.SignUp("everyone@example.com")

	browser := apptest.NewBrowser(t)
	tab := browser.Open(t, s.URL()+"/login")
	checkForEveryone(t, tab, "login", `location.pathname === "/login" && !!document.getElementById("password")`)
	tab.Do(t, chromedp.Navigate(s.URL()+"/signup"))
	checkForEveryone(t, tab, "signup", `location.pathname === "/signup" && !!document.getElementById("password")`)
	// The sign-up form's errors, as a founder meets them.
	tab.Do(t, chromedp.SendKeys(chromedp.ID("email"), "not-an-email"), chromedp.Submit(chromedp.ID("email")))
	checkForEveryone(t, tab, "signup-errors", `!!document.querySelector("[data-testid=err-email]")`)

	tab.LogIn(t, s.URL(), "everyone@example.com")
	checkForEveryone(t, tab, "dashboard-empty", `!!document.querySelector("[data-testid=no-projects]")`)
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/new"))
	checkForEveryone(t, tab, "new-project", `location.pathname === "/projects/new" && !!document.getElementById("folder")`)
	// "choose a folder" is part of the hint's sentence; its file input is hidden, so the
	// keyboard's focus on it shows on the words.
	if got := apptest.Eval[string](t, tab, `getComputedStyle(document.querySelector("label[for=folder]")).display`); got != "inline" {
		t.Errorf("the folder's label breaks the hint's sentence (display %s)", got)
	}
	tabTo(t, tab, "#folder")
	if !apptest.Eval[bool](t, tab, `getComputedStyle(document.querySelector("label[for=folder]")).outlineStyle !== "none"`) {
		t.Error("the focus on the folder input does not show")
	}
	if dir := screenshotDir(t); dir != "" {
		tab.SaveScreenshot(t, filepath.Join(dir, "new-project-folder-focus-1280.png"))
	}
	apptest.Eval[bool](t, tab, `(() => { const dt = new DataTransfer(); dt.items.add(new File(["x"], "a.js")); dt.items.add(new File(["y"], "b.js"));
		const input = document.getElementById("folder"); input.files = dt.files; input.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
	tab.WaitFor(t, "the folder's files said", `document.querySelector("[data-folder-chosen]").textContent === "2 files chosen."`)

	ids := map[string]string{}
	for _, f := range forcedStates {
		var p struct{ ID string }
		apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": f.name, "starter": "counter"}, &p), http.StatusCreated)
		ids[f.name] = p.ID
		s.forceState(t, c, p.ID, f)
	}
	if _, err := s.Pool().Exec(context.Background(), "UPDATE users SET credits = 7"); err != nil {
		t.Fatal(err)
	}
	tab.Do(t, chromedp.Navigate(s.URL()+"/"))
	checkForEveryone(t, tab, "dashboard", `document.querySelectorAll("[data-testid=project-card]").length === `+strconv.Itoa(len(forcedStates)))
	for _, f := range forcedStates {
		tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+ids[f.name]))
		checkForEveryone(t, tab, "build-"+f.name, `!!document.querySelector("[data-testid=preview-pane]")`)
	}

	// The keyboard alone: Tab reaches the gone card's Rebuild with its focus visible, Enter
	// opens the dialog with the focus inside, Escape closes it and the focus comes back.
	tab.Do(t, chromedp.Navigate(s.URL()+"/"))
	tab.WaitFor(t, "the stream's first state", streamSettled(views.Card, ids["gone-killed"]))
	rebuild := `#` + views.DOMID(views.Card, ids["gone-killed"]) + ` [data-testid=rebuild]`
	tabTo(t, tab, rebuild)
	tab.Do(t, chromedp.KeyEvent(kb.Enter))
	tab.WaitFor(t, "the dialog open with the focus inside", `(() => { const d = document.getElementById("rebuild-dialog");
		return d.open && d.contains(document.activeElement) && document.activeElement.matches("[data-testid=rebuild-confirm]"); })()`)
	requireFocusVisible(t, tab)
	checkForEveryone(t, tab, "dialog-card", `document.getElementById("rebuild-dialog").open`)
	tab.Do(t, chromedp.KeyEvent(kb.Escape))
	tab.WaitFor(t, "the dialog closed and the focus back on Rebuild", `!document.getElementById("rebuild-dialog").open &&
		document.activeElement.matches(`+jsString(rebuild)+`)`)

	// The same dialog from the build page, and with no credit left.
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+ids["gone-expired"]))
	tab.WaitFor(t, "the stream's first state", streamSettled(views.Pane, ids["gone-expired"]))
	click(t, tab, "[data-testid=preview-pane] [data-testid=rebuild]")
	checkForEveryone(t, tab, "dialog-build-page", `document.getElementById("rebuild-dialog").open`)
	if _, err := s.Pool().Exec(context.Background(), "UPDATE users SET credits = 0"); err != nil {
		t.Fatal(err)
	}
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+ids["gone-expired"]))
	tab.WaitFor(t, "the stream's first state", streamSettled(views.Pane, ids["gone-expired"]))
	click(t, tab, "[data-testid=preview-pane] [data-testid=rebuild]")
	checkForEveryone(t, tab, "dialog-no-credits", `document.getElementById("rebuild-dialog").open && !!document.querySelector("[data-testid=no-credits]")`)

	// Without JavaScript the question is a page; and a page that is not there.
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+ids["gone-expired"]+"/rebuild?return=/"))
	checkForEveryone(t, tab, "rebuild-page-no-credits", rebuildPage+` && !!document.querySelector("[data-testid=no-credits]")`)
	if _, err := s.Pool().Exec(context.Background(), "UPDATE users SET credits = 7"); err != nil {
		t.Fatal(err)
	}
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+ids["gone-expired"]+"/rebuild?return=/"))
	checkForEveryone(t, tab, "rebuild-page", rebuildPage+` && !!document.querySelector("[data-testid=rebuild-confirm]")`)
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/00000000-0000-0000-0000-000000000000"))
	checkForEveryone(t, tab, "not-found", textIs("[data-testid=error-page] h1", "Not Found"))
}

// rebuildPage is the condition that the tab shows the rebuild question as a page of its own
// (without JavaScript), not the build page's dialog.
const rebuildPage = `location.pathname.endsWith("/rebuild") && !!document.querySelector("main [data-testid=rebuild-question]")`

// tabTo presses Tab until the element matching selector has the focus, checking that every
// element on the way shows it.
func tabTo(t *testing.T, tab *apptest.Tab, selector string) {
	t.Helper()
	for range 80 {
		tab.Do(t, chromedp.KeyEvent(kb.Tab))
		requireFocusVisible(t, tab)
		if apptest.Eval[bool](t, tab, `document.activeElement.matches(`+jsString(selector)+`)`) {
			return
		}
	}
	t.Fatalf("80 presses of Tab never reached %s", selector)
}

// requireFocusVisible fails unless the focused element shows an outline.
func requireFocusVisible(t *testing.T, tab *apptest.Tab) {
	t.Helper()
	if what := apptest.Eval[string](t, tab, `(() => { const el = document.activeElement, s = getComputedStyle(el);
		return el === document.body || (s.outlineStyle !== "none" && parseFloat(s.outlineWidth) >= 2) ? "" : el.outerHTML.slice(0, 200); })()`); what != "" {
		t.Fatalf("the focus is not visible on %s", what)
	}
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
