package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"sandman/app"
	"sandman/app/apptest"
)

// While the sandbox runs and its app does not, the share link's page is ours, without a frame
// nor a form and with nothing of why; while a version's server starts it says so and reloads
// itself without JavaScript. A visitor's post wakes nothing. The founder's pane says the version
// doesn't start, offers the last good version first and no Rebuild, and that visitors see the
// "not working" page; the card counts nothing it was not told.
func TestAVisitorOfARunningPreviewWhoseAppIsDownSeesOurPage(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb})
	c := s.NewClient(t)
	c.SignUp("app-down-visitor@example.com")
	v := s.NewClient(t)
	for _, tt := range []struct {
		app, want string
		texts     []string
		refresh   bool
	}{
		{app: "exited", want: "broken", texts: []string{"This preview isn&#39;t working right now.", "Its maker can see why."}},
		{app: "not_answering", want: "broken", texts: []string{"This preview isn&#39;t working right now."}},
		{app: "starting", want: "updating", texts: []string{"Starting the latest version…"}, refresh: true},
		{app: "up", want: "live", texts: []string{`data-testid="share-frame"`}},
	} {
		pid, sid := s.project(t, c, "Down-"+tt.app, "running")
		if _, err := s.Pool().Exec(t.Context(), `UPDATE sandboxes SET app_status = $2, app_version = 2, app_exit_code = 1,
			app_since = now(), app_run_id = gen_random_uuid() WHERE id = $1`, sid, tt.app); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Pool().Exec(t.Context(), `UPDATE sandboxes SET app_good_version = 1 WHERE project_id = $1`, pid); err != nil {
			t.Fatal(err)
		}
		path := "/s/" + shareToken(t, c, pid)
		r := v.Get(path)
		apptest.RequireStatus(t, r, http.StatusOK)
		if got := visitorState(t, r.Body); got != tt.want {
			t.Errorf("app %s: the visitor sees %s, want %s", tt.app, got, tt.want)
		}
		for _, text := range tt.texts {
			if !strings.Contains(r.Body, text) {
				t.Errorf("app %s: the page lacks %q", tt.app, text)
			}
		}
		if tt.want != "live" && (strings.Contains(r.Body, "<iframe") || strings.Contains(r.Body, "exit code")) {
			t.Errorf("app %s: the page has a frame or the exit's code", tt.app)
		}
		if refresh := strings.Contains(r.Body, `http-equiv="refresh"`); refresh != tt.refresh {
			t.Errorf("app %s: refreshes itself without JavaScript: %v", tt.app, refresh)
		}
		apptest.RequireStatus(t, v.Do(http.MethodPost, path, nil, map[string]string{"HX-Request": "true"}), http.StatusOK)
		if n := s.count(t, "SELECT count(*) FROM river_job WHERE kind = 'resume' AND args->>'sandbox_id' = $1 AND (args->>'visitor')::boolean", sid); n != 0 {
			t.Errorf("app %s: a visitor's post queued %d resumes", tt.app, n)
		}

		page := c.Get("/projects/" + pid)
		apptest.RequireStatus(t, page, http.StatusOK)
		if tt.want != "broken" {
			if strings.Contains(page.Body, `data-testid="visitors-see"`) {
				t.Errorf("app %s: the build page says visitors see the not-working page", tt.app)
			}
			continue
		}
		if h := apptest.ByTestID(t, page.Body, "pane-heading"); strings.TrimSpace(h.Text) != "Version 2 doesn't start" {
			t.Errorf("app %s: the pane's heading %q", tt.app, h.Text)
		}
		if strings.Contains(page.Body, "Live preview ready") || strings.Contains(page.Body, `data-testid="rebuild"`) {
			t.Errorf("app %s: the build page says ready or offers Rebuild", tt.app)
		}
		if b := apptest.ByTestID(t, page.Body, "restore-previous"); strings.TrimSpace(b.Text) != "Restore version 1" {
			t.Errorf("app %s: the way out %q", tt.app, b.Text)
		}
		if strings.Contains(page.Body, `data-testid="version-live-mark"`) || !strings.Contains(page.Body, `data-testid="version-broken-mark"`) {
			t.Errorf("app %s: the Versions list marks version 2 live, or not as not starting", tt.app)
		}
		if !strings.Contains(page.Body, `data-testid="visitors-see"`) {
			t.Errorf("app %s: the build page does not say what visitors see", tt.app)
		}
	}
}
