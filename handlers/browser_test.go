package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

const chromiumPath = "/usr/bin/chromium"

// newBrowser starts one headless Chromium for the test; tabs are chromedp.NewContext(browser).
func newBrowser(t testing.TB) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("browser tests need Debian's Chromium at %s: run `make deps` (apt-get install -y chromium)", chromiumPath)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		// This machine has no internet: background fetches would only fail noisily.
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1100, 800))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return browser
}

// tab is one browser tab with the Sandman requests it made since recording started.
type tab struct {
	ctx context.Context
	mu  sync.Mutex
	log []string
}

// openTab opens url in a new tab of browser and records every request the page sends.
func openTab(t testing.TB, browser context.Context, url string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	tb := &tab{ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // opens the tab, so events can be subscribed
		t.Fatal(err)
	}
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	go func() {
		for ev, err := range requests {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.log = append(tb.log, ev.Request.Method+" "+ev.Request.URL)
			tb.mu.Unlock()
		}
	}()
	tb.do(t, chromedp.Navigate(url))
	return tb
}

func (tb *tab) do(t testing.TB, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// eval runs JavaScript in the tab and returns its result.
func eval[T any](t testing.TB, tb *tab, js string) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return v
}

// waitFor polls a JavaScript condition in the tab (the test's view, not the page's).
func (tb *tab) waitFor(t testing.TB, what, js string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(20*time.Millisecond)))
		if err == nil {
			return
		}
		// A navigation (the login form's redirect) replaces the page the poll ran in.
		if (strings.Contains(err.Error(), "context with specified id") || strings.Contains(err.Error(), "navigated or closed")) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		html, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s: %v\npage text:\n%.1500s", what, err, html)
	}
}

// requests returns every request the tab sent so far.
func (tb *tab) requests() []string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.log...)
}

// logIn signs in through the login form in tb, as a founder would.
func logIn(t testing.TB, tb *tab, base, email string) {
	t.Helper()
	tb.do(t, chromedp.Navigate(base+"/login"),
		chromedp.SendKeys(chromedp.ID("email"), email),
		chromedp.SendKeys(chromedp.ID("password"), "correct horse"),
		chromedp.Submit(chromedp.ID("password")))
	tb.waitFor(t, "the dashboard", `location.pathname === "/" && !!document.querySelector("[data-testid=project-card]")`)
}

func statusIs(kind, projectID, status string) string {
	return fmt.Sprintf(`document.querySelector("#%s-%s")?.dataset.status === %q`, kind, projectID, status)
}

