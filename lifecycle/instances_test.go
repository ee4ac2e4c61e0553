package lifecycle_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/sandbox"
	"sandman/sandboxd/sandboxdtest"
)

// periodicJobTimes returns when each periodic job of kind was inserted, oldest first.
func periodicJobTimes(t testing.TB, b *testBundle, kind string) []time.Time {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT created_at FROM river_job WHERE kind = $1 ORDER BY created_at`, kind)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			t.Fatal(err)
		}
		out = append(out, at)
	}
	return out
}

// TestTwoInstancesRunEachPeriodicJobOnce: with two working instances on one database, only
// River's elected leader schedules the periodic jobs, so each runs once per interval rather
// than once per instance.
func TestTwoInstancesRunEachPeriodicJobOnce(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.ReconcileEvery, cfg.EventsEvery, cfg.SweepEvery = time.Second, time.Second, time.Second
	a := instance(t, instanceOptions{host: host, config: cfg, work: true})
	instance(t, instanceOptions{host: host, databaseURL: a.DatabaseURL, config: cfg, work: true})

	const enough = 6
	for _, kind := range []string{"reconcile", "events_catch_up", "sweep"} {
		var times []time.Time
		testkit.Until(t, time.Minute, fmt.Sprintf("%d %s jobs", enough, kind), func() bool {
			times = periodicJobTimes(t, a, kind)
			return len(times) >= enough
		})
		// One scheduler makes at most one job per interval over the span, plus the one run
		// at start (and one more if leadership moved); two would make about twice that.
		span := times[len(times)-1].Sub(times[0])
		if limit := int(span/time.Second) + 2; len(times) > limit {
			t.Fatalf("%d %s jobs within %s: more than one instance schedules them (limit %d)", len(times), kind, span, limit)
		}
	}
	var leaders int
	if err := a.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_leader`).Scan(&leaders); err != nil {
		t.Fatal(err)
	}
	if leaders != 1 {
		t.Fatalf("%d leaders", leaders)
	}
}

// TestTwoInstancesNeverApplyATransitionTwice makes both instances see the same changes at the
// same moment: every reconciler and events reader of both sees one provider kill, and
// founders' clicks on both resume one sandbox. Each change must be recorded exactly once.
func TestTwoInstancesNeverApplyATransitionTwice(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = 10 * time.Minute
	// Only the test's own calls watch the provider, all at once.
	cfg.ReconcileEvery, cfg.EventsEvery = 0, 0
	a := instance(t, instanceOptions{host: host, config: cfg, work: true})
	b := instance(t, instanceOptions{host: host, databaseURL: a.DatabaseURL, config: cfg, work: true})
	pool := a.pool
	both := []*testBundle{a, b}
	ctx := context.Background()

	u1, p1 := founder(t, pool, 5)
	u2, p2 := founder(t, pool, 5)
	killed := a.buildRunning(t, u1.ID, p1.ID)
	resumed := b.buildRunning(t, u2.ID, p2.ID)
	if _, err := a.svc.RequestPause(ctx, u2.ID, resumed.ID); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, resumed.ID, sandbox.Paused, 30*time.Second)

	// All together, on both instances.
	race := func(n int, f func(b *testBundle, i int) error) {
		t.Helper()
		start := make(chan struct{})
		errs := make(chan error, n*len(both))
		var wg sync.WaitGroup
		for _, inst := range both {
			for i := range n {
				wg.Go(func() {
					<-start
					errs <- f(inst, i)
				})
			}
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	host.KillFromDashboard(t, *killed.ProviderID)
	race(3, func(inst *testBundle, i int) error {
		if i%2 == 0 {
			return inst.svc.Reconcile(ctx)
		}
		return inst.svc.CatchUpEvents(ctx)
	})
	race(2, func(inst *testBundle, _ int) error { return inst.svc.Verify(ctx, u1.ID, killed.ID) })
	sb := a.waitStatus(t, killed.ID, sandbox.Killed, 30*time.Second)
	if killedReason(sb) != sandbox.ReasonProviderRequest {
		t.Fatalf("killed_reason %q", killedReason(sb))
	}
	if evs := a.eventsOf(t, killed.ID); len(transitionsTo(evs, sandbox.Killed)) != 1 {
		t.Fatalf("one kill recorded more than once: %s", history(evs))
	}

	race(5, func(inst *testBundle, _ int) error {
		got, err := inst.svc.Resume(ctx, u2.ID, resumed.ID)
		if err == nil && got.Status != sandbox.Resuming && got.Status != sandbox.Running {
			t.Errorf("a resume click answered %s", got.Status)
		}
		return err
	})
	sb = b.waitStatus(t, resumed.ID, sandbox.Running, 30*time.Second)
	visits(t, host, sb.PreviewURL)
	evs := b.eventsOf(t, resumed.ID)
	if len(transitionsTo(evs, sandbox.Resuming)) != 1 || len(transitionsTo(evs, sandbox.Running)) != 2 {
		// Running twice: once from the build, once from the resume.
		t.Fatalf("ten clicks on two instances: want one resume recorded: %s", history(evs))
	}
	if n := countJobs(t, a, "resume", resumed.ID); n != 1 {
		t.Fatalf("%d resume jobs queued, want 1", n)
	}
	audit := apptest.AuditDB(t, pool)
	testkit.Record(t, testkit.Scenario{ID: "two-instances-race", Times: 26, Counts: audit,
		Injected: "on two instances at once: 6 reconciles and events reads and 4 verifications of one provider kill; 10 resume clicks on one paused sandbox",
		Result:   "the kill recorded once; one resume recorded and one resume job queued"})
}

// countJobs counts the sandbox's jobs of kind, whatever their state.
func countJobs(t testing.TB, b *testBundle, kind string, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'sandbox_id' = $2`,
		kind, id.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
