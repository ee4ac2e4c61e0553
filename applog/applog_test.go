package applog_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/applog"
	"sandman/db"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// project makes a founder and a project in the database.
func project(t testing.TB, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := pool.QueryRow(context.Background(), `WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ($1, 'x', 1) RETURNING id)
		INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING id`,
		uuid.NewString()[:8]+"@example.com").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func newRun(project uuid.UUID, version int32, source applog.Source) applog.Run {
	return applog.Run{ProjectID: project, SandboxID: uuid.New(), Version: version, Source: source, ID: uuid.New()}
}

// writer is a Writer that the test flushes itself (no Run loop), with cfg's changes.
func writer(t testing.TB, pool *pgxpool.Pool, edit func(*applog.WriterConfig)) *applog.Writer {
	t.Helper()
	cfg := applog.DefaultWriterConfig()
	if edit != nil {
		edit(&cfg)
	}
	return applog.NewWriter(pool, cfg, nil, nil)
}

func service(pool *pgxpool.Pool, w *applog.Writer) *applog.Service {
	return applog.New(pool, w, applog.NewFeed(nil), applog.DefaultReportLimits())
}

func print(w *applog.Writer, r applog.Run, texts ...string) {
	lines := make([]applog.Line, len(texts))
	for i, s := range texts {
		lines[i] = applog.Line{Run: r, Stream: applog.Stdout, Text: s}
	}
	w.Lines(context.Background(), lines)
}

func flush(t testing.TB, w *applog.Writer) {
	t.Helper()
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// runLines is what the database holds of one run, oldest first.
func runLines(t testing.TB, pool *pgxpool.Pool, run uuid.UUID) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT text FROM app_log_lines WHERE run_id = $1 ORDER BY seq`, run)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// A flood keeps each project within its bounds, the newest lines kept: 10,000 lines (short
// lines) or 2 MiB (long ones), whichever comes first, and the running totals the trim decides
// by stay equal to what is stored.
func TestAFloodKeepsEachProjectWithinItsLinesAndBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	w := writer(t, pool, func(c *applog.WriterConfig) { c.RunRate, c.RunBurst, c.MaxBatch = 1e9, 1e9, 2000 })
	s := service(pool, w)
	short, long := project(t, pool), project(t, pool)
	rs, rl := newRun(short, 1, applog.SourceApp), newRun(long, 1, applog.SourceApp)
	pad := strings.Repeat("x", 4000)
	for i := range 30 {
		batch := make([]string, 1000)
		for j := range batch {
			batch[j] = fmt.Sprintf("short %d", i*1000+j)
		}
		print(w, rs, batch...)
		print(w, rl, fmt.Sprintf("long %d %s", i*10, pad), fmt.Sprintf("long %d %s", i*10+1, pad))
		flush(t, w)
	}
	for i := range 600 {
		print(w, rl, fmt.Sprintf("long %d %s", 1000+i, pad))
	}
	flush(t, w)

	for _, tc := range []struct {
		name     string
		project  uuid.UUID
		newest   string
		minLines int64
		minBytes int64
	}{
		{"short lines", short, "short 29999", 10_000, 0},
		{"long lines", long, "long 1599 " + pad, 0, 2<<20 - 4100},
	} {
		lines, bytes, err := s.Counts(ctx, tc.project)
		if err != nil {
			t.Fatal(err)
		}
		if lines > 10_000 || bytes > 2<<20 {
			t.Errorf("%s: %d lines, %d bytes kept; want at most 10,000 and 2 MiB", tc.name, lines, bytes)
		}
		if lines < tc.minLines || bytes < tc.minBytes {
			t.Errorf("%s: %d lines, %d bytes kept; the trim took more than it had to", tc.name, lines, bytes)
		}
		var tl, tb int64
		if err := pool.QueryRow(ctx, `SELECT lines, bytes FROM app_log_totals WHERE project_id = $1`, tc.project).Scan(&tl, &tb); err != nil {
			t.Fatal(err)
		}
		if tl != lines || tb != bytes {
			t.Errorf("%s: totals say %d lines, %d bytes; %d, %d are stored", tc.name, tl, tb, lines, bytes)
		}
		got, err := s.LinesAfter(ctx, tc.project, 0, applog.MaxPage)
		if err != nil {
			t.Fatal(err)
		}
		var last string
		for len(got) > 0 {
			last = got[len(got)-1].Text
			got, err = s.LinesAfter(ctx, tc.project, got[len(got)-1].Seq, applog.MaxPage)
			if err != nil {
				t.Fatal(err)
			}
		}
		if last != tc.newest {
			t.Errorf("%s: the newest line kept is %.40q, want %.40q", tc.name, last, tc.newest)
		}
	}
}

// A line longer than 16 KiB is stored cut, with a mark naming its length; bytes PostgreSQL's
// text cannot hold (a NUL, invalid UTF-8) are replaced, and never fail the batch they came in.
func TestALineIsStoredWithin16KiBAndAnyBytesAreStorable(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	w := writer(t, pool, nil)
	r := newRun(project(t, pool), 1, applog.SourceApp)
	huge := strings.Repeat("é", 50_000) // 100,000 bytes, two to a character: a cut may not split one
	print(w, r, huge, "nul\x00byte", "bad \xff utf8", "ok")
	flush(t, w)
	got := runLines(t, pool, r.ID)
	if len(got) != 4 {
		t.Fatalf("stored %d lines, want 4: %.80q", len(got), got)
	}
	if len(got[0]) > applog.MaxLineBytes || !strings.HasSuffix(got[0], "[line cut: 100000 bytes]") || !strings.HasPrefix(got[0], "éé") {
		t.Errorf("a 100,000-byte line is stored as %d bytes ending %q; want at most %d, cut with a mark", len(got[0]), got[0][max(0, len(got[0])-40):], applog.MaxLineBytes)
	}
	if got[1] != "nul\uFFFDbyte" || got[2] != "bad \uFFFD utf8" || got[3] != "ok" {
		t.Errorf("stored %q, %q, %q", got[1], got[2], got[3])
	}
}

// A run printing past its rate loses the excess, and a line says how many were dropped; another
// run printing at the same time loses nothing.
func TestARunPastItsRateIsDroppedWithALineSayingHowMany(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	w := writer(t, pool, func(c *applog.WriterConfig) { c.RunRate, c.RunBurst = 100, 100 })
	p := project(t, pool)
	flood, quiet := newRun(p, 1, applog.SourceApp), newRun(p, 1, applog.SourceApp)
	lines := make([]string, 1000)
	for i := range lines {
		lines[i] = fmt.Sprintf("flood %d", i)
	}
	print(w, flood, lines...)
	print(w, quiet, "quiet 1", "quiet 2", "quiet 3")
	flush(t, w)
	got := runLines(t, pool, flood.ID)
	// The burst (100) and what the rate refilled while the 1,000 were taken (at most a few).
	if len(got) < 101 || len(got) > 110 {
		t.Fatalf("the flooding run stored %d lines; want its burst of 100 and one saying what was dropped", len(got))
	}
	last := got[len(got)-1]
	if want := fmt.Sprintf("[sandman] %d lines dropped", 1000-(len(got)-1)); !strings.HasPrefix(last, want) {
		t.Errorf("its last line is %q, want it to start %q", last, want)
	}
	if q := runLines(t, pool, quiet.ID); len(q) != 3 {
		t.Errorf("the quiet run stored %q, want its 3 lines", q)
	}
}

// An exit's problem is told from that run's output only: a restart's earlier run (the same
// version, the same sandbox) never lends it a line, and the message is the last line that looks
// like an error.
func TestAProblemsDetailHoldsOnlyItsRunsLines(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	w := writer(t, pool, nil)
	s := service(pool, w)
	p := project(t, pool)
	earlier := newRun(p, 2, applog.SourceApp)
	print(w, earlier, "counter listening on 3000")
	later := earlier
	later.ID = uuid.New()
	print(w, later, "/app/server.js:3", "SyntaxError: Unexpected token '}'", "    at wrapSafe (node:internal/modules/cjs/loader:1378:20)", "Node.js v22.1.0")
	prob, err := s.OpenExitProblem(ctx, later, 1)
	if err != nil {
		t.Fatal(err)
	}
	if prob.Message != "SyntaxError: Unexpected token '}'" {
		t.Errorf("message %q, want the error line", prob.Message)
	}
	if strings.Contains(prob.Detail, "listening") || !strings.Contains(prob.Detail, "Node.js v22.1.0") || !strings.HasSuffix(prob.Detail, "exited with code 1.") {
		t.Errorf("detail %q: want the later run's lines and its exit code, and nothing of the earlier run", prob.Detail)
	}
	if prob.Source != applog.SourceApp || prob.Version != 2 || !prob.Open || prob.Count != 1 {
		t.Errorf("problem %+v", prob)
	}

	silent := newRun(p, 2, applog.SourceInstall)
	prob, err = s.OpenExitProblem(ctx, silent, 137)
	if err != nil {
		t.Fatal(err)
	}
	if prob.Message != "The install exited with code 137." {
		t.Errorf("a silent run's message is %q", prob.Message)
	}
}

// The same failure again is one problem counted twice (numbers and ids in its message do not
// tell it apart); another version's or source's is another problem.
func TestTheSameProblemIsCountedNotRepeated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	w := writer(t, pool, nil)
	s := service(pool, w)
	p := project(t, pool)
	for i, v := range []int32{3, 3, 4} {
		r := newRun(p, v, applog.SourceApp)
		print(w, r, fmt.Sprintf("Error: listen EADDRINUSE: address already in use :::%d (req %x)", 3000+i, 0xdeadbeef00+i))
		if _, err := s.OpenExitProblem(ctx, r, 1); err != nil {
			t.Fatal(err)
		}
	}
	var owner uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT owner_id FROM projects WHERE id = $1`, p).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	probs, err := s.Problems(ctx, owner, p)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int32]int64{}
	for _, pr := range probs {
		counts[pr.Version] += pr.Count
		if pr.Version == 3 && pr.Count == 2 && !strings.Contains(pr.Message, ":::3001") {
			t.Errorf("the repeat's message is %q: want the newest", pr.Message)
		}
	}
	if len(probs) != 2 || counts[3] != 2 || counts[4] != 1 {
		t.Errorf("problems %+v; want version 3's counted twice and version 4's once", probs)
	}
}

