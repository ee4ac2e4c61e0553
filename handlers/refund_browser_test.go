package handlers_test

import (
	"fmt"
	"net/http"
	"testing"

	"sandman/app/apptest"
	"sandman/sandboxd"
	"sandman/views"
)

// TestBrowserRefundReachesTheOpenPage: a build the provider fails refunds its credit in a worker,
// not in answer to a click; the open build page shows the failure and the refunded balance in
// its header with no reload, through the live feed.
func TestBrowserRefundReachesTheOpenPage(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("refund@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)

	browser, _ := s.Browse(t, "refund@example.com")
	page := browser.Open(t, s.URL()+"/projects/"+p.ID)
	page.WaitFor(t, "the event stream", `document.querySelector("[sse-connect]")?.["htmx-internal-data"]?.sseEventSource?.readyState === 1`)
	apptest.Eval[bool](t, page, `window.sandmanNoReload = true`)
	header := func(credits string) string {
		return fmt.Sprintf(`document.querySelector("[data-testid=credits]")?.innerText === %q`, credits)
	}
	page.WaitFor(t, "the header's 10 credits", header("10 credits"))

	// The provider refuses every create; the first refusal takes two seconds, while the page
	// shows the credit spent.
	s.Host.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes", LatencyMs: 2000, Status: 503, Count: 1})
	s.Host.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes", Status: 503, Count: 1000})
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "k"}, nil), http.StatusAccepted)
	page.WaitFor(t, "the spent credit in the header", header("9 credits"))
	page.WaitFor(t, "the failure on the pane", fmt.Sprintf(`document.getElementById(%q).innerText.includes(%q)`,
		views.DOMID(views.Pane, p.ID), views.ProviderFailureText))
	page.WaitFor(t, "the refunded balance in the header", header("10 credits"))
	if c.Credits() != 10 {
		t.Fatalf("credits %d after the refund", c.Credits())
	}
	if !apptest.Eval[bool](t, page, `window.sandmanNoReload === true`) {
		t.Fatal("the page reloaded")
	}
}

// TestBrowserBalanceIsLiveOnEveryPage: a page that shows no card and no pane (new project) still
// follows the founder's balance in its header, when a build started elsewhere spends a credit
// and when the platform's failure gives it back.
func TestBrowserBalanceIsLiveOnEveryPage(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("balance@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)

	browser, _ := s.Browse(t, "balance@example.com")
	page := browser.Open(t, s.URL()+"/projects/new")
	page.WaitFor(t, "the event stream", `document.querySelector("[sse-connect]")?.["htmx-internal-data"]?.sseEventSource?.readyState === 1`)
	apptest.Eval[bool](t, page, `window.sandmanNoReload = true`)
	header := func(credits string) string {
		return fmt.Sprintf(`document.querySelector("[data-testid=credits]")?.innerText === %q`, credits)
	}
	page.WaitFor(t, "the header's 10 credits", header("10 credits"))

	s.Host.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes", LatencyMs: 2000, Status: 503, Count: 1})
	s.Host.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes", Status: 503, Count: 1000})
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "k"}, nil), http.StatusAccepted)
	page.WaitFor(t, "the spent credit in the header", header("9 credits"))
	page.WaitFor(t, "the refunded balance in the header", header("10 credits"))
	if !apptest.Eval[bool](t, page, `window.sandmanNoReload === true`) {
		t.Fatal("the page reloaded")
	}
}
