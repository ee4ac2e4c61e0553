package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/views"
)

// Browser tests of the founder's experience: the rebuild dialog, the history, the countdown and
// Keep awake, and the pages without JavaScript. Every page and state for
// everyone (axe-core, phones, the keyboard) is in everyone_test.go.

// textIs is the JavaScript condition that the element's text is want.
func textIs(selector, want string) string {
	return fmt.Sprintf(`document.querySelector(%s)?.textContent.trim().replace(/\s+/g, " ") === %s`, jsString(selector), jsString(want))
}

// historyTop is the condition that the newest entry of the build page's history says want.
func historyTop(want string) string {
	return textIs("[data-testid=history-entry] [data-testid=history-text]", want)
}

// click clicks the element the selector finds, as one step in the page: a live update may
// replace a fragment at any moment, so the element is found and clicked at once.
func click(t *testing.T, tab *apptest.Tab, selector string) {
	t.Helper()
	// htmx takes over a swapped-in fragment's forms once it settles.
	tab.WaitFor(t, selector, `!!document.querySelector(`+jsString(selector)+`) && !document.querySelector(".htmx-added, .htmx-settling")`)
	apptest.Eval[bool](t, tab, `(document.querySelector(`+jsString(selector)+`).click(), true)`)
}

// streamSettled is the condition that the page's event stream is open and has delivered its
// first state of the fragment (the snapshot every connection starts with), so the fragment in
// the page is the one a test clicks.
func streamSettled(f views.Fragment, projectID string) string {
	return `document.querySelector("[sse-connect]")?.["htmx-internal-data"]?.sseEventSource?.latest?.has(` +
		jsString(views.DOMID(f, projectID)) + `) === true && !document.querySelector(".htmx-added, .htmx-settling")`
}

// pageSettled is the condition that the page's event stream is open and htmx has taken over
// every fragment in the page: for a tab that joins a stream another tab of the browser opened
// (it gets no snapshot of its own; its page is as fresh as that).
const pageSettled = `document.querySelector("[sse-connect]")?.["htmx-internal-data"]?.sseEventSource?.readyState === 1 &&
	!document.querySelector(".htmx-added, .htmx-settling")`

// dialogOpen is the condition that the rebuild dialog is open with the focus inside.
const dialogOpen = `(() => { const d = document.getElementById("rebuild-dialog");
	return d.open && d.contains(document.activeElement) && !!d.querySelector("[data-testid=rebuild-question]"); })()`

const dialogClosed = `!document.getElementById("rebuild-dialog").open`

// rebuildPosts counts the tab's rebuild requests (the answer to the question) since from.
func rebuildPosts(tab *apptest.Tab, from int) int {
	n := 0
	for _, r := range tab.Requests()[from:] {
		if strings.HasPrefix(r, "POST ") && strings.HasSuffix(r, "/rebuild") {
			n++
		}
	}
	return n
}

