package handlers_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/views"
)

// hostilePreview is a preview's page that tries to take the page around it elsewhere: once as
// it loads, and again from steer(), which the test calls marked as a user's gesture (the
// stand-in for a click: apptest.Tab.FrameActivate).
func hostilePreview(target string) string {
	return `<!doctype html><html lang="en"><title>Hostile</title><h1 id="h">Hostile preview</h1>
<script>
function steer() {
  try { top.location.href = ` + jsString(target) + `; return "sent"; } catch (e) { return "refused: " + e.name; }
}
steer();
document.getElementById("h").textContent = "Hostile preview loaded";
</script></html>`
}

// A preview cannot steer the page that shows it: the build page's frame and a share link's are
// sandboxed with the least a preview needs (views.PreviewSandbox: no top navigation, not even
// after a click), so a preview that sets top.location, as it loads or from a click, leaves the
// founder's build page and the visitor's link page where they are.
func TestBrowserAPreviewCannotSteerThePageAroundIt(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("hostile-preview@example.com")
	c.Get("/")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": "Hostile", "starter": "static"}, &p), http.StatusCreated)
	target := s.URL() + "/steered-by-the-preview"
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/versions", map[string]any{
		"files": []map[string]string{{"path": "public/index.html", "content": hostilePreview(target)}}}, nil), http.StatusCreated)
	var res struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "hostile"}, &res), http.StatusAccepted)
	preview := c.WaitSandbox(res.Sandbox.ID, "running", 90*time.Second).PreviewURL
	var link struct{ URL string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/share", nil, &link), http.StatusCreated)

	_, founder := s.Browse(t, "hostile-preview@example.com")
	buildPage := s.URL() + "/projects/" + p.ID
	founder.Do(t, chromedp.Navigate(buildPage))
	visitor := apptest.NewBrowser(t).Open(t, link.URL)
	for _, page := range []struct {
		name, url, frame string
		tab              *apptest.Tab
	}{
		{"the founder's build page", buildPage, "preview-frame", founder},
		{"the visitor's link page", link.URL, "share-frame", visitor},
	} {
		stays := func(when string) {
			t.Helper()
			loc, err := chromedp.Run(page.tab.Context(), chromedp.Evaluate[string](`location.href`))
			if err == nil && loc != page.url {
				t.Fatalf("%s was taken to %q by its preview %s", page.name, loc, when)
			}
			for _, r := range page.tab.Requests() {
				if strings.Contains(r, target) {
					t.Fatalf("%s asked for %s, where its preview sent it %s", page.name, target, when)
				}
			}
		}
		// The preview's load-time attempt is behind it once it says it loaded.
		testkit.Eventually(t, 60*time.Second, page.name+" showing the preview", func() error {
			stays("as it loaded")
			if !strings.Contains(page.tab.FrameTextNow(preview), "Hostile preview loaded") {
				return errors.New("not yet")
			}
			return nil
		})
		if got := apptest.Eval[string](t, page.tab, `document.querySelector("[data-testid=`+page.frame+`]").getAttribute("sandbox")`); got != views.PreviewSandbox {
			t.Fatalf("%s's frame has sandbox %q, want %q", page.name, got, views.PreviewSandbox)
		}
		apptest.Eval[bool](t, page.tab, `window.stillHere = true`)
		said := page.tab.FrameActivate(t, preview, "steer()")
		// A navigation the frame started would be on its way within this window; the page that
		// stays is checked through it, not once at its end.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			stays("after a click (steer() said " + said + ")")
			time.Sleep(50 * time.Millisecond)
		}
		if apptest.Eval[bool](t, page.tab, `window.stillHere === true`) != true {
			t.Fatalf("%s was replaced after the preview's steer() (which said %q)", page.name, said)
		}
	}
}
