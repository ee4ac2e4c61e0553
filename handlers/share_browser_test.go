package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/views"
)

// A share link in Chromium, as a founder and a visitor use it. The HTTP side is in
// share_test.go.

// visitorShows is the condition that the visitor's page shows the state.
func visitorShows(state string) string {
	return `document.querySelector("[data-testid=share-state]")?.dataset.state === ` + jsString(state)
}

// recordStates makes the visitor's page remember every state it shows from now on
// (window.shownStates), so a test can tell a state it passed through.
const recordStates = `(() => {
	window.shownStates = [document.querySelector("[data-testid=share-state]").dataset.state];
	new MutationObserver(() => {
		const s = document.querySelector("[data-testid=share-state]")?.dataset.state;
		if (s && window.shownStates[window.shownStates.length - 1] !== s) window.shownStates.push(s);
	}).observe(document.querySelector("main"), {childList: true, subtree: true});
	return true;
})()`

// The founder shares from the build page and a visitor follows the link: the running preview is
// the page; when the founder pauses it the visitor's page shows the holding page, wakes it for
// free and swaps the preview back in by itself; a preview asleep on a files-only snapshot wakes
// with its dev server started again; without JavaScript the Wake preview button does it; a
// provider's kill reaches the page live and the founder learns a visitor found it gone; New link
// ends the old link's page live, and Turn off ends the new one. Copy link copies the link. No
// credit is spent, the visitor's tab wakes once per sleep and never polls.
func TestBrowserShareLink(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("share-browser@example.com")
	projectID, sandboxID := c.BuildCounter()
	credits := c.Credits()

	_, founder := s.Browse(t, "share-browser@example.com")
	founder.Do(t, chromedp.Navigate(s.URL()+"/projects/"+projectID))
	founder.WaitFor(t, "the build page", pageSettled)
	click(t, founder, "[data-testid=share]")
	founder.WaitFor(t, "the link", `!!document.querySelector("[data-testid=share-url]")`)
	link := apptest.Eval[string](t, founder, `document.querySelector("[data-testid=share-url]").value`)
	if !strings.HasPrefix(link, s.URL()+"/s/") || apptest.Eval[string](t, founder, `document.querySelector("[data-testid=copy-link]").dataset.copy`) != link {
		t.Fatalf("the share section shows %q", link)
	}
	// Copy link puts the link on the clipboard.
	grantClipboard(t, founder, s.URL())
	founder.Do(t, chromedp.Click(chromedp.CSS("[data-testid=copy-link]")))
	founder.WaitFor(t, "Copy link says it copied", textIs("[data-testid=copy-link]", "Copied"))
	if got := apptest.Eval[string](t, founder, `navigator.clipboard.readText()`, chromedp.EvalAwaitPromise); got != link {
		t.Fatalf("Copy link copied %q, the link is %q", got, link)
	}

	// Running: the page is the preview, under a bar with the project's name.
	visitor := apptest.NewBrowser(t)
	tab := visitor.Open(t, link)
	tab.WaitFor(t, "the preview", visitorShows("live"))
	sb := c.WaitSandbox(sandboxID, "running", time.Second)
	tab.FrameText(t, sb.PreviewURL, "Visits")
	tab.WaitFor(t, "the bar", textIs("[data-testid=share-title]", "Counter · preview"))
	if apptest.Eval[string](t, tab, `document.querySelector("[data-testid=share-frame]").referrerPolicy`) != "no-referrer" {
		t.Fatal("the preview's frame may send the link as its Referer")
	}
	tab.WaitFor(t, "the link's stream", pageSettled)

	// The founder pauses while the visitor watches: the holding page, the wake, the preview again.
	apptest.Eval[bool](t, tab, recordStates)
	frame := apptest.Eval[string](t, tab, `document.querySelector("[data-testid=share-frame]").id`)
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/pause", nil, nil), http.StatusAccepted)
	tab.WaitFor(t, "the holding page, then the preview back", `window.shownStates.some(s => s === "sleeping" || s === "waking") && `+
		visitorShows("live")+` && document.querySelector("[data-testid=share-frame]").id !== `+jsString(frame))
	tab.FrameText(t, c.WaitSandbox(sandboxID, "running", time.Second).PreviewURL, "Visits")
	events := s.events(t, sandboxID)
	if !containsInOrder(events, "running→paused user requested", "paused→resuming visitor visitor_wake", "resuming→running visitor resumed") {
		t.Fatalf("the visitor's page did not wake the founder's pause: %q", events)
	}
	founder.WaitFor(t, "the founder's history", historyTop("Woken by a visitor of your share link"))

	// Asleep on a files-only snapshot, opened afresh: it says the app is starting again, and the
	// dev server is started again.
	tab.Do(t, chromedp.Navigate("about:blank"))
	if _, err := s.Pool().Exec(context.Background(), "UPDATE projects SET pause_kind = 'filesystem' WHERE id = $1", projectID); err != nil {
		t.Fatal(err)
	}
	c.Pause(sandboxID)
	var paused struct{ SnapshotKind string }
	if c.API(http.MethodGet, "/api/sandboxes/"+sandboxID, nil, &paused); paused.SnapshotKind != "filesystem" {
		t.Fatalf("paused with a %q snapshot, want a files-only one", paused.SnapshotKind)
	}
	path := strings.TrimPrefix(link, s.URL())
	apptest.RequireContains(t, s.NewClient(t).Get(path).Body, "the app is starting again. This may take a little longer.")
	tab.Do(t, chromedp.Navigate(link))
	tab.WaitFor(t, "the preview after a cold start", visitorShows("live"))
	// Nothing runs after a files-only snapshot: the preview answers because its dev server was
	// started again.
	tab.FrameText(t, c.WaitSandbox(sandboxID, "running", time.Second).PreviewURL, "Visits")

	// Without JavaScript: the Wake preview button, and a page that reloads until the preview runs.
	tab.Do(t, chromedp.Navigate("about:blank"))
	if _, err := s.Pool().Exec(context.Background(), "UPDATE projects SET pause_kind = 'memory' WHERE id = $1", projectID); err != nil {
		t.Fatal(err)
	}
	c.Pause(sandboxID)
	nojs := visitor.OpenWithoutJavaScript(t, link)
	nojs.WaitFor(t, "the sleeping page", visitorShows("sleeping")+` && typeof htmx === "undefined"`)
	nojs.WaitFor(t, "its words without JavaScript", `getComputedStyle(document.querySelector("#share-heading .no-js-only")).display !== "none" && `+
		`document.querySelector("#share-heading .no-js-only").textContent === "Counter is asleep" && `+
		`getComputedStyle(document.querySelector("[data-testid=wake]")).display !== "none"`)
	c.WaitSandbox(sandboxID, "paused", time.Second) // the page alone woke nothing
	nojs.Do(t, chromedp.Click(chromedp.CSS("[data-testid=wake]")))
	nojs.WaitFor(t, "the preview, after the page reloaded itself", visitorShows("live"))
	nojs.FrameText(t, c.WaitSandbox(sandboxID, "running", time.Second).PreviewURL, "Visits")

	// Killed at the provider while watched: the page says so; the founder learns a visitor found
	// it gone once the visitor opens the link again.
	tab.Do(t, chromedp.Navigate(link))
	tab.WaitFor(t, "the preview", visitorShows("live")+" && "+pageSettled)
	s.Host.KillFromDashboard(t, sb.ProviderID)
	tab.WaitFor(t, "the gone page", visitorShows("gone")+` && document.querySelector("[data-testid=share-heading]").textContent.trim() === "This preview isn't available right now."`)
	tab.Do(t, chromedp.Reload())
	tab.WaitFor(t, "the gone page again", visitorShows("gone")+" && "+pageSettled)
	founder.WaitFor(t, "the founder's history", historyTop("A visitor found it gone"))

	// New link while watched: the old link's page says it no longer works and stops listening;
	// the new link opens.
	click(t, founder, "[data-testid=new-link]")
	founder.WaitFor(t, "the new link", `!!document.querySelector("[data-testid=share-url]") && `+
		`document.querySelector("[data-testid=share-url]").value !== `+jsString(link))
	renewed := apptest.Eval[string](t, founder, `document.querySelector("[data-testid=share-url]").value`)
	tab.WaitFor(t, "the old link ended", visitorShows("ended")+` && document.querySelector("[data-testid=share-heading]").textContent.trim() === "This link doesn't work anymore."`)
	testkit.Until(t, 30*time.Second, "the visitor's stream closed", func() bool { return s.Hub().Clients() <= 1 })
	tab.Do(t, chromedp.Reload())
	tab.WaitFor(t, "the 404 page", textIs("[data-testid=share-heading]", "This link doesn't work anymore."))
	renewedPath := strings.TrimPrefix(renewed, s.URL())
	apptest.RequireStatus(t, s.NewClient(t).Get(renewedPath), http.StatusOK)

	// Turn off: the section offers Share again, and the new link no longer works either.
	click(t, founder, "[data-testid=turn-off]")
	founder.WaitFor(t, "the share section off", `!!document.querySelector("[data-testid=share]") && !document.querySelector("[data-testid=share-url]")`)
	apptest.RequireStatus(t, s.NewClient(t).Get(renewedPath), http.StatusNotFound)

	if got := c.Credits(); got != credits {
		t.Fatalf("visitors' wakes cost credits: %d, then %d", credits, got)
	}
	// Live updates, never polling: the tab asked for the link's page only when it was opened or
	// reloaded, and never for the preview's state.
	gets, wakes := 0, 0
	for _, r := range tab.Requests() {
		switch r {
		case "GET " + link:
			gets++
		case "POST " + link:
			wakes++
		}
		if strings.Contains(r, "/api/") {
			t.Errorf("the visitor's page sent %s", r)
		}
	}
	if gets != 5 {
		t.Errorf("the visitor's tab fetched its page %d times: opened three times and reloaded twice, it should have fetched it 5 times", gets)
	}
	// One wake each time the page found the preview asleep (paused while watched, opened on a
	// files-only snapshot): the stream's first state, the same as the page's, is not drawn
	// again, so its form is not sent a second time.
	if wakes != 2 {
		t.Errorf("the visitor's tab sent %d wakes, want 2", wakes)
	}
}

