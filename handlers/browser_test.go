package handlers_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/views"
)

// statusIs is the JavaScript condition that the project's fragment shows status.
func statusIs(f views.Fragment, projectID, status string) string {
	return fmt.Sprintf(`document.getElementById(%q)?.dataset.status === %q`, views.DOMID(f, projectID), status)
}

// TestBrowserLiveUpdates opens the dashboard and the build page, changes the sandbox through
// the API and the provider, and checks both pages follow with no reload and no request of
// their own (the shared event stream lives in a worker, not in the pages).
func TestBrowserLiveUpdates(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("browser@example.com")
	projectID, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)

	browser, dash := s.Browse(t, "browser@example.com")
	dash.WaitFor(t, "the card running", statusIs(views.Card, projectID, "running"))
	page := browser.Open(t, s.URL()+"/projects/"+projectID)
	page.WaitFor(t, "the pane running", statusIs(views.Pane, projectID, "running"))
	// The iframe really shows the starter's page: the preview's origin (sandboxd's
	// *.localhost) is allowed by the production Content-Security-Policy, and it answers.
	page.FrameText(t, sb.PreviewURL, "Visits: ")
	for _, tb := range []*apptest.Tab{dash, page} {
		tb.WaitFor(t, "the event stream", `document.querySelector("[sse-connect]")?.["htmx-internal-data"]?.sseEventSource?.readyState === 1`)
		apptest.Eval[bool](t, tb, `window.sandmanNoReload = true`)
	}
	apptest.Eval[bool](t, page, `document.querySelector("[data-testid=preview-frame]").sandmanOld = true`)
	dashBefore, pageBefore := len(dash.Requests()), len(page.Requests())
	if dashBefore == 0 || pageBefore == 0 {
		t.Fatal("no request recorded while the pages loaded: the recorder sees nothing")
	}

	steps := []struct {
		name, status, heading string
		change                func()
	}{
		{"pause", "paused", "Your preview is sleeping.", func() {
			apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/pause", nil, nil), http.StatusAccepted)
		}},
		{"resume", "running", "Live preview ready", func() {
			apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
		}},
		{"provider kill", "killed", "Sandbox not found", func() { s.Host.KillFromDashboard(t, sb.ProviderID) }},
	}
	for _, step := range steps {
		step.change()
		// The backend first, so a failure below is the page's, not the lifecycle's.
		c.WaitSandbox(sandboxID, step.status, 30*time.Second)
		dash.WaitFor(t, "the card "+step.status+" after "+step.name, statusIs(views.Card, projectID, step.status))
		page.WaitFor(t, "the pane "+step.status+" after "+step.name, statusIs(views.Pane, projectID, step.status))
		page.WaitFor(t, "the heading after "+step.name, fmt.Sprintf(`document.getElementById(%q).innerText.includes(%q)`, views.DOMID(views.Pane, projectID), step.heading))
		if step.name == "resume" {
			// The pane came back with a fresh iframe, which loads the preview by itself.
			resumed := c.WaitSandbox(sandboxID, "running", time.Second)
			page.WaitFor(t, "a fresh preview frame", `(() => { const f = document.querySelector("[data-testid=preview-frame]");
				return !!f && !f.sandmanOld && f.src.startsWith(`+strconv.Quote(resumed.PreviewURL)+`); })()`)
			page.FrameText(t, resumed.PreviewURL, "Visits: ")
		}
	}
	for name, tb := range map[string]*apptest.Tab{"dashboard": dash, "build page": page} {
		if !apptest.Eval[bool](t, tb, `window.sandmanNoReload === true`) {
			t.Fatalf("the %s reloaded", name)
		}
	}
	assertNoSandmanRequests(t, s.URL(), "dashboard", dash.Requests()[dashBefore:])
	assertNoSandmanRequests(t, s.URL(), "build page", page.Requests()[pageBefore:])
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
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("tabs@example.com")
	projectID, sandboxID := c.BuildCounter()

	browser, first := s.Browse(t, "tabs@example.com")
	tabs := []*apptest.Tab{first}
	for i := range 9 {
		url := s.URL() + "/"
		if i%2 == 0 {
			url = s.URL() + "/projects/" + projectID
		}
		tabs = append(tabs, browser.Open(t, url))
	}
	kinds := make([]views.Fragment, len(tabs))
	for i, tb := range tabs {
		kinds[i] = views.Card
		if apptest.Eval[bool](t, tb, `location.pathname.startsWith("/projects/")`) {
			kinds[i] = views.Pane
		}
	}
	// waitAll waits until every tab shows status; a failure says what each tab shows and what the
	// sandbox really is, so a lost update and a change that never happened are told apart.
	waitAll := func(status string) {
		t.Helper()
		testkit.Eventually(t, 30*time.Second, "every tab to show "+status, func() error {
			var behind []string
			for i, tb := range tabs {
				js := fmt.Sprintf(`document.getElementById(%q)?.dataset.status ?? "none"`, views.DOMID(kinds[i], projectID))
				if got := apptest.Eval[string](t, tb, js); got != status {
					behind = append(behind, fmt.Sprintf("tab %d %s shows %s", i, kinds[i], got))
				}
			}
			if len(behind) == 0 {
				return nil
			}
			var sb apptest.Sandbox
			c.API(http.MethodGet, "/api/sandboxes/"+sandboxID, nil, &sb)
			return fmt.Errorf("sandbox is %s; %s", sb.Status, strings.Join(behind, "; "))
		})
	}
	waitAll("running")
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/pause", nil, nil), http.StatusAccepted)
	waitAll("paused")
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
	waitAll("running")
	if n := s.Hub().Clients(); n > 2 {
		t.Fatalf("ten tabs hold %d event streams; they should share one", n)
	}
}