// The rebuild question is a modal dialog, from the card and from the build page: the focus
// moves into it, Escape and Cancel close it and charge nothing, Rebuild (1 credit) charges
// one, even submitted twice, and with no credit it says so and offers nothing to confirm.
func TestBrowserRebuildDialog(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("dialog@example.com")
	projectID, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)
	s.Host.KillFromDashboard(t, sb.ProviderID)
	c.WaitSandbox(sandboxID, "killed", 30*time.Second)

	browser, dash := s.Browse(t, "dialog@example.com")
	card := "#" + views.DOMID(views.Card, projectID)
	dash.WaitFor(t, "the card gone", statusIs(views.Card, projectID, "killed")+" && "+streamSettled(views.Card, projectID))
	before := len(dash.Requests())

	click(t, dash, card+" [data-testid=rebuild]")
	dash.WaitFor(t, "the dialog open", dialogOpen)
	dash.WaitFor(t, "its question", textIs("#rebuild-title", "Rebuild preview?")+" && "+
		textIs("#rebuild-dialog [data-testid=rebuild-line]", "This will use 1 build credit. Continue?")+" && "+
		textIs("#rebuild-dialog [data-testid=balance]", "You have 9 credits.")+" && "+
		textIs("#rebuild-dialog [data-testid=rebuild-confirm]", "Rebuild (1 credit)"))
	if !apptest.Eval[bool](t, dash, `document.activeElement.matches("[data-testid=rebuild-confirm]")`) {
		t.Fatal("the focus is not on the dialog's first button")
	}
	dash.Do(t, chromedp.KeyEvent(kb.Escape))
	dash.WaitFor(t, "Escape to close the dialog", dialogClosed)

	click(t, dash, card+" [data-testid=rebuild]")
	dash.WaitFor(t, "the dialog open again", dialogOpen)
	click(t, dash, "#rebuild-dialog [data-testid=rebuild-cancel]")
	dash.WaitFor(t, "Cancel to close the dialog", dialogClosed)
	if n := rebuildPosts(dash, before); n != 0 || c.Credits() != 9 {
		t.Fatalf("Escape and Cancel sent %d rebuilds; credits %d", n, c.Credits())
	}

	// Confirmed, with a double click: one rebuild, one credit, the card and the header follow.
	click(t, dash, card+" [data-testid=rebuild]")
	dash.WaitFor(t, "the dialog open a third time", dialogOpen)
	apptest.Eval[bool](t, dash, `window.sandmanNoReload = true`)
	apptest.Eval[bool](t, dash, `(() => { const b = document.querySelector("#rebuild-dialog [data-testid=rebuild-confirm]"); b.click(); b.click(); return true; })()`)
	dash.WaitFor(t, "the dialog closed by its answer", dialogClosed)
	dash.WaitFor(t, "the card building the new sandbox", fmt.Sprintf(`!!document.querySelector(%s) && document.querySelector(%s).dataset.status !== "killed"`, jsString(card), jsString(card)))
	dash.WaitFor(t, "the header's balance", textIs("[data-testid=credits]", "8 credits"))
	if !apptest.Eval[bool](t, dash, `window.sandmanNoReload === true`) {
		t.Fatal("the answer reloaded the page: htmx did not send it")
	}
	// The keyboard's place: the focus is in the card the answer replaced (and stays there as
	// the build's stages replace it in turn).
	dash.WaitFor(t, "the focus in the card", `document.getElementById(`+jsString(views.DOMID(views.Card, projectID))+`)?.contains(document.activeElement)`)
	var list []struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	fresh := c.WaitSandbox(list[0].Sandbox.ID, "running", 90*time.Second)
	if fresh.ID == sandboxID || c.Credits() != 8 {
		t.Fatalf("after one confirmed rebuild: sandbox %s, credits %d", fresh.ID, c.Credits())
	}

	// From the build page, the form submitted twice as a browser may (no htmx in between): the
	// same key, one charge.
	s.Host.KillFromDashboard(t, fresh.ProviderID)
	c.WaitSandbox(fresh.ID, "killed", 30*time.Second)
	page := browser.Open(t, s.URL()+"/projects/"+projectID)
	page.WaitFor(t, "the pane gone", statusIs(views.Pane, projectID, "killed")+" && "+pageSettled)
	click(t, page, "[data-testid=preview-pane] [data-testid=rebuild]")
	page.WaitFor(t, "the dialog open on the build page", dialogOpen)
	statuses := apptest.Eval[[]int](t, page, `(async () => {
		const form = document.querySelector("#rebuild-dialog [data-testid=rebuild-confirm]").form;
		const send = () => fetch(form.action, {method: "POST", body: new URLSearchParams(new FormData(form)), redirect: "manual"});
		const answers = await Promise.all([send(), send()]);
		return answers.map(a => a.type === "opaqueredirect" ? 303 : a.status);
	})()`, chromedp.EvalAwaitPromise)
	if len(statuses) != 2 || statuses[0] != 303 || statuses[1] != 303 {
		t.Fatalf("the form posted twice answered %v", statuses)
	}
	if n := c.Credits(); n != 7 {
		t.Fatalf("credits after a rebuild form submitted twice: %d, want 7", n)
	}
	page.Do(t, chromedp.KeyEvent(kb.Escape))
	page.WaitFor(t, "the dialog closed", dialogClosed)
	page.WaitFor(t, "the pane building", statusIs(views.Pane, projectID, "starting")+" || "+statusIs(views.Pane, projectID, "running"))
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	third := c.WaitSandbox(list[0].Sandbox.ID, "running", 90*time.Second)

	// No credit left: the dialog says so and offers nothing to confirm.
	if _, err := s.Pool().Exec(context.Background(), "UPDATE users SET credits = 0"); err != nil {
		t.Fatal(err)
	}
	s.Host.KillFromDashboard(t, third.ProviderID)
	page.WaitFor(t, "the pane gone again", statusIs(views.Pane, projectID, "killed"))
	click(t, page, "[data-testid=preview-pane] [data-testid=rebuild]")
	page.WaitFor(t, "the dialog without credits", dialogOpen+" && "+
		textIs("#rebuild-dialog [data-testid=no-credits]", "You have no build credits left, so this preview can't be rebuilt.")+
		` && !document.querySelector("#rebuild-dialog [data-testid=rebuild-confirm]")`)
	click(t, page, "#rebuild-dialog [data-testid=rebuild-cancel]")
	page.WaitFor(t, "Close to close it", dialogClosed)
	if dir := screenshotDir(t); dir != "" {
		click(t, page, "[data-testid=preview-pane] [data-testid=rebuild]")
		page.WaitFor(t, "the dialog open for the picture", dialogOpen)
		page.SaveScreenshot(t, filepath.Join(dir, "real-dialog-no-credits-1280.png"))
	}
}

