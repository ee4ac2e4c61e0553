package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// htmx posts a button's hx-vals the way htmx does: a form body, the CSRF header, HX-Request.
func (c *client) htmx(method, path string, vals url.Values) response {
	c.t.Helper()
	var body *strings.Reader
	if vals != nil {
		body = strings.NewReader(vals.Encode())
	} else {
		body = strings.NewReader("")
	}
	return c.do(method, path, body, map[string]string{"Content-Type": "application/x-www-form-urlencoded",
		"X-CSRF-Token": c.csrf, "HX-Request": "true"})
}

// The build page's buttons, driven as htmx drives them, through build → pause → resume →
// provider kill → rebuild with its confirmation, and the rebuild refused without credits.
func TestPreviewButtons(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{webhooks: true})
	c := s.newClient(t)
	c.signUp("buttons@example.com")
	var p struct{ ID string }
	requireStatus(t, c.api(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	page := c.get("/projects/" + p.ID)
	requireContains(t, page.body, `data-testid="build"`)

	r := c.htmx(http.MethodPost, "/projects/"+p.ID+"/build", url.Values{"idempotencyKey": {"b-1"}})
	requireStatus(t, r, http.StatusOK)
	requireContains(t, r.body, `id="pane-`+p.ID+`"`)
	requireContains(t, r.body, `data-status="starting"`)
	// The header's balance follows, out of band.
	requireContains(t, r.body, `id="credits" class="credits" data-testid="credits" hx-swap-oob="true">9 credits<`)
	// A double click sends the same key again: the same build, not a second charge.
	requireStatus(t, c.htmx(http.MethodPost, "/projects/"+p.ID+"/build", url.Values{"idempotencyKey": {"b-1"}}), http.StatusOK)
	if n := c.credits(); n != 9 {
		t.Fatalf("credits after one build clicked twice: %d", n)
	}
	var list []struct {
		Sandbox struct{ ID string }
	}
	requireStatus(t, c.api(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	sbID := list[0].Sandbox.ID
	sb := c.waitSandbox(sbID, "running", 90*time.Second)
	page = c.get("/projects/" + p.ID)
	requireContains(t, page.body, "Live preview ready")
	requireContains(t, page.body, `hx-post="/sandboxes/`+sbID+`/pause"`)

	r = c.htmx(http.MethodPost, "/sandboxes/"+sbID+"/pause", nil)
	requireStatus(t, r, http.StatusOK)
	c.waitSandbox(sbID, "paused", 30*time.Second)
	requireContains(t, c.get("/projects/"+p.ID).body, `data-testid="resume"`)

	r = c.htmx(http.MethodPost, "/sandboxes/"+sbID+"/resume", nil)
	requireStatus(t, r, http.StatusOK)
	requireContains(t, r.body, `data-status="resuming"`)
	c.waitSandbox(sbID, "running", 60*time.Second)

	s.host.KillFromDashboard(t, sb.ProviderID)
	c.waitSandbox(sbID, "killed", 10*time.Second)
	requireContains(t, c.get("/projects/"+p.ID).body, `data-testid="rebuild"`)
	// Resuming a gone sandbox is refused with a reason, and nothing changes.
	r = c.htmx(http.MethodPost, "/sandboxes/"+sbID+"/resume", nil)
	requireStatus(t, r, http.StatusConflict)
	requireContains(t, r.body, "rebuild it instead")

	confirm := c.htmx(http.MethodGet, "/projects/"+p.ID+"/rebuild?target=pane-"+p.ID, nil)
	requireStatus(t, confirm, http.StatusOK)
	requireContains(t, confirm.body, "This will use 1 build credit. Continue?")
	key := regexpFind(t, confirm.body, `idempotencyKey&#34;:&#34;([^&]+)&#34;`)
	r = c.htmx(http.MethodPost, "/projects/"+p.ID+"/rebuild", url.Values{"idempotencyKey": {key}})
	requireStatus(t, r, http.StatusOK)
	requireStatus(t, c.api(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	fresh := c.waitSandbox(list[0].Sandbox.ID, "running", 90*time.Second)
	if fresh.ID == sbID || !fresh.Recreated {
		t.Fatalf("rebuild gave %+v", fresh)
	}
	if n := c.credits(); n != 8 {
		t.Fatalf("credits after a build and a rebuild: %d", n)
	}

	// Without credits: the dialog says so, and a rebuild anyway is a 402 that changes nothing.
	if _, err := s.pool.Exec(context.Background(), "UPDATE users SET credits = 0"); err != nil {
		t.Fatal(err)
	}
	confirm = c.htmx(http.MethodGet, "/projects/"+p.ID+"/rebuild?target=pane-"+p.ID, nil)
	requireContains(t, confirm.body, `data-testid="no-credits"`)
	r = c.htmx(http.MethodPost, "/projects/"+p.ID+"/rebuild", url.Values{"idempotencyKey": {"no-credit"}})
	requireStatus(t, r, http.StatusPaymentRequired)
	requireContains(t, r.body, "no build credits left")
	c.waitSandbox(fresh.ID, "running", time.Second)
}

// credits reads the founder's balance from the JSON API.
func (c *client) credits() int {
	c.t.Helper()
	var me struct{ Credits int }
	requireStatus(c.t, c.api(http.MethodGet, "/api/me", nil, &me), http.StatusOK)
	return me.Credits
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
