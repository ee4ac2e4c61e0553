package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"sandman/lifecycle"
	"sandman/sandbox"
	"sandman/sandboxd/sandboxdtest"
)

// TestCatchUpDoesNotReplayWhatSandmanAlreadyDid: the events reader re-reads the recent past
// (its first run reads the last minute, every run a margin), so it sees the provider's record
// of changes Sandman itself made moments ago: the sandbox's creation and resume, just before
// Sandman paused it. Those older events must not flip the paused row back to running, however
// close they are to Sandman's own change.
func TestCatchUpDoesNotReplayWhatSandmanAlreadyDid(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.PauseAfterReady = "immediate"
	cfg.IdleTimeout = 10 * time.Minute
	cfg.ReconcileEvery, cfg.EventsEvery = 0, 0
	b := setupWith(t, host, cfg, true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	res, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "k", false)
	if err != nil {
		t.Fatal(err)
	}
	// Created, ready and paused at once: the provider's "created" event is moments older than
	// Sandman's pause.
	sb := b.waitStatus(t, res.Sandbox.ID, sandbox.Paused, time.Minute)
	check := func(when string) {
		t.Helper()
		before := b.eventsOf(t, sb.ID)
		if err := b.svc.CatchUpEvents(ctx); err != nil {
			t.Fatal(err)
		}
		after := b.eventsOf(t, sb.ID)
		if got := b.get(t, sb.ID); got.Status != sandbox.Paused || len(after) != len(before) {
			t.Fatalf("%s: catching up changed the paused sandbox to %s: %s", when, got.Status, history(after))
		}
	}
	check("after the build")

	// Resumed, then paused again by the founder right away: the provider's "resumed" event is
	// moments older than that pause.
	if _, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, sb.ID, sandbox.Running, 30*time.Second)
	if _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)
	check("after a resume")
}
