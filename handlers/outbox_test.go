package handlers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/sandboxd"
)

// hookReceiver is the founder's backend: a real HTTP server that keeps what it is sent.
type hookReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []hookDelivery
}

type hookDelivery struct {
	header http.Header
	body   []byte
	Type   string
	Data   map[string]any
}

func newHookReceiver(t *testing.T) *hookReceiver {
	t.Helper()
	rc := &hookReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := hookDelivery{header: r.Header.Clone(), body: body}
		_ = json.Unmarshal(body, &d)
		rc.mu.Lock()
		rc.got = append(rc.got, d)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *hookReceiver) deliveries() []hookDelivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

func (rc *hookReceiver) types() []string {
	var out []string
	for _, d := range rc.deliveries() {
		out = append(out, d.Type)
	}
	return out
}

type madeEndpoint struct {
	ID, URL, Secret, Description string
	Events                       []string
	Enabled                      bool
}

// A preview's life reaches the founder's endpoint as it happens: its build starting (with the
// credit it spends), ready, running, paused, resuming, a new version made and live, each signed so that a Standard Webhooks
// library verifies it, with the project and sandbox in its data; the feed replays the same
// events in the same order.
func TestAPreviewsLifeReachesItsWebhookSigned(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("hooks-life@example.com")
	rc := newHookReceiver(t)
	var ep madeEndpoint
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/webhooks", map[string]any{"url": rc.URL + "/hooks"}, &ep), http.StatusCreated)

	projectID, sandboxID := c.BuildCounter()
	c.WaitSandbox(sandboxID, "running", 2*time.Minute)
	c.Pause(sandboxID)
	c.WaitSandbox(sandboxID, "paused", time.Minute)
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
	c.WaitSandbox(sandboxID, "running", time.Minute)
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+projectID+"/versions", map[string]any{
		"files": []map[string]string{{"path": "notes.txt", "content": "a version for the webhook"}}}, nil), http.StatusCreated)
	want := []string{"build.started", "credits.changed", "build.ready", "preview.running", "preview.paused", "preview.resuming",
		"version.created", "version.live"}
	testkit.Eventually(t, time.Minute, "the preview's events", func() error {
		got := rc.types()
		for _, w := range want {
			if !slices.Contains(got, w) {
				return &missing{w, got}
			}
		}
		return nil
	})
	wh, err := standardwebhooks.NewWebhook(ep.Secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rc.deliveries() {
		if err := wh.Verify(d.body, d.header); err != nil {
			t.Errorf("%s does not verify: %v", d.Type, err)
		}
		if d.Type == "preview.paused" && (d.Data["projectId"] != projectID || d.Data["sandboxId"] != sandboxID || d.Data["state"] != "paused" ||
			d.Data["reason"] != "requested") {
			t.Errorf("preview.paused's data %v: want the project, the sandbox, state paused and reason requested", d.Data)
		}
	}

	// The sandbox's events in one order in both; credits.changed, of no sandbox, in its own.
	ofSandbox := want[:0:0]
	for _, w := range want {
		if w != "credits.changed" {
			ofSandbox = append(ofSandbox, w)
		}
	}
	delivered := filter(rc.types(), ofSandbox)
	// The feed holds an event back while an older transaction runs anywhere in the database's
	// cluster (other tests' too), so it may trail the deliveries for a moment.
	testkit.Eventually(t, 30*time.Second, "the feed to hold what was delivered", func() error {
		var feed struct {
			Events []struct{ ID, Type string }
			Next   string
		}
		if r := c.API(http.MethodGet, "/api/events?limit=100", nil, &feed); r.Status != http.StatusOK {
			return fmt.Errorf("GET /api/events: %d %s", r.Status, r.Body)
		}
		var fromFeed []string
		for _, e := range feed.Events {
			fromFeed = append(fromFeed, e.Type)
		}
		if !slices.Equal(filter(fromFeed, ofSandbox), delivered) || !slices.Contains(fromFeed, "credits.changed") ||
			!strings.HasSuffix(feed.Next, "-"+feed.Events[len(feed.Events)-1].ID) {
			return fmt.Errorf("the feed %v (next %q) and the deliveries %v differ", fromFeed, feed.Next, delivered)
		}
		return nil
	})
}