// containsInOrder reports whether want appear in list in this order (not necessarily adjacent).
func containsInOrder(list []string, want ...string) bool {
	for _, e := range list {
		if len(want) > 0 && e == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

// A visitor's page that stays visible keeps its preview awake past the idle timeout (it reports
// activity, here every third of a 9 s timeout), and once it closes the preview sleeps as usual.
func TestBrowserVisitorKeepsPreviewAwake(t *testing.T) {
	t.Parallel()
	const idle = 9 * time.Second
	s := start(t, apptest.Options{Webhooks: true, Config: func(c *app.Config) { c.Lifecycle.IdleTimeout = idle }})
	c := s.NewClient(t)
	c.SignUp("share-awake@example.com")
	projectID, sandboxID := c.BuildCounter()
	link := s.URL() + "/s/" + shareToken(t, c, projectID)

	tab := apptest.NewBrowser(t).Open(t, link)
	tab.WaitFor(t, "the preview", visitorShows("live"))
	c.WaitSandbox(sandboxID, "running", time.Minute)
	watched := len(s.events(t, sandboxID))
	since := time.Now()
	testkit.Until(t, 2*time.Minute, "three idle timeouts of watching", func() bool {
		if evs := s.events(t, sandboxID); len(evs) != watched {
			t.Fatalf("the preview changed while watched: %q", evs[watched:])
		}
		return time.Since(since) > 3*idle
	})
	reports := 0
	for _, r := range tab.Requests() {
		if r == "POST "+link+"/activity" {
			reports++
		}
	}
	if reports < 2 {
		t.Fatalf("the page reported activity %d times in three idle timeouts", reports)
	}

	tab.Do(t, chromedp.Navigate("about:blank"))
	c.WaitSandbox(sandboxID, "paused", 2*time.Minute)
	events := s.events(t, sandboxID)
	if last := events[len(events)-1]; last != "running→paused scheduler idle" {
		t.Fatalf("after the visitor left: %q", last)
	}
}

// Every visitor's page for everyone: axe-core finds nothing serious or critical at desktop and
// phone width, and nothing scrolls sideways at 390 px: each state, the link turned off while
// watched, a link that does not work, the page over the visitors' limit; and the founder's build
// page and card with a link on.
func TestBrowserSharePagesForEveryone(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.StartCredits = 20 }})
	c := s.NewClient(t)
	c.SignUp("share-everyone@example.com")
	browser := apptest.NewBrowser(t)
	var tab *apptest.Tab
	links, projects := map[string]string{}, map[string]string{}
	for _, f := range []struct{ state, want string }{
		{"running", "live"}, {"sleeping-files", "waking"}, {"resuming", "waking"}, {"starting", "starting"},
		{"gone-killed", "gone"}, {"unknown", "trouble"},
	} {
		projectID, _ := s.project(t, c, "A longer project name for "+f.state, f.state)
		links[f.state], projects[f.state] = s.URL()+"/s/"+shareToken(t, c, projectID), projectID
		if tab == nil {
			tab = browser.Open(t, links[f.state])
		} else {
			tab.Do(t, chromedp.Navigate(links[f.state]))
		}
		// A sleeping preview is woken by its page at once (no worker runs here: it stays waking).
		checkForEveryone(t, tab, "share-"+f.state, visitorShows(f.want)+" && "+pageSettled)
	}
	// Turned off while watched.
	c.Get("/")
	apptest.RequireStatus(t, c.PostForm("/projects/"+projects["unknown"]+"/share/off", url.Values{}), http.StatusSeeOther)
	checkForEveryone(t, tab, "share-ended", visitorShows("ended"))
	tab.Do(t, chromedp.Reload())
	checkForEveryone(t, tab, "share-not-found", textIs("[data-testid=share-heading]", "This link doesn't work anymore."))

	// Over the visitors' limit, without JavaScript: the Wake preview button answers a page that
	// says when to try again.
	projectID, _ := s.project(t, c, "Limited", "sleeping-memory")
	path := "/s/" + shareToken(t, c, projectID)
	testkit.Until(t, 30*time.Second, "the address over its limit", func() bool {
		return s.NewClient(t).Do(http.MethodPost, path, nil, nil).Status == http.StatusTooManyRequests
	})
	if _, err := s.Pool().Exec(context.Background(), "UPDATE sandboxes SET status = 'paused' WHERE project_id = $1", projectID); err != nil {
		t.Fatal(err)
	}
	nojs := browser.OpenWithoutJavaScript(t, s.URL()+path)
	nojs.WaitFor(t, "the sleeping page", visitorShows("sleeping"))
	nojs.ScriptsBack(t) // for axe-core: the page stays as drawn without JavaScript
	checkForEveryone(t, nojs, "share-sleeping-no-js", visitorShows("sleeping"))
	nojs.Do(t, chromedp.Click(chromedp.CSS("[data-testid=wake]")))
	checkForEveryone(t, nojs, "share-too-many", textIs("[data-testid=share-heading]", "Too many requests"))
	// With JavaScript (scripts run again from here), the page's own wake is refused: the flash
	// says why and the Wake preview button shows, to try again by hand.
	nojs.Do(t, chromedp.Click(chromedp.CSS("[data-testid=back]")))
	nojs.WaitFor(t, "the refused wake", visitorShows("sleeping")+` && /Try again in/.test(document.getElementById("flash").textContent) && `+
		`getComputedStyle(document.querySelector("[data-testid=wake]")).display !== "none"`)
	checkForEveryone(t, nojs, "share-wake-refused", visitorShows("sleeping"))

	// The founder's side: the build page with its link, the card that says Shared.
	shared, _ := s.project(t, c, "Shared one", "running")
	shareToken(t, c, shared)
	founder := browser.Open(t, s.URL()+"/login")
	founder.LogIn(t, s.URL(), "share-everyone@example.com")
	checkForEveryone(t, founder, "dashboard-shared", `!!document.querySelector("#`+views.DOMID(views.Card, shared)+` [data-testid=shared]")`)
	founder.Do(t, chromedp.Navigate(s.URL()+"/projects/"+shared))
	checkForEveryone(t, founder, "build-shared", `!!document.querySelector("[data-testid=share-url]")`)
}

