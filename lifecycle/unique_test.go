package lifecycle_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/db"
	"sandman/internal/testkit"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// pauseJobs counts the sandbox's pause jobs of one cause (idle or asked for), whatever their state.
func pauseJobs(t testing.TB, b *testBundle, id string, idle bool) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'pause'
		AND args->>'sandbox_id' = $1 AND (args->>'idle')::boolean = $2`, id, idle).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPauseJobsAreUniquePerSandbox: while one pause of a sandbox waits or runs, more requests to
// pause it (a burst of clicks, the idle queue finding it overdue meanwhile) queue nothing more,
// and the provider is asked to pause it once.
func TestPauseJobsAreUniquePerSandbox(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = 10 * time.Minute
	b := setupWith(t, host, cfg, true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	sb := b.buildRunning(t, u.ID, p.ID)
	id := sb.ID.String()
	if n := pauseJobs(t, b, id, true); n != 0 {
		t.Fatalf("%d idle pause jobs while it runs before its deadline, want none: its row is its place in the idle queue", n)
	}

	// The provider takes its time over the first pause, so every later request finds it running.
	host.InjectFault(t, sandboxd.Fault{Route: pauseRoute, SandboxID: *sb.ProviderID, LatencyMs: 2000, Count: 1})
	// The founder went away long ago: the idle queue, woken, finds the sandbox overdue.
	if _, err := b.pool.Exec(ctx, `UPDATE sandboxes SET last_active_at = now() - interval '1 hour' WHERE id = $1`, sb.ID); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
				t.Error(err)
			}
		})
	}
	for range 5 {
		wg.Go(func() {
			if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, '')`, db.IdleChannel); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)

	// The idle queue may have claimed the sandbox before the first click's job asked the
	// provider, or found that pause under way: one idle pause job at most.
	if asked, idle := pauseJobs(t, b, id, false), pauseJobs(t, b, id, true); asked != 1 || idle > 1 {
		t.Fatalf("%d asked-for and %d idle pause jobs, want one asked-for and at most one idle", asked, idle)
	}
	if calls := providerCalls(t, b.Registry(), "pause"); calls != 1 {
		t.Fatalf("the provider was asked to pause %v times, want once", calls)
	}
	if evs := b.eventsOf(t, sb.ID); len(transitionsTo(evs, sandbox.Paused)) != 1 {
		t.Fatalf("one pause recorded more than once: %s", history(evs))
	}

	audit := apptest.AuditDB(t, b.pool)
	testkit.Record(t, testkit.Scenario{ID: "pause-jobs-unique", Times: 25, Counts: audit,
		Injected: "20 pause clicks and 5 wake-ups of the idle queue (the sandbox overdue for its idle pause) at once, the provider's pause held 2 s",
		Result:   "one asked-for pause job and at most one idle one; the provider asked to pause once; one pause recorded"})

	// Once it runs again it can be paused again at once, though the first pause job may not be
	// recorded as finished yet.
	if _, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, sb.ID, sandbox.Running, 30*time.Second)
	if _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	sb = b.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)
	if sb.SnapshotKind == nil || *sb.SnapshotKind != sandbox.PauseMemory {
		t.Fatalf("second pause: snapshot %v", sb.SnapshotKind)
	}
}
