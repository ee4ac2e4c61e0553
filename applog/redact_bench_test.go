package applog_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/applog"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
)

// BenchmarkLogRedaction: the cost of replacing secrets in the apps' output on ingest
// (BENCHMARKS.md, target ≤ 10 % at 100 secrets). 200 previews flood lines at once through a
// Writer without redaction, then through one whose every project has 100 secrets of 24 to 40
// characters, in the same run: lines/s of each and the cost in %. `redact-ns/line` is the
// replacement alone, per line. The check, under -short too: a secret printed is stored as
// [secret NAME].
func BenchmarkLogRedaction(b *testing.B) {
	ctx := context.Background()
	pool := dbtest.NewPool(b)
	projects := benchProjects(b, pool, 200)
	secrets := map[uuid.UUID]map[string]string{}
	for _, p := range projects {
		s := map[string]string{}
		for i := range 100 {
			s[fmt.Sprintf("SECRET_%d", i)] = (rand.Text() + rand.Text())[:24+i%17]
		}
		secrets[p] = s
	}
	lookup := func(_ context.Context, ids []uuid.UUID) (map[uuid.UUID]map[string]string, error) {
		out := map[uuid.UUID]map[string]string{}
		for _, id := range ids {
			out[id] = secrets[id]
		}
		return out, nil
	}
	perRun := testkit.BenchSize(1000, 50)
	through := func(redact bool) float64 {
		w := applog.NewWriter(pool, applog.DefaultWriterConfig(), nil, nil)
		if redact {
			w.RedactWith(lookup)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { w.Run(runCtx); close(done) }()
		defer func() { cancel(); <-done }()
		n, _, elapsed := ingest(b, pool, w, projects, perRun, 0)
		return float64(n) / elapsed.Seconds()
	}
	for range b.N {
		// Each run's table is larger than the one before: the two kinds alternate (ABBAAB), and
		// each one's median is taken.
		var on, off []float64
		for _, redact := range []bool{true, false, false, true, true, false} {
			if r := through(redact); redact {
				on = append(on, r)
			} else {
				off = append(off, r)
			}
		}
		slices.Sort(on)
		slices.Sort(off)
		b.ReportMetric(off[1], "plain-lines/s")
		b.ReportMetric(on[1], "redacted-lines/s")
		b.ReportMetric(100*(off[1]/on[1]-1), "cost-%")
	}

	r := applog.NewRedactor(secrets[projects[0]])
	line := "GET /api/items/12345 200 in 7 ms"
	start := time.Now()
	const n = 100_000
	for range n {
		_ = r.Redact(line)
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/n, "redact-ns/line")

	// A secret printed is stored by its name.
	w := applog.NewWriter(pool, applog.DefaultWriterConfig(), nil, nil)
	w.RedactWith(lookup)
	run := applog.Run{ProjectID: projects[0], SandboxID: projects[0], Version: 1, Source: applog.SourceApp, ID: uuid.New()}
	w.Lines(ctx, []applog.Line{{Run: run, Stream: applog.Stdout, Text: "key=" + secrets[projects[0]]["SECRET_7"] + ";"}})
	if err := w.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	var text string
	if err := pool.QueryRow(ctx, `SELECT text FROM app_log_lines WHERE run_id = $1`, run.ID).Scan(&text); err != nil {
		b.Fatal(err)
	}
	if text != "key=[secret SECRET_7];" {
		b.Fatalf("stored %q, want the secret by its name", text)
	}
}
