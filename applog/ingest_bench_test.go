package applog_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/applog"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
)

// BenchmarkLogIngest: 1,000 previews printing at once, 10 lines a call as a process stream's
// reads come, as fast as they can, through one Writer into the database: lines/s stored, from
// the first line taken to the last one stored, and the lines dropped (past what may wait while
// the database is behind; each run stays within its own rate). The check, which also runs under
// -short: no line is lost silently; every line is stored or counted by a "lines dropped" line.
func BenchmarkLogIngest(b *testing.B) {
	ctx := context.Background()
	pool := dbtest.NewPool(b)
	const runs = 1000
	perRun := testkit.BenchSize(200, 20)
	var owner uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO users (email, password_hash, credits) VALUES ('bench@example.com', 'x', 1) RETURNING id`).Scan(&owner); err != nil {
		b.Fatal(err)
	}
	rows, err := pool.Query(ctx, `INSERT INTO projects (owner_id, name, start_command, port)
		SELECT $1, 'p' || i, 'node server.js', 3000 FROM generate_series(1, $2) i RETURNING id`, owner, runs)
	if err != nil {
		b.Fatal(err)
	}
	var projects []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			b.Fatal(err)
		}
		projects = append(projects, id)
	}
	if rows.Err() != nil {
		b.Fatal(rows.Err())
	}
	w := applog.NewWriter(pool, applog.DefaultWriterConfig(), nil, nil)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(runCtx); close(done) }()
	defer func() { cancel(); <-done }()

	b.ResetTimer()
	for range b.N {
		var before int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(max(seq), 0) FROM app_log_lines`).Scan(&before); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		for _, p := range projects {
			r := applog.Run{ProjectID: p, SandboxID: p, Version: 1, Source: applog.SourceApp, ID: uuid.New()}
			wg.Go(func() {
				lines := make([]applog.Line, 10)
				for i := 0; i < perRun; i += 10 {
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
		elapsed := time.Since(start)
		var n int
		var dropped int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE text NOT LIKE '[sandman] % lines dropped%'),
			coalesce(sum(split_part(text, ' ', 2)::bigint) FILTER (WHERE text LIKE '[sandman] % lines dropped%'), 0)
			FROM app_log_lines WHERE seq > $1`, before).Scan(&n, &dropped); err != nil {
			b.Fatal(err)
		}
		if int64(n)+dropped != int64(runs*perRun) {
			b.Fatalf("%d lines stored and %d told dropped of %d: lines were lost silently", n, dropped, runs*perRun)
		}
		b.ReportMetric(float64(dropped), "dropped")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "lines/s")
	}
}
