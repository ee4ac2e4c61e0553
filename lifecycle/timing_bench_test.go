package lifecycle_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/sandboxd/sandboxdtest"
)

// runningCounters builds n counter projects (one founder each) and waits until all run.
func runningCounters(b *testing.B, tb *testBundle, n int) (owners []uuid.UUID, sandboxes []db.Sandbox) {
	b.Helper()
	ctx := context.Background()
	for range n {
		u, p := founder(b, tb.pool, 100)
		res, err := tb.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "bench-"+p.ID.String(), false)
		if err != nil {
			b.Fatal(err)
		}
		owners, sandboxes = append(owners, u.ID), append(sandboxes, res.Sandbox)
	}
	for i, sb := range sandboxes {
		sandboxes[i] = tb.waitStatus(b, sb.ID, lifecycle.Running, 2*time.Minute)
	}
	return owners, sandboxes
}

// report adds the quantiles of samples (in ms) to the benchmark's output.
func report(b *testing.B, name string, samples []time.Duration) {
	b.Helper()
	if len(samples) == 0 {
		b.Fatal("no samples")
	}
	b.ReportMetric(quantile(samples, 0.5), name+"-p50-ms")
	b.ReportMetric(quantile(samples, 0.99), name+"-p99-ms")
	b.ReportMetric(float64(len(samples)), name+"-samples")
}

// waitStatusSince polls fast for the status and returns when it was reached.
func waitStatusSince(b *testing.B, tb *testBundle, id uuid.UUID, want db.SandboxStatus, within time.Duration) time.Time {
	b.Helper()
	q := db.New(tb.pool)
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		sb, err := q.GetSandbox(context.Background(), id)
		if err != nil {
			b.Fatal(err)
		}
		if sb.Status == want {
			return time.Now()
		}
		time.Sleep(2 * time.Millisecond)
	}
	b.Fatalf("sandbox %s did not reach %s within %s", id, want, within)
	return time.Time{}
}

// BENCHMARKS.md target: "resume on sandboxd (memory), click → running pushed, p50 ≤ 500 ms". The click
// is Service.Resume (what the button's handler calls); "pushed" is the row turning running,
// which NOTIFYs in the same transaction.
func BenchmarkResumeMemory(b *testing.B) {
	host := sandboxdtest.Start(b)
	tb := setupWith(b, host, fastConfig(), true)
	owners, sbs := runningCounters(b, tb, 1)
	ctx := context.Background()
	var samples []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := tb.svc.RequestPause(ctx, owners[0], sbs[0].ID); err != nil {
			b.Fatal(err)
		}
		waitStatusSince(b, tb, sbs[0].ID, lifecycle.Paused, 30*time.Second)
		b.StartTimer()
		start := time.Now()
		if _, err := tb.svc.Resume(ctx, owners[0], sbs[0].ID); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, waitStatusSince(b, tb, sbs[0].ID, lifecycle.Running, 30*time.Second).Sub(start))
	}
	report(b, "resume", samples)
	b.StopTimer()
	floor := resumeFloor(b, tb, *sbs[0].ProviderID, len(samples))
	report(b, "floor", floor)
	b.ReportMetric(quantile(samples, 0.5)/quantile(floor, 0.5), "p50/floor-p50")
}

// resumeFloor is the resume's floor: sandboxd's resume call alone (e2b's connect to a sandbox
// paused with its memory), n times, with the same client the instance uses.
func resumeFloor(b *testing.B, tb *testBundle, providerID string, n int) []time.Duration {
	b.Helper()
	ctx := context.Background()
	var samples []time.Duration
	for range max(n, 5) {
		if _, err := tb.Provider().Pause(ctx, providerID, true); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, resumed, err := tb.Provider().Connect(ctx, providerID, 300); err != nil || !resumed {
			b.Fatalf("resume call: resumed %v, %v", resumed, err)
		}
		samples = append(samples, time.Since(start))
	}
	return samples
}

// quantile is the p quantile of samples in milliseconds (samples end sorted).
func quantile(samples []time.Duration, p float64) float64 {
	slices.Sort(samples)
	return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))].Microseconds()) / 1000
}