// TestBrowserLiveUpdates opens the dashboard and the build page, changes the sandbox through
// the API and the provider, and checks both pages follow with no reload and no request of
// their own (the shared event stream lives in a worker, not in the pages).
func TestBrowserLiveUpdates(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{webhooks: true})
	c := s.newClient(t)
	c.signUp("browser@example.com")
	projectID, sandboxID := s.buildCounter(t, c)
	sb := c.waitSandbox(sandboxID, "running", time.Second)

	browser := newBrowser(t)
	dash := openTab(t, browser, s.srv.URL+"/login")
	logIn(t, dash, s.srv.URL, "browser@example.com")
	dash.waitFor(t, "the card running", statusIs("card", projectID, "running"))
	page := openTab(t, browser, s.srv.URL+"/projects/"+projectID)
	page.waitFor(t, "the pane running", statusIs("pane", projectID, "running"))
	for _, tb := range []*tab{dash, page} {
		tb.waitFor(t, "the event stream", `document.querySelector("[sse-connect]")?.["htmx-internal-data"]?.sseEventSource?.readyState === 1`)
		eval[bool](t, tb, `window.sandmanNoReload = true`)
	}
	eval[bool](t, page, `document.querySelector("[data-testid=preview-frame]").sandmanOld = true`)
	dashBefore, pageBefore := len(dash.requests()), len(page.requests())
	if dashBefore == 0 || pageBefore == 0 {
		t.Fatal("no request recorded while the pages loaded: the recorder sees nothing")
	}

	steps := []struct {
		name, status, heading string
		change                func()
	}{
		{"pause", "paused", "Your preview is sleeping.", func() {
			requireStatus(t, c.api(http.MethodPost, "/api/sandboxes/"+sandboxID+"/pause", nil, nil), http.StatusAccepted)
		}},
		{"resume", "running", "Live preview ready", func() {
			requireStatus(t, c.api(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
		}},
		{"provider kill", "killed", "Sandbox not found", func() { s.host.KillFromDashboard(t, sb.ProviderID) }},
	}
	for _, step := range steps {
		step.change()
		// The backend first, so a failure below is the page's, not the lifecycle's.
		c.waitSandbox(sandboxID, step.status, 30*time.Second)
		dash.waitFor(t, "the card "+step.status+" after "+step.name, statusIs("card", projectID, step.status))
		page.waitFor(t, "the pane "+step.status+" after "+step.name, statusIs("pane", projectID, step.status))
		page.waitFor(t, "the heading after "+step.name, fmt.Sprintf(`document.querySelector("#pane-%s").innerText.includes(%q)`, projectID, step.heading))
		if step.name == "resume" {
			// The pane came back with a fresh iframe, which loads the preview by itself.
			page.waitFor(t, "a fresh preview frame", `(() => { const f = document.querySelector("[data-testid=preview-frame]");
				return !!f && !f.sandmanOld && f.src.includes("`+sb.ProviderID+`"); })()`)
		}
	}
	for name, tb := range map[string]*tab{"dashboard": dash, "build page": page} {
		if !eval[bool](t, tb, `window.sandmanNoReload === true`) {
			t.Fatalf("the %s reloaded", name)
		}
	}
	assertNoSandmanRequests(t, s.srv.URL, "dashboard", dash.requests()[dashBefore:])
	assertNoSandmanRequests(t, s.srv.URL, "build page", page.requests()[pageBefore:])
}

// assertNoSandmanRequests fails when a page asked Sandman for anything: state must come only
// from the stream. Activity reports are the build page's own duty (at most once a minute).
func assertNoSandmanRequests(t *testing.T, base, name string, reqs []string) {
	t.Helper()
	for _, r := range reqs {
		_, url, _ := strings.Cut(r, " ")
		if strings.HasPrefix(url, base) && !strings.HasSuffix(url, "/activity") {
			t.Fatalf("the %s sent %s; all requests after the change: %q", name, r, reqs)
		}
	}
}

// TestBrowserTenTabs keeps ten tabs of one founder live over plain HTTP/1.1, where a browser
// opens at most six connections to a host: they share one stream.
func TestBrowserTenTabs(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{webhooks: true})
	c := s.newClient(t)
	c.signUp("tabs@example.com")
	projectID, sandboxID := s.buildCounter(t, c)

	browser := newBrowser(t)
	first := openTab(t, browser, s.srv.URL+"/login")
	logIn(t, first, s.srv.URL, "tabs@example.com")
	tabs := []*tab{first}
	for i := range 9 {
		url := s.srv.URL + "/"
		if i%2 == 0 {
			url = s.srv.URL + "/projects/" + projectID
		}
		tabs = append(tabs, openTab(t, browser, url))
	}
	waitAll := func(status string) {
		t.Helper()
		for i, tb := range tabs {
			kind := "card"
			if eval[bool](t, tb, `location.pathname.startsWith("/projects/")`) {
				kind = "pane"
			}
			tb.waitFor(t, fmt.Sprintf("tab %d %s %s", i, kind, status), statusIs(kind, projectID, status))
		}
	}
	waitAll("running")
	requireStatus(t, c.api(http.MethodPost, "/api/sandboxes/"+sandboxID+"/pause", nil, nil), http.StatusAccepted)
	waitAll("paused")
	requireStatus(t, c.api(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
	waitAll("running")
	if n := s.hub.Clients(); n > 2 {
		t.Fatalf("ten tabs hold %d event streams; they should share one", n)
	}
}