// The build page's history follows each change live, newest first, naming its cause: the
// founder's pause, an idle pause, a provider's kill and a rebuild.
func TestBrowserHistoryLive(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true, Config: func(c *app.Config) { c.Lifecycle.IdleTimeout = 15 * time.Second }})
	c := s.NewClient(t)
	c.SignUp("history@example.com")
	projectID, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)
	// The build may have taken longer than the idle timeout: say the founder is here.
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/activity", nil, nil), http.StatusOK)

	browser, _ := s.Browse(t, "history@example.com")
	page := browser.Open(t, s.URL()+"/projects/"+projectID)
	page.WaitFor(t, "the pane running", statusIs(views.Pane, projectID, "running")+" && "+pageSettled)
	page.WaitFor(t, "the history so far", historyTop("Preview ready"))
	page.WaitFor(t, "the awake line", textIs("[data-testid=awake]", "Awake while this page is open · sleeps 15 s after you leave"))
	shot := func(name string) {
		if dir := screenshotDir(t); dir != "" {
			for _, w := range []int64{1280, apptest.Phone} {
				page.Viewport(t, w, 844)
				page.SaveScreenshot(t, filepath.Join(dir, fmt.Sprintf("real-%s-%d.png", name, w)))
			}
			page.Viewport(t, 1280, 844)
		}
	}
	page.FrameText(t, sb.PreviewURL, "Visits: ")
	shot("running")

	click(t, page, "[data-testid=preview-pane] [data-testid=pause]")
	page.WaitFor(t, "the founder's pause in the history", historyTop("Paused by you"))
	page.WaitFor(t, "the pane sleeping", statusIs(views.Pane, projectID, "paused")+" && "+
		textIs("[data-testid=why-text]", "Paused by you"))
	shot("sleeping")

	click(t, page, "[data-testid=preview-pane] [data-testid=resume]")
	page.WaitFor(t, "the resume in the history", historyTop("Resumed by you"))
	// The page reports activity at most once a minute: the idle timeout passes first.
	page.WaitFor(t, "the idle pause in the history", historyTop("Paused after 15 s without activity"))
	page.WaitFor(t, "the pane saying why", textIs("[data-testid=why-text]", "Paused after 15 s without activity"))

	click(t, page, "[data-testid=preview-pane] [data-testid=resume]")
	page.WaitFor(t, "running again", historyTop("Resumed by you")+" && "+statusIs(views.Pane, projectID, "running"))
	s.Host.KillFromDashboard(t, sb.ProviderID)
	page.WaitFor(t, "the provider's kill in the history", historyTop("Stopped by the provider"))
	shot("gone")

	click(t, page, "[data-testid=preview-pane] [data-testid=rebuild]")
	page.WaitFor(t, "the dialog", dialogOpen)
	click(t, page, "#rebuild-dialog [data-testid=rebuild-confirm]")
	page.WaitFor(t, "the rebuild in the history", historyTop("Rebuilt from your saved files (1 credit)")+" || "+historyTop("Preview ready"))
	page.WaitFor(t, "the rebuilt preview ready", historyTop("Preview ready")+" && "+statusIs(views.Pane, projectID, "running"))
	texts := apptest.Eval[[]string](t, page, `[...document.querySelectorAll("[data-testid=history-entry]")].map(li => li.textContent.trim().replace(/\s+/g, " "))`)
	want := []string{"Preview ready", "Rebuilt from your saved files (1 credit)", "Stopped by the provider", "Resumed by you",
		"Resume started by you", "Paused after 15 s without activity", "Resumed by you", "Resume started by you", "Paused by you",
		"Preview ready", "Build started (1 credit)"}
	if len(texts) != len(want) {
		t.Fatalf("history %q, want %q", texts, want)
	}
	for i, w := range want {
		if !strings.HasSuffix(texts[i], " "+w) || !strings.Contains(texts[i], "ago") && !strings.HasPrefix(texts[i], "just now") {
			t.Fatalf("history entry %d is %q, want a time and %q (all: %q)", i, texts[i], w, texts)
		}
	}
	if !apptest.Eval[bool](t, page, `[...document.querySelectorAll("[data-testid=history-entry] time")].every(el => !isNaN(Date.parse(el.getAttribute("datetime"))))`) {
		t.Fatal("a history entry has no exact time")
	}
}

