package handlers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/sandboxd"
	"sandman/views"
)

// "Preparing sandbox…" follows the build's stages as they happen: each stage is pushed like a
// change (with no new event), and the pane ends live.
func TestBuildStagesReachTheStream(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("stages@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.Stream(ctx)
	s.waitClients(t, 1)
	// The create is held 2 s so that its stage lasts longer than a render takes on a loaded
	// machine: the stream sends the newest drawing of a pane, and a stage gone by the time its
	// drawing is read is never sent (nor should it be).
	s.Host.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes", LatencyMs: 2000, Count: 1})
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "k"}, nil), http.StatusAccepted)
	pane := views.DOMID(views.Pane, p.ID)
	first := nextMatching(t, events, pane, `data-testid="build-stage">Creating the sandbox<`, 30*time.Second)
	installing := nextMatching(t, events, pane, `data-testid="build-stage">Installing dependencies<`, 60*time.Second)
	if installing.ID != first.ID {
		t.Fatalf("a stage came with a new event id (%s after %s): stages are not changes of state", installing.ID, first.ID)
	}
	nextMatching(t, events, pane, "Live preview ready", 60*time.Second)
}