type missing struct {
	want string
	got  []string
}

func (m *missing) Error() string { return "no " + m.want + " among " + strings.Join(m.got, ", ") }

func filter(xs, keep []string) []string {
	var out []string
	for _, x := range xs {
		if slices.Contains(keep, x) {
			out = append(out, x)
		}
	}
	return out
}

// The webhooks' API answers as the rest of the JSON API: the secret in the answer that made the
// endpoint only, a refused URL a 422 naming why, a malformed body a 400, past 10 endpoints a
// 409, and another founder's endpoint or delivery a 404 on every route, as one that does not
// exist.
func TestWebhookRoutesAnswerAndKeepFoundersApart(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	owner, other := s.NewClient(t), s.NewClient(t)
	owner.SignUp("hooks-owner@example.com")
	other.SignUp("hooks-other@example.com")
	var ep madeEndpoint
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/webhooks",
		map[string]any{"url": "http://127.0.0.1:9/hooks", "events": []string{"preview.paused"}, "description": "ci"}, &ep), http.StatusCreated)
	if !strings.HasPrefix(ep.Secret, "whsec_") || !ep.Enabled || !slices.Equal(ep.Events, []string{"preview.paused"}) {
		t.Fatalf("made %+v", ep)
	}
	if r := owner.API(http.MethodGet, "/api/webhooks", nil, nil); r.Status != http.StatusOK || strings.Contains(r.Body, "whsec_") || !strings.Contains(r.Body, ep.ID) {
		t.Fatalf("the list: %d %s; want the endpoint without its secret", r.Status, r.Body)
	}
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/webhooks/"+ep.ID+"/test", nil, nil), http.StatusAccepted)
	var ds struct {
		Deliveries []struct{ ID, EventType string }
	}
	apptest.RequireStatus(t, owner.API(http.MethodGet, "/api/webhooks/"+ep.ID+"/deliveries", nil, &ds), http.StatusOK)
	if len(ds.Deliveries) != 1 || ds.Deliveries[0].EventType != "webhook.test" {
		t.Fatalf("deliveries %+v: want the test", ds.Deliveries)
	}
	delivery := ds.Deliveries[0].ID

	for _, c := range []struct {
		method, path string
		body         any
		status       int
		says         string
	}{
		{http.MethodPost, "/api/webhooks", map[string]any{"url": "http://169.254.169.254/latest"}, http.StatusUnprocessableEntity, `"code":"url_refused"`},
		{http.MethodPost, "/api/webhooks", map[string]any{"url": "http://169.254.169.254/latest"}, http.StatusUnprocessableEntity, "link-local"},
		{http.MethodPost, "/api/webhooks", map[string]any{"url": "http://127.0.0.1:9/x", "events": []string{"preview.exploded"}}, http.StatusUnprocessableEntity, "preview.exploded"},
		{http.MethodPost, "/api/webhooks", map[string]any{"url": "https://example.com", "colour": "red"}, http.StatusBadRequest, `"code":"bad_request"`},
		{http.MethodGet, "/api/events?after=yesterday", nil, http.StatusBadRequest, "after"},
		{http.MethodPatch, "/api/webhooks/" + ep.ID, map[string]any{"url": "ftp://example.com"}, http.StatusUnprocessableEntity, "https://"},
	} {
		r := owner.API(c.method, c.path, c.body, nil)
		if r.Status != c.status || !strings.Contains(r.Body, c.says) {
			t.Errorf("%s %s %v: %d %s; want %d saying %s", c.method, c.path, c.body, r.Status, r.Body, c.status, c.says)
		}
	}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/api/webhooks/" + ep.ID, nil},
		{http.MethodPatch, "/api/webhooks/" + ep.ID, map[string]any{"enabled": false}},
		{http.MethodDelete, "/api/webhooks/" + ep.ID, nil},
		{http.MethodPost, "/api/webhooks/" + ep.ID + "/rotate-secret", nil},
		{http.MethodPost, "/api/webhooks/" + ep.ID + "/test", nil},
		{http.MethodGet, "/api/webhooks/" + ep.ID + "/deliveries", nil},
		{http.MethodPost, "/api/webhooks/" + ep.ID + "/deliveries/" + delivery + "/retry", nil},
	} {
		if r := other.API(c.method, c.path, c.body, nil); r.Status != http.StatusNotFound {
			t.Errorf("another founder's %s %s: %d %s; want 404", c.method, c.path, r.Status, r.Body)
		}
	}
	var still madeEndpoint
	apptest.RequireStatus(t, owner.API(http.MethodGet, "/api/webhooks/"+ep.ID, nil, &still), http.StatusOK)
	if !still.Enabled || still.Secret != "" {
		t.Fatalf("after another founder's tries the endpoint is %+v", still)
	}
	for range 9 {
		apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/webhooks", map[string]any{"url": "http://127.0.0.1:9/more"}, nil), http.StatusCreated)
	}
	if r := owner.API(http.MethodPost, "/api/webhooks", map[string]any{"url": "http://127.0.0.1:9/eleventh"}, nil); r.Status != http.StatusConflict ||
		!strings.Contains(r.Body, `"code":"endpoint_limit"`) {
		t.Fatalf("an eleventh endpoint: %d %s; want 409 endpoint_limit", r.Status, r.Body)
	}
}