// A running card counts down to its idle pause by itself, with no request; Keep awake moves
// lastActiveAt; and a page that keeps the preview awake moves every card's countdown live,
// without reloading the preview it shows.
func TestBrowserCountdownAndKeepAwake(t *testing.T) {
	t.Parallel()
	// A minute and a bit: the countdown crosses from "1 min" to "less than a minute" within
	// seconds of Keep awake.
	s := start(t, apptest.Options{Webhooks: true, Config: func(c *app.Config) { c.Lifecycle.IdleTimeout = 63 * time.Second }})
	c := s.NewClient(t)
	c.SignUp("awake@example.com")
	projectID, sandboxID := c.BuildCounter()
	browser, dash := s.Browse(t, "awake@example.com")
	card := "#" + views.DOMID(views.Card, projectID)
	dash.WaitFor(t, "the card running", statusIs(views.Card, projectID, "running"))
	dash.WaitFor(t, "the event stream", streamSettled(views.Card, projectID))

	var before struct{ LastActiveAt time.Time }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/sandboxes/"+sandboxID, nil, &before), http.StatusOK)
	deadline := func() string {
		return apptest.Eval[string](t, dash, `document.querySelector("`+card+` [data-sleeps-at]").dataset.sleepsAt`)
	}
	was := deadline()
	var moved struct{ LastActiveAt time.Time }
	for {
		// Activity counts at most once a second per sandbox: press until it counts.
		click(t, dash, card+" [data-testid=keep-awake]")
		dash.WaitFor(t, "the card answered", `!document.querySelector("`+card+` [data-testid=keep-awake]").disabled`)
		apptest.RequireStatus(t, c.API(http.MethodGet, "/api/sandboxes/"+sandboxID, nil, &moved), http.StatusOK)
		if moved.LastActiveAt.After(before.LastActiveAt) {
			break
		}
	}
	dash.WaitFor(t, "the new deadline in the card", fmt.Sprintf(`document.querySelector("%s [data-sleeps-at]").dataset.sleepsAt > %s`, card, jsString(was)))
	dash.WaitFor(t, "a minute left", textIs(card+" [data-testid=sleeps-in]", "Sleeping in 1 min"))
	quiet := len(dash.Requests())
	dash.WaitFor(t, "the countdown to move by itself", textIs(card+" [data-testid=sleeps-in]", "Sleeping in less than a minute"))
	assertNoSandmanRequests(t, s.URL(), "counting dashboard", dash.Requests()[quiet:])
	if dir := screenshotDir(t); dir != "" {
		dash.SaveScreenshot(t, filepath.Join(dir, "real-dashboard-running-1280.png"))
	}

	// The build page, open in another tab, keeps the preview awake: its activity report moves
	// the deadline, and the dashboard's card follows without asking.
	was = deadline()
	page := browser.Open(t, s.URL()+"/projects/"+projectID)
	page.WaitFor(t, "the pane running", statusIs(views.Pane, projectID, "running"))
	apptest.Eval[bool](t, page, `document.querySelector("[data-testid=preview-frame]").sandmanOld = true`)
	dash.WaitFor(t, "the card's deadline moved by the build page", fmt.Sprintf(`document.querySelector("%s [data-sleeps-at]").dataset.sleepsAt > %s`, card, jsString(was)))
	dash.WaitFor(t, "a minute left again", textIs(card+" [data-testid=sleeps-in]", "Sleeping in 1 min"))
	assertNoSandmanRequests(t, s.URL(), "counting dashboard", dash.Requests()[quiet:])
	// The same push reached the build page: same state, same preview, not reloaded.
	if !apptest.Eval[bool](t, page, `document.querySelector("[data-testid=preview-frame]").sandmanOld === true`) {
		t.Fatal("a push of the same state reloaded the preview")
	}
}

