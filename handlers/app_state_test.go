package handlers_test

import (
	"net/http"
	"testing"
	"time"

	"sandman/app/apptest"
)

// appAnswer is the app object of the JSON API (docs/api.md, "The app").
type appAnswer struct {
	Status          string
	Version         *int32
	Since           time.Time
	ExitCode        *int32
	LastGoodVersion *int32
}

// The JSON API tells the app's state beside the sandbox's, the same in the sandbox's read and
// in the project list: a sandbox running a version whose server exited says running, with its
// app exited (its code, its version, the last good one); a sleeping one's app is stopped.
func TestTheAPITellsTheAppBesideTheSandbox(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("app-state@example.com")
	pid := newCounter(t, c)
	s.forceState(t, c, pid, forcedStates[2]) // running, on version 1
	if _, err := s.Pool().Exec(t.Context(), `UPDATE sandboxes SET app_status = 'exited', app_version = 2, app_exit_code = 1,
		app_since = now(), app_run_id = gen_random_uuid() WHERE project_id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(t.Context(), `UPDATE sandboxes SET app_good_version = 1 WHERE project_id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	type sandboxAnswer struct {
		ID     string
		Status string
		App    *appAnswer
	}
	var projects []struct{ Sandbox sandboxAnswer }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &projects), http.StatusOK)
	var sb sandboxAnswer
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/sandboxes/"+projects[0].Sandbox.ID, nil, &sb), http.StatusOK)
	for name, got := range map[string]sandboxAnswer{"GET /api/sandboxes/{id}": sb, "GET /api/projects": projects[0].Sandbox} {
		a := got.App
		if got.Status != "running" || a == nil || a.Status != "exited" || a.Version == nil || *a.Version != 2 || a.ExitCode == nil ||
			*a.ExitCode != 1 || a.LastGoodVersion == nil || *a.LastGoodVersion != 1 || a.Since.IsZero() {
			t.Fatalf("%s: sandbox %s, app %+v; want running with its app exited (code 1) on version 2, version 1 the last good", name, got.Status, a)
		}
	}
	if _, err := s.Pool().Exec(t.Context(), `UPDATE sandboxes SET status = 'paused', snapshot_kind = 'memory' WHERE project_id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/sandboxes/"+sb.ID, nil, &sb), http.StatusOK)
	if sb.App == nil || sb.App.Status != "stopped" || sb.App.ExitCode != nil {
		t.Fatalf("a sleeping preview's app: %+v, want stopped", sb.App)
	}
}