// The Webhooks page in Chromium, without JavaScript: a founder adds an endpoint (its secret
// shown once), sends a test that the receiver gets, rotates the secret, turns the endpoint off
// and deletes it. axe-core finds nothing serious and nothing scrolls sideways at 390 px.
func TestBrowserWebhooksPage(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("hooks-page@example.com")
	rc := newHookReceiver(t)
	b, _ := s.Browse(t, "hooks-page@example.com")

	tab := b.OpenWithoutJavaScript(t, s.URL()+"/settings/webhooks")
	tab.WaitFor(t, "the webhooks page", `!!document.querySelector("[data-testid=no-webhooks]")`)
	tab.Do(t, chromedp.SendKeys(chromedp.ID("webhook-url"), rc.URL+"/hooks"),
		chromedp.Click(chromedp.CSS("[data-testid=add-webhook]")))
	tab.WaitFor(t, "the secret shown", `!!document.querySelector("[data-testid=webhook-secret-made]")`)
	secret := apptest.Eval[string](t, tab, `document.querySelector("[data-testid=webhook-secret]").value`)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the page shows the secret %q", secret)
	}
	tab.ScriptsBack(t)
	checkForEveryone(t, tab, "webhooks-made", `!!document.querySelector("[data-testid=webhook-secret-made]")`)
	tab = b.OpenWithoutJavaScript(t, s.URL()+"/settings/webhooks")
	tab.WaitFor(t, "the list", `document.querySelectorAll("[data-testid=webhook]").length === 1`)
	if html := apptest.Eval[string](t, tab, `document.documentElement.outerHTML`); strings.Contains(html, secret) {
		t.Fatal("the page shows the secret again")
	}
	tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=webhook-test]")))
	tab.WaitFor(t, "the test queued", `!!document.querySelector("[data-testid=webhook-done]")`)
	testkit.Until(t, 30*time.Second, "the test event", func() bool { return slices.Contains(rc.types(), "webhook.test") })
	wh, _ := standardwebhooks.NewWebhook(secret)
	if err := wh.Verify(rc.deliveries()[0].body, rc.deliveries()[0].header); err != nil {
		t.Fatalf("the test event does not verify with the secret the page showed: %v", err)
	}
	tab = b.OpenWithoutJavaScript(t, s.URL()+"/settings/webhooks")
	tab.WaitFor(t, "the delivery listed", `document.querySelectorAll("[data-testid=delivery][data-state=delivered]").length === 1`)
	tab.ScriptsBack(t)
	checkForEveryone(t, tab, "webhooks-list", `document.querySelectorAll("[data-testid=delivery]").length === 1`)

	tab = b.OpenWithoutJavaScript(t, s.URL()+"/settings/webhooks")
	tab.WaitFor(t, "the list", `document.querySelectorAll("[data-testid=webhook]").length === 1`)
	tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=webhook-rotate]")))
	tab.WaitFor(t, "the new secret", `!!document.querySelector("[data-testid=webhook-secret-made]")`)
	if rotated := apptest.Eval[string](t, tab, `document.querySelector("[data-testid=webhook-secret]").value`); rotated == secret || !strings.HasPrefix(rotated, "whsec_") {
		t.Fatalf("the rotated secret is %q", rotated)
	}
	tab = b.OpenWithoutJavaScript(t, s.URL()+"/settings/webhooks")
	tab.WaitFor(t, "the list", `document.querySelectorAll("[data-testid=webhook]").length === 1`)
	tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=webhook-disable]")))
	tab.WaitFor(t, "the endpoint off", `!!document.querySelector("[data-testid=webhook-off]")`)
	tab.Do(t, chromedp.Click(chromedp.CSS("[data-testid=webhook-delete]")))
	tab.WaitFor(t, "the endpoint deleted", `!!document.querySelector("[data-testid=no-webhooks]")`)

	tab.Do(t, chromedp.SendKeys(chromedp.ID("webhook-url"), "http://169.254.169.254/"), chromedp.Click(chromedp.CSS("[data-testid=add-webhook]")))
	tab.WaitFor(t, "the URL's error", `!!document.querySelector("[data-testid=err-url]")`)
	tab.ScriptsBack(t)
	checkForEveryone(t, tab, "webhooks-error", `!!document.querySelector("[data-testid=err-url]")`)
}

