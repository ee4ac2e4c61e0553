package lifecycle_test

import (
	"context"
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

// BENCHMARKS.md target: "reconcile 10,000 sandboxes ≤ 101 provider calls, ≤ 5 s". Ten thousand running
// sandboxes at the provider (sandboxd without isolation, so none costs a process) and their
// ten thousand rows; one Reconcile pass must list them a page at a time, not ask one by one.
func BenchmarkReconcile10k(b *testing.B) {
	n := testkit.BenchSize(10000, 200)
	host := sandboxdtest.Start(b, sandboxdtest.WithConfig(func(c *sandboxd.Config) {
		c.Isolation = sandboxd.IsolationNone
		c.MaxSandboxes = -1 // ten thousand running at once, far past the default cap
	}))
	cfg := fastConfig()
	cfg.ReconcileEvery, cfg.SweepEvery = 0, 0
	tb := setupWith(b, host, cfg, false)
	provider, reg := tb.Provider(), tb.Registry() // the calls are counted by the instance's client
	u, p := founder(b, tb.pool, 1)
	ctx := context.Background()

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

	b.ResetTimer()
	for range b.N {
		before := providerCalls(b, reg, "")
		start := time.Now()
		if err := tb.svc.Reconcile(ctx); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "seconds/pass")
		b.ReportMetric(providerCalls(b, reg, "")-before, "provider-calls/pass")
	}
	b.StopTimer()
	var running int
	if err := tb.pool.QueryRow(ctx, "SELECT count(*) FROM sandboxes WHERE status = 'running' AND last_verified_at IS NOT NULL").Scan(&running); err != nil {
		b.Fatal(err)
	}
	if running != n {
		b.Fatalf("%d of %d sandboxes verified running", running, n)
	}
}
