package handlers_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// A page that throws in the preview becomes a browser problem of the version the preview runs
// once the build page shows it, and counts again once a share link's visitor's page does: the
// preview's page posts its report to the frame's parent (as the proxy's script does), and
// Sandman's page relays it with its own authority.
func TestBrowserAPageThatThrowsInThePreviewBecomesAProblem(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	email := "throws-" + uuid.NewString()[:8] + "@example.com"
	c.SignUp(email)
	pid := newProject(t, c, "Throws").String()
	marker := "marker-" + uuid.NewString()[:8]
	page := `<!doctype html><html lang="en"><head><title>Throws</title></head><body><p>throws</p><script>
window.parent.postMessage({sandman: "report", kind: "error", message: "ReferenceError: ` + marker + ` is not defined",
  stack: "at index.html:1:1", url: location.href}, "*");
</script></body></html>`
	r, _ := postVersion(t, c, pid, map[string]any{"files": []vfile{text("public/index.html", page)}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	var res struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+pid+"/builds", map[string]string{"idempotencyKey": "throws"}, &res), http.StatusAccepted)
	sb := c.WaitSandbox(res.Sandbox.ID, "running", 90*time.Second)

	problemCount := func() int64 {
		var n int64
		for _, p := range problems(t, c, pid) {
			if p.Source == "browser" && strings.Contains(p.Message, marker) && p.Version == 2 {
				n += p.Count
			}
		}
		return n
	}
	browser, _ := s.Browse(t, email)
	founderPage := browser.Open(t, s.URL()+"/projects/"+pid)
	founderPage.FrameText(t, sb.PreviewURL, "throws")
	testkit.Eventually(t, 10*time.Second, "the build page's report stored as a problem of version 2", wantCount(problemCount, 1))

	visitor := apptest.NewBrowser(t).Open(t, s.URL()+"/s/"+shareToken(t, c, pid))
	visitor.FrameText(t, sb.PreviewURL, "throws")
	testkit.Eventually(t, 10*time.Second, "the visitor's page's report counted on the same problem", wantCount(problemCount, 2))
}

func wantCount(count func() int64, want int64) func() error {
	return func() error {
		if n := count(); n != want {
			return fmt.Errorf("counted %d, want %d", n, want)
		}
		return nil
	}
}