// endpointWithDelivery gives the founder an endpoint (on a port nobody listens on) with one
// delivery, its test, for the sweeps' routes: their ids.
func endpointWithDelivery(t testing.TB, c *apptest.Client) (endpoint, delivery string) {
	t.Helper()
	var ep madeEndpoint
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/webhooks", map[string]any{"url": "http://127.0.0.1:9/sweep"}, &ep), http.StatusCreated)
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/webhooks/"+ep.ID+"/test", nil, nil), http.StatusAccepted)
	var ds struct{ Deliveries []struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/webhooks/"+ep.ID+"/deliveries", nil, &ds), http.StatusOK)
	if len(ds.Deliveries) != 1 {
		t.Fatalf("deliveries %+v: want the test", ds.Deliveries)
	}
	return ep.ID, ds.Deliveries[0].ID
}

// find waits for the first delivery of type typ that match accepts, and returns it.
func (rc *hookReceiver) find(t *testing.T, within time.Duration, typ string, match func(map[string]any) bool) hookDelivery {
	t.Helper()
	var found hookDelivery
	testkit.Eventually(t, within, typ, func() error {
		for _, d := range rc.deliveries() {
			if d.Type == typ && match(d.Data) {
				found = d
				return nil
			}
		}
		return &missing{typ + " with the data wanted", rc.types()}
	})
	return found
}

// Every change of a preview that has a webhook event reaches the founder's endpoint with the
// facts a program acts on: a version whose server exits (version.failed, problem.opened), the
// good version restored (version.live, problem.closed), a version made while the preview slept
// and live when it wakes (version.live), one that fails when it wakes (version.failed alone), a
// wake of a sandbox the provider lost (preview.resume_failed), and a build the provider failed
// (build.failed, its sandbox gone, the credit refunded).
func TestEveryPreviewEventReachesItsWebhook(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("hooks-every@example.com")
	rc := newHookReceiver(t)
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/webhooks", map[string]any{"url": rc.URL + "/hooks"}, nil), http.StatusCreated)
	of := func(project string) func(map[string]any) bool {
		return func(d map[string]any) bool { return d["projectId"] == project }
	}
	is := func(project, key string, want any) func(map[string]any) bool {
		return func(d map[string]any) bool { return d["projectId"] == project && d[key] == want }
	}

	pid, sandboxID := c.BuildCounter()
	c.WaitSandbox(sandboxID, "running", 2*time.Minute)
	r, _ := postVersion(t, c, pid, map[string]any{"files": []vfile{text("server.js", `throw new Error("broken on purpose")`)}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	rc.find(t, 30*time.Second, "version.failed", is(pid, "version", 2.0))
	opened := rc.find(t, 30*time.Second, "problem.opened", is(pid, "version", 2.0)).Data
	if opened["reason"] != "app" || opened["sandboxId"] != sandboxID || opened["problemId"] == nil {
		t.Errorf("problem.opened's data %v: want source app, the sandbox and the problem", opened)
	}
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+pid+"/versions/1/restore", map[string]any{}, nil), http.StatusCreated)
	rc.find(t, 30*time.Second, "version.live", is(pid, "version", 3.0))
	rc.find(t, 30*time.Second, "problem.closed", is(pid, "problemId", opened["problemId"]))

	// A version made while the preview sleeps is live when it wakes.
	c.Pause(sandboxID)
	c.WaitSandbox(sandboxID, "paused", time.Minute)
	r, _ = postVersion(t, c, pid, map[string]any{"files": []vfile{text("notes.txt", "made while it slept")}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
	sb := c.WaitSandbox(sandboxID, "running", time.Minute)
	if d := rc.find(t, 30*time.Second, "version.live", is(pid, "version", 4.0)).Data; d["reason"] != "woke_with_version" || d["sandboxId"] != sandboxID {
		t.Errorf("the wake's version.live data %v: want reason woke_with_version and the sandbox", d)
	}

	// One made while it sleeps that does not start fails when it wakes, and was never live.
	c.Pause(sandboxID)
	c.WaitSandbox(sandboxID, "paused", time.Minute)
	r, _ = postVersion(t, c, pid, map[string]any{"files": []vfile{text("server.js", `throw new Error("broken while it slept")`)}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
	c.WaitSandbox(sandboxID, "running", time.Minute)
	rc.find(t, 30*time.Second, "version.failed", is(pid, "version", 5.0))

	// The provider loses the sleeping sandbox: the wake fails.
	c.Pause(sandboxID)
	c.WaitSandbox(sandboxID, "paused", time.Minute)
	s.Host.Lose(t, sb.ProviderID)
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
	if d := rc.find(t, time.Minute, "preview.resume_failed", of(pid)).Data; d["sandboxId"] != sandboxID || d["state"] != "resume_failed" ||
		d["reason"] != "resume_not_found" {
		t.Errorf("preview.resume_failed's data %v: want the sandbox, state resume_failed, reason resume_not_found", d)
	}
	// The provider refuses every sandbox: the build fails, its sandbox is gone, the credit comes
	// back. Last, as the refusals open the client's circuit breaker.
	var failing struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &failing), http.StatusCreated)
	s.Host.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes", Status: 503, Count: 1000})
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+failing.ID+"/builds", map[string]string{"idempotencyKey": "k-every"}, nil),
		http.StatusAccepted)
	if d := rc.find(t, 90*time.Second, "build.failed", of(failing.ID)).Data; d["state"] != "failed" || d["reason"] != "provider" {
		t.Errorf("build.failed's data %v: want state failed, reason provider", d)
	}
	if d := rc.find(t, 30*time.Second, "preview.gone", of(failing.ID)).Data; d["state"] != "terminated" || d["sandboxId"] == nil {
		t.Errorf("preview.gone's data %v: want the sandbox, state terminated", d)
	}
	rc.find(t, 30*time.Second, "credits.changed", func(d map[string]any) bool { return d["reason"] == "refund" && d["delta"] == 1.0 })
	// A version's outcome is one event: a failed version was never live.
	for _, d := range rc.deliveries() {
		if d.Type == "version.live" && (d.Data["version"] == 2.0 || d.Data["version"] == 5.0) {
			t.Errorf("version.live of %v: versions 2 and 5 failed", d.Data)
		}
	}
}
