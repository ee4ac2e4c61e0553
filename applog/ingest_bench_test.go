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
// reads come, through one Writer into the database: lines/s from the first line taken to the
// last one stored. Each run stays within its rate, so every line must be stored (the check that
// also runs under -short).
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
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM app_log_lines WHERE seq > $1`, before).Scan(&n); err != nil {
			b.Fatal(err)
		}
		if n != runs*perRun {
			b.Fatalf("%d lines stored of %d: lines were lost below the drop rate", n, runs*perRun)
		}
		b.ReportMetric(float64(runs*perRun)/elapsed.Seconds(), "lines/s")
	}
}
