package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/views"
)

// formOf returns the fields of the form around the button with the test id in a page, and the
// form's action: what a browser without JavaScript would post.
func formOf(t *testing.T, page, testID string) (action string, fields url.Values) {
	t.Helper()
	i := strings.Index(page, `data-testid="`+testID+`"`)
	if i < 0 {
		t.Fatalf("no %s button in:\n%.2000s", testID, page)
	}
	start := strings.LastIndex(page[:i], "<form")
	end := strings.Index(page[i:], "</form>")
	if start < 0 || end < 0 {
		t.Fatalf("the %s button is not in a form", testID)
	}
	form := page[start : i+end]
	action = regexp.MustCompile(`action="([^"]+)"`).FindStringSubmatch(form)[1]
	fields = url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)"`).FindAllStringSubmatch(form, -1) {
		fields.Set(m[1], htmlUnescape(m[2]))
	}
	return action, fields
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&#34;", `"`, "&#39;", "'", "&lt;", "<", "&gt;", ">").Replace(s)
}

// Every action is a form that works without JavaScript: it posts, the action happens, and the
// browser is sent back (303) to the page it came from. The rebuild asks on a page of its own.
func TestFormsWithoutJavaScript(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("nojs@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	projectPage := "/projects/" + p.ID

	// Build from the build page, the form submitted twice: one build, one credit.
	action, fields := formOf(t, c.Get(projectPage).Body, "build")
	for range 2 {
		r := c.PostForm(action, fields)
		apptest.RequireStatus(t, r, http.StatusSeeOther)
		if loc := r.Header.Get("Location"); loc != projectPage {
			t.Fatalf("the build form went back to %q", loc)
		}
	}
	if n := c.Credits(); n != 9 {
		t.Fatalf("credits after one build form posted twice: %d", n)
	}
	var list []struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	sbID := list[0].Sandbox.ID
	sb := c.WaitSandbox(sbID, "running", 90*time.Second)

	// Pause from the dashboard's card: back to the dashboard.
	action, fields = formOf(t, c.Get("/").Body, "pause")
	r := c.PostForm(action, fields)
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); loc != "/" {
		t.Fatalf("the card's pause went back to %q", loc)
	}
	c.WaitSandbox(sbID, "paused", 30*time.Second)

	// Resume from the build page, with a return address that leaves the site: refused, back to
	// the project's page instead.
	page := c.Get(projectPage).Body
	apptest.RequireContains(t, page, "Free · about a second")
	action, fields = formOf(t, page, "resume")
	fields.Set("return", "//evil.example/")
	r = c.PostForm(action, fields)
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); loc != projectPage {
		t.Fatalf("a resume with a foreign return went to %q", loc)
	}
	c.WaitSandbox(sbID, "running", 60*time.Second)

	// Keep awake (the running card's button) moves the idle deadline.
	var before struct{ LastActiveAt time.Time }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/sandboxes/"+sbID, nil, &before), http.StatusOK)
	action, fields = formOf(t, c.Get("/").Body, "keep-awake")
	testkit.Eventually(t, 10*time.Second, "Keep awake to move lastActiveAt", func() error {
		// Activity is recorded at most once a second per sandbox: press again until it counts.
		apptest.RequireStatus(t, c.PostForm(action, fields), http.StatusSeeOther)
		var now struct{ LastActiveAt time.Time }
		apptest.RequireStatus(t, c.API(http.MethodGet, "/api/sandboxes/"+sbID, nil, &now), http.StatusOK)
		if !now.LastActiveAt.After(before.LastActiveAt) {
			return fmt.Errorf("lastActiveAt is still %v", now.LastActiveAt)
		}
		return nil
	})

	// Gone: Rebuild asks on a page, whose form rebuilds and goes back; Cancel is a link back.
	s.Host.KillFromDashboard(t, sb.ProviderID)
	c.WaitSandbox(sbID, "killed", 30*time.Second)
	action, fields = formOf(t, c.Get("/").Body, "rebuild")
	question := c.Get(action + "?" + fields.Encode())
	apptest.RequireStatus(t, question, http.StatusOK)
	apptest.RequireContains(t, question.Body, "<title>Rebuild preview? · Sandman</title>")
	apptest.RequireContains(t, question.Body, "This will use 1 build credit. Continue?")
	apptest.RequireContains(t, question.Body, "You have 9 credits.")
	apptest.RequireContains(t, question.Body, `<a class="button" href="/" data-testid="rebuild-cancel">Cancel</a>`)
	action, fields = formOf(t, question.Body, "rebuild-confirm")
	for range 2 {
		r = c.PostForm(action, fields)
		apptest.RequireStatus(t, r, http.StatusSeeOther)
		if loc := r.Header.Get("Location"); loc != "/" {
			t.Fatalf("the rebuild went back to %q", loc)
		}
	}
	if n := c.Credits(); n != 8 {
		t.Fatalf("credits after a build and one rebuild form posted twice: %d", n)
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	if list[0].Sandbox.ID == sbID {
		t.Fatal("the rebuild made no new sandbox")
	}
	c.WaitSandbox(list[0].Sandbox.ID, "running", 90*time.Second)
}

// Keep awake and the rebuild's question follow every action's rules: another founder's id is
// not found, whether posted by htmx or by a plain form, and nothing is posted without the
// token.
func TestKeepAwakeIsOwnedAndNeedsTheToken(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	owner := b.NewClient(t)
	owner.SignUp("keep@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	var built struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "k"}, &built), http.StatusAccepted)
	keep := "/sandboxes/" + built.Sandbox.ID + "/keep-awake"

	other := b.NewClient(t)
	other.SignUp("keep-other@example.com")
	other.Get("/")
	apptest.RequireStatus(t, other.HTMX(http.MethodPost, keep, nil), http.StatusNotFound)
	apptest.RequireStatus(t, other.PostForm(keep, url.Values{"return": {"/"}}), http.StatusNotFound)
	apptest.RequireStatus(t, other.PostForm("/projects/"+p.ID+"/rebuild", url.Values{"idempotencyKey": {"x"}}), http.StatusNotFound)
	apptest.RequireStatus(t, other.Get("/projects/"+p.ID+"/rebuild?return=/"), http.StatusNotFound)

	owner.Get("/")
	r := owner.Do(http.MethodPost, keep, strings.NewReader("return=%2F"), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	apptest.RequireContains(t, r.Body, "Reload the page and try again")
	apptest.RequireStatus(t, owner.PostForm(keep, url.Values{"return": {"/"}}), http.StatusSeeOther)
	// The htmx answer is the fragment it targets, with the header's balance out of band.
	r = owner.Do(http.MethodPost, keep, nil, map[string]string{"X-CSRF-Token": owner.CSRF(), "HX-Request": "true",
		"HX-Target": views.DOMID(views.Card, p.ID)})
	apptest.RequireStatus(t, r, http.StatusOK)
	apptest.RequireContains(t, r.Body, `id="`+views.DOMID(views.Card, p.ID)+`"`)
	if b := apptest.ByTestID(t, r.Body, "credits"); b.Text != "9 credits" || b.Attrs["hx-swap-oob"] == "" {
		t.Fatalf("the answer's balance %+v, want 9 credits out of band", b)
	}
}
