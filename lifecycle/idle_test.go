package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// idleLockHolders counts the sessions that hold the idle queue's lock in the instance's database
// (other tests' databases have locks of their own).
func idleLockHolders(t testing.TB, b *testBundle) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND (classid::bigint << 32 | objid::bigint) = $1`, lifecycle.IdleQueueLock).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// idleClaims is how many idle pauses the instance's queue asked for.
func idleClaims(t testing.TB, b *testBundle) float64 {
	t.Helper()
	return testkit.MetricValue(t, b.Registry(), "sandman_idle_pause_lag_seconds", nil)
}

// idlePausedAt is when the sandbox's first idle pause was recorded, failing the test if its
// first pause was another.
func (b *testBundle) idlePausedAt(t testing.TB, id uuid.UUID) time.Time {
	t.Helper()
	paused := transitionsTo(b.eventsOf(t, id), sandbox.Paused)
	if len(paused) == 0 || paused[0].Reason != sandbox.ReasonIdle {
		t.Fatalf("the first pause is not the idle one: %s", history(b.eventsOf(t, id)))
	}
	return paused[0].CreatedAt
}

// TestActivityMovesTheIdleDeadline: a founder who looks at the preview shortly before its idle
// deadline keeps it running until a whole idle timeout after that look; the queue pauses it
// at the new deadline, not the old one.
func TestActivityMovesTheIdleDeadline(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.IdleTimeout = 3 * time.Second
	b := setupWith(t, sandboxdtest.Start(t), cfg, true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	sb := b.buildRunning(t, u.ID, p.ID)
	oldDeadline := sb.LastActiveAt.Add(cfg.IdleTimeout)
	time.Sleep(time.Until(oldDeadline.Add(-time.Second)))
	if err := b.svc.Activity(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	touched := b.get(t, sb.ID)
	if touched.Status != sandbox.Running || !touched.LastActiveAt.After(sb.LastActiveAt) {
		t.Fatalf("the look a second before the deadline found the sandbox %s, last active %v (before %v)",
			touched.Status, touched.LastActiveAt, sb.LastActiveAt)
	}
	newDeadline := touched.LastActiveAt.Add(cfg.IdleTimeout)
	b.waitStatus(t, sb.ID, sandbox.Paused, 20*time.Second)
	if at := b.idlePausedAt(t, sb.ID); at.Before(newDeadline) {
		t.Fatalf("paused at %v, %v after the old deadline but %v before the one the look set",
			at.Format(time.StampMilli), at.Sub(oldDeadline), newDeadline.Sub(at))
	}
}

// TestADueSandboxIsPausedOnceByTwoInstances: two working instances share the idle queue, and one
// of them at a time runs it; a due sandbox's idle pause is asked for once, even when the queue is
// woken again and again while the provider takes its time over that pause.
func TestADueSandboxIsPausedOnceByTwoInstances(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = 3 * time.Second
	a := instance(t, instanceOptions{host: host, config: cfg, work: true})
	c := instance(t, instanceOptions{host: host, databaseURL: a.DatabaseURL, config: cfg, work: true})
	ctx := context.Background()
	u, p := founder(t, a.pool, 5)
	sb := a.buildRunning(t, u.ID, p.ID)
	if n := idleLockHolders(t, a); n != 1 {
		t.Fatalf("%d sessions hold the idle queue's lock, want one: two instances would both run the queue", n)
	}
	// The provider holds the pause 2 s; meanwhile the queue is woken every 100 ms.
	host.InjectFault(t, sandboxd.Fault{Route: pauseRoute, SandboxID: *sb.ProviderID, LatencyMs: 2000, Count: 1})
	time.Sleep(time.Until(sb.LastActiveAt.Add(cfg.IdleTimeout)))
	for range 30 {
		if _, err := a.pool.Exec(ctx, `SELECT pg_notify($1, '')`, db.IdleChannel); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.waitStatus(t, sb.ID, sandbox.Paused, 20*time.Second)
	a.idlePausedAt(t, sb.ID)
	if claims := idleClaims(t, a) + idleClaims(t, c); claims != 1 {
		t.Fatalf("the idle pause was asked for %v times, want once", claims)
	}
	if n := pauseJobs(t, a, sb.ID.String(), true); n != 1 {
		t.Fatalf("%d idle pause jobs, want one", n)
	}
	if calls := providerCalls(t, a.Registry(), "pause") + providerCalls(t, c.Registry(), "pause"); calls != 1 {
		t.Fatalf("the provider was asked to pause %v times, want once", calls)
	}
	if evs := a.eventsOf(t, sb.ID); len(transitionsTo(evs, sandbox.Paused)) != 1 {
		t.Fatalf("one pause recorded more than once: %s", history(evs))
	}
}

// TestTheIdleQueueOutlivesItsInstance: when the instance that runs the idle queue stops, another
// takes it over, and a sandbox that falls due afterwards is paused on time.
func TestTheIdleQueueOutlivesItsInstance(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = 3 * time.Second
	first := instance(t, instanceOptions{host: host, config: cfg, work: true})
	testkit.Until(t, 10*time.Second, "the first instance to hold the idle queue's lock", func() bool {
		return idleLockHolders(t, first) == 1
	})
	second := instance(t, instanceOptions{host: host, databaseURL: first.DatabaseURL, config: cfg, work: true})
	first.Stop(t)
	u, p := founder(t, second.pool, 5)
	sb := second.buildRunning(t, u.ID, p.ID)
	deadline := sb.LastActiveAt.Add(cfg.IdleTimeout)
	second.waitStatus(t, sb.ID, sandbox.Paused, 20*time.Second)
	if at := second.idlePausedAt(t, sb.ID); at.Before(deadline) {
		t.Fatalf("paused %v before its deadline", deadline.Sub(at))
	}
	if n := idleClaims(t, second); n != 1 {
		t.Fatalf("the second instance's queue asked for %v idle pauses, want the one", n)
	}
}

// TestALookWhileAnIdlePauseIsRetriedKeepsThePreview: the founder looks at the preview after its
// idle pause was asked for, while the pause waits for River's retry (the provider refused the
// first attempt): the retry leaves it running, and the queue pauses it a whole idle timeout after
// that look.
func TestALookWhileAnIdlePauseIsRetriedKeepsThePreview(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = 3 * time.Second
	b := setupWith(t, host, cfg, true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	sb := b.buildRunning(t, u.ID, p.ID)
	host.InjectFault(t, sandboxd.Fault{Route: pauseRoute, SandboxID: *sb.ProviderID, Status: 400, Count: 1})
	testkit.Until(t, 20*time.Second, "the idle pause's first attempt to reach the provider", func() bool {
		return remainingUses(t, host, pauseRoute) == 0
	})
	if err := b.svc.Activity(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	touched := b.get(t, sb.ID)
	if touched.Status != sandbox.Running {
		t.Fatalf("the founder's look found the sandbox %s: the test proves nothing", touched.Status)
	}
	newDeadline := touched.LastActiveAt.Add(cfg.IdleTimeout)
	b.waitStatus(t, sb.ID, sandbox.Paused, 20*time.Second)
	if at := b.idlePausedAt(t, sb.ID); at.Before(newDeadline) {
		t.Fatalf("paused %v after the founder's look, %v before the deadline that look set: the retried pause ignored it",
			at.Sub(touched.LastActiveAt), newDeadline.Sub(at))
	}
}

// TestARunningSandboxPastItsDeadlineWakesTheIdleQueue: a sandbox that runs again with its idle
// deadline already past (the provider resumed it; its last activity is old) wakes the idle
// queue's loop, which would otherwise sleep up to 10 s: its pause is asked for at once. (A move
// whose deadline is far sends no wake; the loop's own next look finds it.)
func TestARunningSandboxPastItsDeadlineWakesTheIdleQueue(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.IdleTimeout = time.Minute // a fresh deadline is far: only a past one wakes the loop
	// The provider events below are the test's own (sandboxd's sandbox keeps running): the
	// reconcile would correct the "paused" back between them, and the sweep would ask for the
	// idle pause itself, passing the test without the queue.
	cfg.ReconcileEvery, cfg.EventsEvery, cfg.SweepEvery = 0, 0, 0
	b := setupWith(t, sandboxdtest.Start(t), cfg, true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	sb := b.buildRunning(t, u.ID, p.ID)
	event := func(typ string) {
		t.Helper()
		ev := lifecycle.ProviderEvent{ID: uuid.NewString(), Type: typ, SandboxID: *sb.ProviderID, Timestamp: time.Now()}
		if changed, err := b.svc.ApplyProviderEvent(ctx, ev, sandbox.SourceWebhook); err != nil || !changed {
			t.Fatalf("apply %s: changed %v, %v", typ, changed, err)
		}
	}
	event(lifecycle.EventPaused)
	// Fixture only: nobody has looked at it for two idle timeouts.
	if _, err := b.pool.Exec(ctx, `UPDATE sandboxes SET last_active_at = now() - interval '2 minutes' WHERE id = $1`, sb.ID); err != nil {
		t.Fatal(err)
	}
	// The loop looks now and, with nothing running, sleeps its longest.
	if _, err := b.pool.Exec(ctx, `SELECT pg_notify($1, '')`, db.IdleChannel); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	event(lifecycle.EventResumed)
	resumed := time.Now()
	testkit.Until(t, 3*time.Second, "the idle pause of the sandbox resumed past its deadline to be asked for", func() bool {
		return b.get(t, sb.ID).PauseRequestedAt != nil
	})
	t.Logf("asked for %v after the resume", time.Since(resumed).Round(time.Millisecond))
}
