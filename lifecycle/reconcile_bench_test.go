package lifecycle_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// BENCHMARKS.md targets: "reconcile 10,000 sandboxes ≤ 101 provider calls, ≤ 5 s" and
// "reconcile 100,000 sandboxes ≤ 1,001 calls, ≤ 10 s", beside the floor: the same list walk
// alone (the same pages, through a client configured as the instance's), measured in the same
// pass. The sandboxes run at the provider (sandboxd without isolation, so none costs a
// process), each with its row; one Reconcile pass must list them a page at a time, not ask one
// by one, and mark every row verified.
func BenchmarkReconcile(b *testing.B) {
	for _, n := range []int{testkit.BenchSize(10_000, 100), testkit.BenchSize(100_000, 300)} {
		b.Run(fmt.Sprintf("sandboxes=%d", n), func(b *testing.B) { benchmarkReconcile(b, n) })
	}
}

func benchmarkReconcile(b *testing.B, n int) {
	host := sandboxdtest.Start(b, sandboxdtest.WithConfig(func(c *sandboxd.Config) {
		c.Isolation = sandboxd.IsolationNone
		c.MaxSandboxes, c.MaxStored = -1, -1 // all running at once, far past the default caps
	}))
	cfg := fastConfig()
	cfg.ReconcileEvery, cfg.SweepEvery = 0, 0
	tb := setupWith(b, host, cfg, false)
	provider, reg := tb.Provider(), tb.Registry() // the calls are counted by the instance's client
	floor := providerFor(b, host)
	u, p := founder(b, tb.pool, 1)
	ctx := context.Background()

	seeded := time.Now()
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				sb, err := provider.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 3600,
					Metadata: map[string]string{lifecycle.MetaApp: "sandman"}})
				if err != nil {
					b.Error(err)
					return
				}
				ids[i] = sb.ID
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	_, err := tb.pool.Exec(ctx, `
		WITH b AS (
			INSERT INTO builds (project_id, version, kind, status, files_version_id)
			SELECT $1, g, 'initial', 'ready', (SELECT id FROM versions WHERE project_id = $1 AND number = 1)
			FROM generate_series(1, $3::int) g RETURNING id, version, files_version_id)
		INSERT INTO sandboxes (provider_id, owner_id, project_id, build_id, status, end_at, deployed_version_id)
		SELECT ids.id, $2, $1, b.id, 'running', now() + interval '1 hour', b.files_version_id
		FROM unnest($4::text[]) WITH ORDINALITY AS ids(id, n) JOIN b ON b.version = ids.n`,
		p.ID, u.ID, n, ids)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tb.pool.Exec(ctx, "ANALYZE sandboxes"); err != nil { // as autovacuum would have by now
		b.Fatal(err)
	}
	b.Logf("%d sandboxes and their rows seeded in %s", n, time.Since(seeded).Round(time.Millisecond))

	// b.Loop: the function runs once, so the seeding does too, whatever -benchtime asks.
	var took, floorTook time.Duration
	var calls float64
	var lastPass time.Time
	passes := 0
	for b.Loop() {
		passes++
		start := time.Now()
		listed, err := floor.ListAllSandboxes(ctx, e2b.ListParams{Metadata: map[string]string{lifecycle.MetaApp: "sandman"}, Limit: e2b.MaxListLimit})
		if err != nil {
			b.Fatal(err)
		}
		floorTook += time.Since(start)
		if len(listed) != n {
			b.Fatalf("the list walk found %d of %d sandboxes", len(listed), n)
		}

		before := providerCalls(b, reg, "")
		lastPass = time.Now()
		if err := tb.svc.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		took += time.Since(lastPass)
		calls += providerCalls(b, reg, "") - before
	}
	b.ReportMetric(calls/float64(passes), "provider-calls/pass")
	b.ReportMetric(took.Seconds()/float64(passes), "seconds/pass")
	b.ReportMetric(floorTook.Seconds()/float64(passes), "floor-seconds/pass")
	b.ReportMetric(took.Seconds()/floorTook.Seconds(), "x-floor")
	var running int
	if err := tb.pool.QueryRow(ctx, "SELECT count(*) FROM sandboxes WHERE status = 'running' AND last_verified_at >= $1", lastPass).Scan(&running); err != nil {
		b.Fatal(err)
	}
	if running != n {
		b.Fatalf("%d of %d sandboxes verified running by the last pass", running, n)
	}
}