// A newer version up closes every open problem of older versions, and only those.
func TestANewerVersionUpClosesOlderProblems(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	w := writer(t, pool, nil)
	s := service(pool, w)
	p := project(t, pool)
	for _, v := range []int32{1, 2, 3} {
		if _, err := s.OpenExitProblem(ctx, newRun(p, v, applog.SourceApp), 1); err != nil {
			t.Fatal(err)
		}
	}
	err := db.InTx(ctx, pool, func(tx db.Tx) error {
		n, err := applog.CloseProblems(ctx, tx, p, 2)
		if n != 1 {
			t.Errorf("closed %d problems, want 1 (version 1's)", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var owner uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT owner_id FROM projects WHERE id = $1`, p).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	probs, err := s.Problems(ctx, owner, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range probs {
		if pr.Open != (pr.Version >= 2) {
			t.Errorf("version %d's problem open=%v after version 2 came up", pr.Version, pr.Open)
		}
	}
	if _, err := s.Problems(ctx, uuid.New(), p); err == nil {
		t.Error("another founder read the project's problems")
	}
}

// Lines of many runs printing at once are all stored (below their rate), in one statement per
// batch, whatever the number of runs.
func TestLinesOfManyRunsAreAllStored(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	w := writer(t, pool, func(c *applog.WriterConfig) { c.FlushEvery = 10 * time.Millisecond })
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(runCtx); close(done) }()
	p := project(t, pool)
	for i := range 50 {
		r := newRun(p, 1, applog.SourceApp)
		for j := range 20 {
			print(w, r, fmt.Sprintf("run %d line %d", i, j))
		}
	}
	cancel()
	<-done // Run writes what is left when it ends
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM app_log_lines WHERE project_id = $1`, p).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1000 {
		t.Errorf("stored %d lines of 1,000", n)
	}
}

// A batch the Writer took is written whole even when the Writer is stopped while the database
// holds it up: its lines wait nowhere else, so a write cut short by the stop would lose them.
func TestABatchTakenIsStoredWholeWhenTheWriterStops(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	w := writer(t, pool, func(c *applog.WriterConfig) { c.FlushEvery = 10 * time.Millisecond })
	p := project(t, pool)
	// Another transaction holds the totals: the batch's write waits on it, after its COPY.
	hold, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx) //nolint:errcheck // committed below
	if _, err := hold.Exec(ctx, `LOCK TABLE app_log_totals IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { w.Run(runCtx); close(done) }()
	r := newRun(p, 1, applog.SourceApp)
	for j := range 100 {
		print(w, r, fmt.Sprintf("line %d", j))
	}
	testkit.Until(t, time.Minute, "the batch's write to wait on the held totals", func() bool {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%app_log_totals%'`).Scan(&n)
		return err == nil && n > 0
	})
	cancel() // the stop comes while the write waits: the write must not end with it
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM app_log_lines WHERE project_id = $1`, p).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 100 {
		t.Errorf("stored %d lines of the 100 the Writer had taken when it was stopped", n)
	}
}
