package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
)

// The build page's buttons, driven as htmx drives them, through build → pause → resume →
// provider kill → rebuild with its confirmation, and the rebuild refused without credits.
func TestPreviewButtons(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("buttons@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	page := c.Get("/projects/" + p.ID)
	apptest.RequireContains(t, page.Body, `data-testid="build"`)
	buildKey := regexpFind(t, page.Body, `name="idempotencyKey" value="([^"]+)"`)
	// The page's key is its own: rendering it again gives the same key, so one rendered form
	// submitted twice charges once.
	if again := regexpFind(t, c.Get("/projects/"+p.ID).Body, `name="idempotencyKey" value="([^"]+)"`); again != buildKey {
		t.Fatalf("the build form's key changed between renders: %q, %q", buildKey, again)
	}

	r := c.HTMX(http.MethodPost, "/projects/"+p.ID+"/build", url.Values{"idempotencyKey": {buildKey}})
	apptest.RequireStatus(t, r, http.StatusOK)
	apptest.RequireContains(t, r.Body, `id="pane-`+p.ID+`"`)
	apptest.RequireContains(t, r.Body, `data-status="starting"`)
	// The header's balance follows, out of band.
	if b := apptest.ByTestID(t, r.Body, "credits"); b.Text != "9 credits" || b.Attrs["hx-swap-oob"] == "" {
		t.Fatalf("the answer's balance %+v, want 9 credits out of band", b)
	}
	// A double click sends the same key again: the same build, not a second charge.
	apptest.RequireStatus(t, c.HTMX(http.MethodPost, "/projects/"+p.ID+"/build", url.Values{"idempotencyKey": {buildKey}}), http.StatusOK)
	if n := c.Credits(); n != 9 {
		t.Fatalf("credits after one build clicked twice: %d", n)
	}
	var list []struct {
		Sandbox struct{ ID string }
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	sbID := list[0].Sandbox.ID
	sb := c.WaitSandbox(sbID, "running", 90*time.Second)
	page = c.Get("/projects/" + p.ID)
	apptest.RequireContains(t, page.Body, "Live preview ready")
	apptest.RequireContains(t, page.Body, `hx-post="/sandboxes/`+sbID+`/pause"`)

	r = c.HTMX(http.MethodPost, "/sandboxes/"+sbID+"/pause", nil)
	apptest.RequireStatus(t, r, http.StatusOK)
	c.WaitSandbox(sbID, "paused", 30*time.Second)
	apptest.RequireContains(t, c.Get("/projects/"+p.ID).Body, `data-testid="resume"`)

	r = c.HTMX(http.MethodPost, "/sandboxes/"+sbID+"/resume", nil)
	apptest.RequireStatus(t, r, http.StatusOK)
	// The answer is the pane as it stands after the click: resuming, or already running when
	// the resume job (a few milliseconds on sandboxd) finished before the pane was read.
	if !strings.Contains(r.Body, `data-status="resuming"`) && !strings.Contains(r.Body, `data-status="running"`) {
		t.Fatalf("the resume button answered a pane that is neither resuming nor running: %.600s", r.Body)
	}
	c.WaitSandbox(sbID, "running", 60*time.Second)

	s.Host.KillFromDashboard(t, sb.ProviderID)
	c.WaitSandbox(sbID, "killed", 10*time.Second)
	apptest.RequireContains(t, c.Get("/projects/"+p.ID).Body, `data-testid="rebuild"`)
	// Resuming a gone sandbox is refused with a reason, and nothing changes.
	r = c.HTMX(http.MethodPost, "/sandboxes/"+sbID+"/resume", nil)
	apptest.RequireStatus(t, r, http.StatusConflict)
	apptest.RequireContains(t, r.Body, "rebuild it instead")

	confirm := c.HTMX(http.MethodGet, "/projects/"+p.ID+"/rebuild?target=pane-"+p.ID, nil)
	apptest.RequireStatus(t, confirm, http.StatusOK)
	apptest.RequireContains(t, confirm.Body, "This will use 1 build credit. Continue?")
	key := regexpFind(t, confirm.Body, `name="idempotencyKey" value="([^"]+)"`)
	r = c.HTMX(http.MethodPost, "/projects/"+p.ID+"/rebuild", url.Values{"idempotencyKey": {key}})
	apptest.RequireStatus(t, r, http.StatusOK)
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	fresh := c.WaitSandbox(list[0].Sandbox.ID, "running", 90*time.Second)
	if fresh.ID == sbID || !fresh.Recreated {
		t.Fatalf("rebuild gave %+v", fresh)
	}
	if n := c.Credits(); n != 8 {
		t.Fatalf("credits after a build and a rebuild: %d", n)
	}

	// Without credits: the dialog says so, and a rebuild anyway is a 402 that changes nothing.
	if _, err := s.Pool().Exec(context.Background(), "UPDATE users SET credits = 0"); err != nil {
		t.Fatal(err)
	}
	confirm = c.HTMX(http.MethodGet, "/projects/"+p.ID+"/rebuild?target=pane-"+p.ID, nil)
	apptest.RequireContains(t, confirm.Body, `data-testid="no-credits"`)
	r = c.HTMX(http.MethodPost, "/projects/"+p.ID+"/rebuild", url.Values{"idempotencyKey": {"no-credit"}})
	apptest.RequireStatus(t, r, http.StatusPaymentRequired)
	apptest.RequireContains(t, r.Body, "no build credits left")
	c.WaitSandbox(fresh.ID, "running", time.Second)
}

// regexpFind returns the first group of pattern in s.
func regexpFind(t *testing.T, s, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("%q not found in %.800s", pattern, s)
	}
	return m[1]
}
