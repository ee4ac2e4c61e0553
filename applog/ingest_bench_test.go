package applog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/applog"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
)

// BenchmarkLogIngest: 1,000 previews printing at once, 10 lines a call as a process stream's
// reads come, through one Writer into the database: lines/s stored, from the first line taken to
// the last one stored, and the lines dropped. `flood`: each prints as fast as it can (past what
// may wait while the database is behind, lines are dropped and told); its floor, in the same
// run, is the same number of rows written by bare COPYs of the Writer's batch size, one after
// the other (`floor-lines/s`). `paced`: each prints 50 lines a second, 50,000 a second in all,
// issue 26's target, for 4 s (1 s under -short). The check, which also runs under -short: no
// line is lost silently; every line is stored or counted by a "lines dropped" line.
func BenchmarkLogIngest(b *testing.B) {
	ctx := context.Background()
	pool := dbtest.NewPool(b)
	const runs = 1000
	projects := benchProjects(b, pool, runs)
	w := applog.NewWriter(pool, applog.DefaultWriterConfig(), nil, nil)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()

	b.Run("flood", func(b *testing.B) {
		perRun := testkit.BenchSize(200, 20)
		for range b.N {
			n, dropped, elapsed := ingest(b, pool, w, projects, perRun, 0)
			b.ReportMetric(float64(dropped), "dropped")
			b.ReportMetric(float64(n)/elapsed.Seconds(), "lines/s")
			b.ReportMetric(float64(n)/copyFloor(b, pool, projects, n).Seconds(), "floor-lines/s")
		}
	})
	b.Run("paced", func(b *testing.B) {
		const every = 200 * time.Millisecond // 10 lines each time: 50 lines a second
		perRun := 10 * int(time.Duration(testkit.BenchSize(4, 1))*time.Second/every)
		for range b.N {
			n, dropped, elapsed := ingest(b, pool, w, projects, perRun, every)
			b.ReportMetric(float64(dropped), "dropped")
			b.ReportMetric(float64(n)/elapsed.Seconds(), "lines/s")
		}
	})
}

// ingest has every project's run print perRun lines, 10 a call, a call each every (at once when
// 0), waits until the Writer stored them, and checks that each line is stored or told dropped.
func ingest(b *testing.B, pool *pgxpool.Pool, w *applog.Writer, projects []uuid.UUID, perRun int, every time.Duration) (stored int, dropped int64, elapsed time.Duration) {
	ctx := context.Background()
	var before int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM app_log_lines`).Scan(&before); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for k, p := range projects {
		r := applog.Run{ProjectID: p, SandboxID: p, Version: 1, Source: applog.SourceApp, ID: uuid.New()}
		wg.Go(func() {
			lines := make([]applog.Line, 10)
			next := start.Add(every * time.Duration(k) / time.Duration(len(projects))) // spread over the period
			for i := 0; i < perRun; i += 10 {
				if every > 0 {
					time.Sleep(time.Until(next))
					next = next.Add(every)
				}
				for j := range lines {
					lines[j] = applog.Line{Run: r, Stream: applog.Stdout, At: time.Now(),
						Text: fmt.Sprintf("GET /api/items/%d 200 in %d ms", i+j, j)}
				}
				w.Lines(ctx, lines)
			}
		})
	}
	wg.Wait()
	if err := w.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	elapsed = time.Since(start)
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE text NOT LIKE '[sandman] % lines dropped%'),
		coalesce(sum(split_part(text, ' ', 2)::bigint) FILTER (WHERE text LIKE '[sandman] % lines dropped%'), 0)
		FROM app_log_lines WHERE seq > $1`, before).Scan(&stored, &dropped); err != nil {
		b.Fatal(err)
	}
	if int64(stored)+dropped != int64(len(projects)*perRun) {
		b.Fatalf("%d lines stored and %d told dropped of %d: lines were lost silently", stored, dropped, len(projects)*perRun)
	}
	return stored, dropped, elapsed
}

// copyFloor writes n lines like the benchmark's into app_log_lines by bare COPYs of the Writer's
// batch size, one after the other, and returns how long they took.
func copyFloor(b *testing.B, pool *pgxpool.Pool, projects []uuid.UUID, n int) time.Duration {
	ctx := context.Background()
	batch := applog.DefaultWriterConfig().MaxBatch
	runs := make([]uuid.UUID, len(projects))
	for i := range runs {
		runs[i] = uuid.New()
	}
	now := time.Now()
	rows := make([][]any, 0, n)
	for i := range n {
		p := projects[i%len(projects)]
		rows = append(rows, []any{p, p, int32(1), runs[i%len(runs)], "app", "stdout", now,
			fmt.Sprintf("GET /api/items/%d 200 in %d ms", i/len(projects), i%10)})
	}
	cols := []string{"project_id", "sandbox_id", "version", "run_id", "source", "stream", "at", "text"}
	start := time.Now()
	for i := 0; i < len(rows); i += batch {
		if _, err := pool.CopyFrom(ctx, pgx.Identifier{"app_log_lines"}, cols, pgx.CopyFromRows(rows[i:min(i+batch, len(rows))])); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// benchProjects makes a founder with n projects.
func benchProjects(b *testing.B, pool *pgxpool.Pool, n int) []uuid.UUID {
	ctx := context.Background()
	var owner uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, credits) VALUES ('bench@example.com', 'x', 1) RETURNING id`).Scan(&owner); err != nil {
		b.Fatal(err)
	}
	rows, err := pool.Query(ctx, `INSERT INTO projects (owner_id, name, start_command, port)
		SELECT $1, 'p' || i, 'node server.js', 3000 FROM generate_series(1, $2) i RETURNING id`, owner, n)
	if err != nil {
		b.Fatal(err)
	}
	projects, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		b.Fatal(err)
	}
	return projects
}
