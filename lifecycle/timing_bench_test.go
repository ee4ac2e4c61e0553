package lifecycle_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sandman/db"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/sandbox"
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
		sandboxes[i] = tb.waitStatus(b, sb.ID, sandbox.Running, 2*time.Minute)
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
func waitStatusSince(b *testing.B, tb *testBundle, id uuid.UUID, want sandbox.Status, within time.Duration) time.Time {
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
		waitStatusSince(b, tb, sbs[0].ID, sandbox.Paused, 30*time.Second)
		b.StartTimer()
		start := time.Now()
		if _, err := tb.svc.Resume(ctx, owners[0], sbs[0].ID); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, waitStatusSince(b, tb, sbs[0].ID, sandbox.Running, 30*time.Second).Sub(start))
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
			sb := tb.waitStatus(b, res.Sandbox.ID, sandbox.Running, 2*time.Minute)
			var samples []time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if _, err := tb.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
					b.Fatal(err)
				}
				waitStatusSince(b, tb, sb.ID, sandbox.Paused, 30*time.Second)
				b.StartTimer()
				start := time.Now()
				if _, err := tb.svc.Resume(ctx, u.ID, sb.ID); err != nil {
					b.Fatal(err)
				}
				samples = append(samples, waitStatusSince(b, tb, sb.ID, sandbox.Running, 30*time.Second).Sub(start))
			}
			// The resume counts its check just after its move to running commits, which the
			// wait above may see first.
			testkit.Eventually(b, 10*time.Second, "every resume counted intact", func() error {
				if got := testkit.MetricValue(b, tb.Registry(), "sandman_resume_integrity_total", map[string]string{"outcome": "intact"}); got != float64(len(samples)) {
					return fmt.Errorf("%v resumes checked intact, want %d", got, len(samples))
				}
				return nil
			})
			report(b, "resume", samples)
		})
	}
}

// BENCHMARKS.md target: "idle deadline → pause requested, p99 ≤ 1 s at 10,000 running sandboxes
// with spread deadlines". A few counters run on sandboxd; next to them, 10,000 running rows are
// seeded straight into the database, their deadlines spread evenly over 30 s (about 330 a
// second), with no provider sandbox behind them (their pause jobs find none to pause and end).
// The lag is, for each of them, from its deadline (last activity + idle timeout) to its idle
// pause job's insertion, which commits with the claim that asks for the pause: both times the
// database's. The counters' lag to their paused event row, which follows the provider's answer
// and the look at the app's files, is reported beside it. One round, whatever b.N: it takes
// longer than any -benchtime.
func BenchmarkIdlePauseLag(b *testing.B) {
	host := sandboxdtest.Start(b)
	cfg := fastConfig()
	seeded := testkit.BenchSize(10000, 200)
	spread := time.Duration(testkit.BenchSize(30, 3)) * time.Second
	// The counters are ready some seconds before the rows are seeded: with this timeout their
	// deadlines fall among the seeded ones.
	cfg.IdleTimeout = spread + 2*time.Second
	tb := setupWith(b, host, cfg, true)
	_, counters := runningCounters(b, tb, testkit.BenchSize(4, 2))
	u, p := founder(b, tb.pool, 1)
	ctx := context.Background()

	b.ResetTimer()
	// The first seeded deadline is a second away, the last one spread later.
	_, err := tb.pool.Exec(ctx, `
		WITH b AS (
			INSERT INTO builds (project_id, version, kind, status, files_version_id)
			SELECT $1, g, 'initial', 'ready', (SELECT id FROM versions WHERE project_id = $1 AND number = 1)
			FROM generate_series(1, $3::int) g RETURNING id, version, files_version_id)
		INSERT INTO sandboxes (owner_id, project_id, build_id, status, end_at, deployed_version_id, last_active_at)
		SELECT $2, $1, b.id, 'running', now() + interval '1 hour', b.files_version_id,
			now() - make_interval(secs => $4::float8) + make_interval(secs => 1 + $5::float8 * b.version / $3::int)
		FROM b`, p.ID, u.ID, seeded, cfg.IdleTimeout.Seconds(), spread.Seconds())
	if err != nil {
		b.Fatal(err)
	}
	// The seeded rows' deadlines were set in the past of a sleeping queue: wake it, as a
	// sandbox that starts running does.
	if _, err := tb.pool.Exec(ctx, `SELECT pg_notify($1, '')`, db.IdleChannel); err != nil {
		b.Fatal(err)
	}
	for _, sb := range counters {
		waitStatusSince(b, tb, sb.ID, sandbox.Paused, cfg.IdleTimeout+time.Minute)
	}
	want := seeded + len(counters)
	var claimed int
	testkit.Until(b, spread+time.Minute, fmt.Sprintf("the idle pauses of %d sandboxes to be asked for", want), func() bool {
		claimed = idlePauseJobs(b, tb)
		return claimed >= want
	})
	b.StopTimer()

	// Each sandbox's pause asked for once, none before its deadline.
	rows, err := tb.pool.Query(ctx, `SELECT s.id, count(*), extract(epoch FROM min(j.created_at - s.last_active_at))::float8 FROM river_job j
		JOIN sandboxes s ON s.id = (j.args->>'sandbox_id')::uuid
		WHERE j.kind = 'pause' AND (j.args->>'idle')::boolean GROUP BY s.id`)
	if err != nil {
		b.Fatal(err)
	}
	type claim struct {
		id   uuid.UUID
		n    int
		secs float64 // from its last activity to its idle pause job
	}
	claims, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (c claim, err error) {
		return c, r.Scan(&c.id, &c.n, &c.secs)
	})
	if err != nil {
		b.Fatal(err)
	}
	var samples []time.Duration
	for _, c := range claims {
		since := time.Duration(c.secs * float64(time.Second))
		if c.n != 1 {
			b.Fatalf("sandbox %s: %d idle pause jobs, want one", c.id, c.n)
		}
		if since < cfg.IdleTimeout {
			b.Fatalf("sandbox %s: its idle pause asked for %v before its deadline", c.id, cfg.IdleTimeout-since)
		}
		samples = append(samples, since-cfg.IdleTimeout)
	}
	if len(samples) != want {
		b.Fatalf("%d sandboxes' idle pauses asked for, want %d", len(samples), want)
	}
	var paused []time.Duration
	for _, sb := range counters {
		paused = append(paused, tb.idlePausedAt(b, sb.ID).Sub(tb.get(b, sb.ID).LastActiveAt.Add(cfg.IdleTimeout)))
	}
	report(b, "idle-pause-lag", samples)
	report(b, "idle-paused", paused)
}

// idlePauseJobs counts the idle pause jobs the queue has made.
func idlePauseJobs(tb testing.TB, b *testBundle) int {
	tb.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'pause' AND (args->>'idle')::boolean`).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
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
		samples = append(samples, waitStatusSince(b, tb, sb.ID, sandbox.Killed, time.Minute).Sub(start))
	}
	report(b, "corrected", samples)
}