// BENCHMARKS.md: the resume figure with the integrity check, at 10, 100 and 1,000 stored files
// (2 KiB each, next to the counter's own two). The check is one envd command whatever the
// number; 1,000 is past an upload's limit (500), so the files are stored directly.
func BenchmarkResumeMemoryFiles(b *testing.B) {
	for _, n := range []int{10, 100, 1000}[:testkit.BenchSize(3, 1)] {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			host := sandboxdtest.Start(b)
			tb := setupWith(b, host, fastConfig(), true)
			ctx := context.Background()
			u, p := founder(b, tb.pool, 5)
			if _, err := tb.pool.Exec(ctx, `WITH c AS (SELECT convert_to(repeat('x', 2048), 'UTF8') AS c),
				blob AS (INSERT INTO blobs (owner_id, sha256, content) SELECT $3, sha256(c), c FROM c ON CONFLICT DO NOTHING)
				INSERT INTO version_files (project_id, path, from_number, size, sha256)
				SELECT $1, format('src/dir%s/file-%s.js', i % 20, i), 1, 2048, sha256(c.c)
				FROM c, generate_series(1, $2) i`, p.ID, n, u.ID); err != nil {
				b.Fatal(err)
			}
			res, err := tb.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "bench", false)
			if err != nil {
				b.Fatal(err)
			}
			sb := tb.waitStatus(b, res.Sandbox.ID, lifecycle.Running, 2*time.Minute)
			var samples []time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if _, err := tb.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
					b.Fatal(err)
				}
				waitStatusSince(b, tb, sb.ID, lifecycle.Paused, 30*time.Second)
				b.StartTimer()
				start := time.Now()
				if _, err := tb.svc.Resume(ctx, u.ID, sb.ID); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, waitStatusSince(b, tb, sb.ID, lifecycle.Running, 30*time.Second).Sub(start))
			}
			if got := testkit.MetricValue(b, tb.Registry(), "sandman_resume_integrity_total", map[string]string{"outcome": "intact"}); got != float64(len(samples)) {
				b.Fatalf("%v resumes checked intact, want %d", got, len(samples))
			}
			report(b, "resume", samples)
		})
	}
}

// BENCHMARKS.md target: "idle deadline → pause requested, p99 lag ≤ 5 s". Several sandboxes go idle at
// once, twice; the lag is the time from each one's deadline (last activity + idle timeout) to
// its paused event, which is written once the provider accepted the pause.
func BenchmarkIdlePauseLag(b *testing.B) {
	host := sandboxdtest.Start(b)
	cfg := fastConfig()
	// Long enough that the pause job goes through River's scheduler like a production 3m one.
	cfg.IdleTimeout = time.Duration(testkit.BenchSize(8, 4)) * time.Second
	tb := setupWith(b, host, cfg, true)
	owners, sbs := runningCounters(b, tb, testkit.BenchSize(4, 2))
	ctx := context.Background()
	var samples []time.Duration
	var mu sync.Mutex
	b.ResetTimer()
	for round := range max(b.N, testkit.BenchSize(2, 1)) {
		var wg sync.WaitGroup
		for i, sb := range sbs {
			wg.Go(func() {
				if round > 0 {
					if _, err := tb.svc.Resume(ctx, owners[i], sb.ID); err != nil {
						b.Error(err)
						return
					}
					waitStatusSince(b, tb, sb.ID, lifecycle.Running, 30*time.Second)
				}
				waitStatusSince(b, tb, sb.ID, lifecycle.Paused, cfg.IdleTimeout+30*time.Second)
				var lastActive, pausedAt time.Time
				err := tb.pool.QueryRow(ctx, `SELECT s.last_active_at, e.created_at FROM sandboxes s
					JOIN sandbox_events e ON e.sandbox_id = s.id AND e.to_status = 'paused'
					WHERE s.id = $1 ORDER BY e.id DESC LIMIT 1`, sb.ID).Scan(&lastActive, &pausedAt)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				samples = append(samples, pausedAt.Sub(lastActive.Add(cfg.IdleTimeout)))
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	report(b, "idle-pause-lag", samples)
}

// BENCHMARKS.md target: "missed webhook → state corrected ≤ 30 s". No webhooks reach this Service, with
// the production intervals (reconcile every 15 s, events reader every 5 s): a sandbox killed in
// the provider's dashboard is found by those alone.
func BenchmarkMissedWebhookCorrected(b *testing.B) {
	host := sandboxdtest.Start(b)
	cfg := fastConfig()
	def := lifecycle.DefaultConfig()
	cfg.ReconcileEvery, cfg.EventsEvery, cfg.SweepEvery = def.ReconcileEvery, def.EventsEvery, def.SweepEvery
	cfg.IdleTimeout = time.Hour
	tb := setupWith(b, host, cfg, true)
	_, sbs := runningCounters(b, tb, testkit.BenchSize(3, 1))
	var samples []time.Duration
	b.ResetTimer()
	for i, sb := range sbs {
		if i > 0 {
			// Kill at different points of the sweeps' cycles.
			time.Sleep(time.Duration(i) * 2300 * time.Millisecond)
		}
		start := time.Now()
		host.KillFromDashboard(b, *sb.ProviderID)
		samples = append(samples, waitStatusSince(b, tb, sb.ID, lifecycle.Killed, time.Minute).Sub(start))
	}
	report(b, "corrected", samples)
}