// wakeSentBefore makes every page of the tab remember, in window.wakes, each POST it sends and
// whether htmx had started by then.
const wakeSentBefore = `window.wakes = [];
const sendFetch = window.fetch;
window.fetch = function (url, opts) {
	if ((opts?.method || "GET") === "POST") window.wakes.push({url: String(url), htmx: typeof window.htmx !== "undefined"});
	return sendFetch.apply(this, arguments);
};
const openXHR = XMLHttpRequest.prototype.open;
XMLHttpRequest.prototype.open = function (method, url) {
	if (method === "POST") window.wakes.push({url: String(url), htmx: typeof window.htmx !== "undefined"});
	return openXHR.apply(this, arguments);
};`

// A visitor waits for the resume, not for the page's scripts: the sleeping preview's wake leaves
// as soon as the page is parsed, before htmx has started, and only once.
func TestBrowserVisitorsPageWakesBeforeItsScriptsLoad(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb}) // no worker: the preview stays waking
	c := s.NewClient(t)
	c.SignUp("share-early@example.com")
	projectID, _ := s.project(t, c, "Early", "sleeping-memory")
	link := s.URL() + "/s/" + shareToken(t, c, projectID)
	tab := apptest.NewBrowser(t).Open(t, "about:blank")
	tab.Do(t, chromedp.Action[chromedp.Void](func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: wakeSentBefore})
		return chromedp.Void{}, err
	}))
	tab.Do(t, chromedp.Navigate(link))
	tab.WaitFor(t, "the waking page", visitorShows("waking")+" && "+pageSettled)
	wakes := apptest.Eval[[]struct {
		URL  string
		HTMX bool
	}](t, tab, `window.wakes.filter(w => !w.url.endsWith("/activity"))`)
	if len(wakes) != 1 || wakes[0].HTMX || !strings.HasSuffix(link, strings.TrimPrefix(wakes[0].URL, s.URL())) {
		t.Fatalf("the page's wakes: %+v; want one, to the link, sent before htmx started", wakes)
	}
}