// An action's answer that comes back after the stream replaced the fragment it targets is
// dropped: swapped into that detached fragment, it took the preview's frame (kept by its id
// with hx-preserve) out of the page, and the build page showed no preview until reloaded. The
// race is made on purpose: Keep awake is sent, and the pane drawn again before its answer.
func TestBrowserLateAnswerLeavesThePreviewInPlace(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("late-answer@example.com")
	projectID, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)
	_, page := s.Browse(t, "late-answer@example.com")
	page.Do(t, chromedp.Navigate(s.URL()+"/projects/"+projectID))
	page.WaitFor(t, "the pane running", statusIs(views.Pane, projectID, "running")+" && "+streamSettled(views.Pane, projectID))
	page.FrameText(t, sb.PreviewURL, "Visits")
	pane := jsString(views.DOMID(views.Pane, projectID))
	apptest.Eval[bool](t, page, `(() => {
		const pane = document.getElementById(`+pane+`);
		htmx.ajax("POST", "/sandboxes/`+sandboxID+`/keep-awake", {target: pane, swap: "outerHTML"}).then(() => { window.answered = true; });
		pane.replaceWith(pane.cloneNode(true)); // the stream draws the same state again
		return true;
	})()`)
	page.WaitFor(t, "the answer", `window.answered === true`)
	if !apptest.Eval[bool](t, page, `!!document.getElementById(`+pane+`).querySelector("[data-testid=preview-frame]")`) {
		t.Fatal("the late answer took the preview out of the page")
	}
}

// With JavaScript off, a founder still resumes and rebuilds: the buttons are forms that post
// and come back, and the rebuild asks on a page of its own.
func TestBrowserWithoutJavaScript(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("nojs-browser@example.com")
	projectID, sandboxID := c.BuildCounter()
	c.Pause(sandboxID)

	browser := apptest.NewBrowser(t)
	tab := browser.OpenWithoutJavaScript(t, s.URL()+"/login")
	tab.LogIn(t, s.URL(), "nojs-browser@example.com")
	if !apptest.Eval[bool](t, tab, `document.documentElement.classList.contains("no-js") && typeof htmx === "undefined"`) {
		t.Fatal("the page ran its scripts")
	}
	card := "#" + views.DOMID(views.Card, projectID)
	// Without live updates a person reloads to see the news.
	reloadUntil := func(what, cond string) {
		t.Helper()
		testkit.Until(t, 30*time.Second, "reloading to show "+what, func() bool {
			if apptest.Eval[bool](t, tab, cond) {
				return true
			}
			tab.Do(t, chromedp.Reload())
			return false
		})
	}
	reloadUntil("the card sleeping", statusIs(views.Card, projectID, "paused"))
	tab.Do(t, chromedp.Click(chromedp.CSS(card+" [data-testid=resume]")))
	tab.WaitFor(t, "back on the dashboard", `location.pathname === "/" && `+
		`["resuming", "running"].includes(document.getElementById(`+jsString(views.DOMID(views.Card, projectID))+`)?.dataset.status)`)
	sb := c.WaitSandbox(sandboxID, "running", 60*time.Second)
	reloadUntil("the card running", statusIs(views.Card, projectID, "running"))
	if !apptest.Eval[bool](t, tab, `getComputedStyle(document.querySelector("`+card+` [data-testid=copy-url]")).display === "none"`) {
		t.Fatal("Copy URL shows though it cannot work without JavaScript")
	}

	s.Host.KillFromDashboard(t, sb.ProviderID)
	c.WaitSandbox(sandboxID, "killed", 30*time.Second)
	tab.Do(t, chromedp.Navigate(s.URL()+"/projects/"+projectID))
	tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=preview-pane] [data-testid=rebuild]")))
	tab.WaitFor(t, "the rebuild's question as a page", `location.pathname === "/projects/`+projectID+`/rebuild" && `+
		textIs("#rebuild-title", "Rebuild preview?")+" && "+textIs("[data-testid=balance]", "You have 9 credits."))
	if dir := screenshotDir(t); dir != "" {
		tab.SaveScreenshot(t, filepath.Join(dir, "real-nojs-rebuild-page-1280.png"))
	}
	tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=rebuild-confirm]")))
	tab.WaitFor(t, "back on the build page, rebuilding", `location.pathname === "/projects/`+projectID+`" && `+
		`["starting", "running"].includes(document.querySelector("[data-testid=preview-pane]")?.dataset.status)`)
	if n := c.Credits(); n != 8 {
		t.Fatalf("credits after a build and a rebuild: %d", n)
	}
	tab.WaitFor(t, "the header's balance", textIs("[data-testid=credits]", "8 credits"))
}
