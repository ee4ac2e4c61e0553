package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// TestReconcileKillsOrphans: a provider sandbox with Sandman's metadata that no row wants (made
// just before a crash, before its row learnt its id; or one whose row ended without the kill
// reaching the provider) is killed by the reconcile once it is older than OrphanAge, counted,
// logged and recorded for the operator's console. The reconcile keeps the size the provider
// reports on the rows it wants. Younger ones, other applications' sandboxes and the founders' own
// (whatever their row's state, short of ended) are left alone.
func TestReconcileKillsOrphans(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = 10 * time.Minute
	cfg.ReconcileEvery = 0 // the test reconciles by hand
	cfg.OrphanAge = 3 * time.Second
	var logs testkit.LogRecorder
	b := instance(t, instanceOptions{host: host, config: cfg, work: true, logger: logs.Logger()})
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	founders := b.buildRunning(t, u.ID, p.ID)

	provider := providerFor(t, host)
	create := func(meta map[string]string) string {
		t.Helper()
		sb, err := provider.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600, Secure: true, Metadata: meta})
		if err != nil {
			t.Fatal(err)
		}
		return sb.ID
	}
	// Created as a build creates it, but its row never heard of it.
	orphan := create(map[string]string{lifecycle.MetaApp: "sandman", lifecycle.MetaSandbox: uuid.NewString()})
	// Another application's sandbox on the same account.
	stranger := create(map[string]string{"app": "someone-else"})
	alive := func(id string) bool {
		_, err := provider.GetSandbox(ctx, id)
		if err != nil && !errors.Is(err, e2b.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	orphansKilled := func() float64 { return testkit.MetricValue(t, b.Registry(), "sandman_orphans_killed_total", nil) }

	if err := b.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if !alive(orphan) || orphansKilled() != 0 {
		t.Fatal("an orphan younger than OrphanAge was killed: it may be a build between its create and its row")
	}
	testkit.Until(t, 30*time.Second, "the orphan to be killed", func() bool {
		if err := b.svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		return !alive(orphan)
	})
	if n := orphansKilled(); n != 1 {
		t.Fatalf("sandman_orphans_killed_total = %v, want 1", n)
	}
	if recs := logs.Records("killed an orphaned sandbox: the provider had it, no sandbox row wanted it"); len(recs) != 1 || recs[0]["provider_id"] != orphan {
		t.Fatalf("log records %v, want one naming %s", recs, orphan)
	}
	// Every instance's console sees it.
	var recorded int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM orphan_kills WHERE provider_id = $1", orphan).Scan(&recorded); err != nil || recorded != 1 {
		t.Fatalf("%d orphan_kills rows for the orphan (%v), want 1", recorded, err)
	}
	// The reconcile also keeps the size the provider reports on the founder's row, what it costs awake.
	listed, err := provider.GetSandbox(ctx, *founders.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.get(t, founders.ID); listed.CPUCount == 0 || int(got.Vcpus) != listed.CPUCount || int(got.MemoryMib) != listed.MemoryMB {
		t.Fatalf("the row's size is %d vCPUs and %d MiB, the provider reports %d and %d", got.Vcpus, got.MemoryMib, listed.CPUCount, listed.MemoryMB)
	}
	if !alive(stranger) {
		t.Fatal("another application's sandbox was killed")
	}
	if !alive(*founders.ProviderID) || b.get(t, founders.ID).Status != sandbox.Running {
		t.Fatal("a founder's sandbox was killed as an orphan")
	}
	testkit.Record(t, testkit.Scenario{ID: "orphan-sandbox", Times: 1, Counts: apptest.AuditDB(t, b.pool),
		Injected: "a sandbox created at the provider with Sandman's metadata and no row (a crash between create and row), next to another application's",
		Result:   "killed by the reconcile once older than OrphanAge (not before), counted in sandman_orphans_killed_total and logged; the other application's and the founder's left alone"})

	// The reconcile reads only the rows the provider can contradict; a row in another state
	// (a resume in flight) still wants its sandbox. Set by hand, after the audit above, as a
	// worker would leave it.
	if _, err := b.pool.Exec(ctx, "UPDATE sandboxes SET status = 'resuming', state_changed_at = now() WHERE id = $1", founders.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if !alive(*founders.ProviderID) {
		t.Fatal("a sandbox whose row is resuming was killed as an orphan")
	}
	// A row that ended without its kill reaching the provider leaves an orphan.
	if _, err := b.pool.Exec(ctx, "UPDATE sandboxes SET status = 'killed', killed_at = now() WHERE id = $1", founders.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if alive(*founders.ProviderID) {
		t.Fatal("a sandbox whose row has ended was left running at the provider")
	}
}

// TestAKillThatFindsNothingIsNoOrphanKill: an orphan whose kill answers 404 was not killed by
// Sandman (the provider had nothing to kill): no count, no console row, no "killed" line. Listed
// again after that 404, the provider's list disagrees with its own kill, which the log says once
// however many passes see it; once the kill works, that is the one orphan kill recorded.
func TestAKillThatFindsNothingIsNoOrphanKill(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t, sandboxdtest.WithConfig(func(c *sandboxd.Config) { c.Isolation = sandboxd.IsolationNone }))
	cfg := fastConfig()
	cfg.ReconcileEvery, cfg.SweepEvery = 0, 0 // the test reconciles by hand
	cfg.OrphanAge = time.Nanosecond           // old enough at once
	var logs testkit.LogRecorder
	b := instance(t, instanceOptions{host: host, config: cfg, logger: logs.Logger()})
	ctx := context.Background()
	provider := providerFor(t, host)
	sb, err := provider.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600,
		Metadata: map[string]string{lifecycle.MetaApp: "sandman", lifecycle.MetaSandbox: uuid.NewString()}})
	if err != nil {
		t.Fatal(err)
	}
	const ghostPasses = 3
	host.InjectFault(t, sandboxd.Fault{Route: "DELETE /sandboxes/{sandboxID}", SandboxID: sb.ID, Status: 404,
		Message: "sandbox not found", Count: ghostPasses})
	kills := func() (metric float64, rows int, logged, disagreed int) {
		t.Helper()
		if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM orphan_kills WHERE provider_id = $1", sb.ID).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		return testkit.MetricValue(t, b.Registry(), "sandman_orphans_killed_total", nil), rows,
			len(logs.Records("killed an orphaned sandbox: the provider had it, no sandbox row wanted it")),
			len(logs.Records("the provider still lists a sandbox its kill answered not found for: its list disagrees with its kill"))
	}
	for pass := 1; pass <= ghostPasses; pass++ {
		if err := b.svc.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		metric, rows, logged, disagreed := kills()
		if metric != 0 || rows != 0 || logged != 0 {
			t.Fatalf("pass %d, the kill answered 404: %v counted, %d recorded, %d logged as killed, want none", pass, metric, rows, logged)
		}
		if want := min(pass-1, 1); disagreed != want {
			t.Fatalf("pass %d: the disagreement was logged %d times, want %d (never on the first 404, once after)", pass, disagreed, want)
		}
	}
	if n := remainingUses(t, host, "DELETE /sandboxes/{sandboxID}"); n != 0 {
		t.Fatalf("%d of the injected 404s left: the passes did not all ask for the kill", n)
	}
	if err := b.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if metric, rows, logged, disagreed := kills(); metric != 1 || rows != 1 || logged != 1 || disagreed != 1 {
		t.Fatalf("after the kill worked: %v counted, %d recorded, %d logged as killed, %d disagreements; want 1 each", metric, rows, logged, disagreed)
	}
	if _, err := provider.GetSandbox(ctx, sb.ID); !errors.Is(err, e2b.ErrNotFound) {
		t.Fatalf("the orphan is still at the provider: %v", err)
	}
	testkit.Record(t, testkit.Scenario{ID: "orphan-kill-not-found", Times: ghostPasses, Counts: apptest.AuditDB(t, b.pool),
		Injected: "an orphan the provider lists whose kill answers 404, on 3 reconcile passes (its list disagreeing with its kill)",
		Result:   "no orphan kill counted, recorded or logged for a 404; the disagreement logged once, not on every pass; killed and recorded once when its kill works"})
}
