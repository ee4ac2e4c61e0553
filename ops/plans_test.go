package ops_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/app/apptest"
	"sandman/db"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
	"sandman/ops"
	"sandman/sandbox"
)

// recorder keeps every statement a pool runs, with its arguments.
type recorder struct {
	mu    sync.Mutex
	stmts []recorded
}

type recorded struct {
	sql  string
	args []any
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.mu.Lock()
	r.stmts = append(r.stmts, recorded{d.SQL, d.Args})
	r.mu.Unlock()
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// The console's reads stay index lookups at 100,000 sandboxes: every statement one page view
// runs (the console, a preview's page, the summary) is EXPLAINed on a seeded fleet, and none
// scans a whole table that grows with the fleet or its history.
func TestConsoleQueriesUseIndexesAt100kSandboxes(t *testing.T) {
	t.Parallel()
	// Seeding 100,000 sandboxes is most of a quick run's time on its own.
	testkit.NotInQuickLane(t, "a database of 100,000 sandboxes")
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	apptest.SeedFleet(t, pool, 100_000, 300_000)

	s := ops.New(ops.Options{Pool: pool, Config: ops.DefaultConfig(),
		StuckAfter: func() (time.Duration, time.Duration) { return 20 * time.Minute, 5 * time.Minute },
		Describe:   func(ev db.SandboxEvent, _ sandbox.BuildKind) string { return string(ev.Reason) }})
	rec.mu.Lock()
	rec.stmts = nil
	rec.mu.Unlock()
	now := time.Now()
	if _, err := s.Console(ctx, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Summary(ctx, now); err != nil {
		t.Fatal(err)
	}
	var someSandbox db.Sandbox
	if err := pool.QueryRow(ctx, "SELECT id FROM sandboxes WHERE status = 'paused' LIMIT 1").Scan(&someSandbox.ID); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	rec.stmts = rec.stmts[:len(rec.stmts)-1] // the test's own lookup
	rec.mu.Unlock()
	if _, err := s.Sandbox(ctx, someSandbox.ID, now); err != nil {
		t.Fatal(err)
	}

	rec.mu.Lock()
	stmts := rec.stmts
	rec.mu.Unlock()
	if len(stmts) < 10 {
		t.Fatalf("recorded %d statements: the recorder sees nothing", len(stmts))
	}
	// The tables that grow with the fleet and its history (a hash join may read the founders'
	// and projects' tables whole: a thousand rows here, one per founder, not per change).
	growing := []string{"sandboxes", "sandbox_events", "usage_intervals", "usage_hours", "webhook_deliveries", "builds"}
	for _, st := range stmts {
		rows, err := pool.Query(ctx, "EXPLAIN "+st.sql, st.args...)
		if err != nil {
			t.Fatalf("EXPLAIN %s: %v", st.sql, err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		plan := strings.Join(lines, "\n")
		for _, table := range growing {
			if strings.Contains(plan, "Seq Scan on "+table+" ") {
				t.Errorf("a page view scans all of %s:\n%s\n%s", table, firstLine(st.sql), plan)
			}
		}
	}
	t.Logf("%d statements for the console, the summary and a preview's page", len(stmts))
}

func firstLine(sql string) string {
	sql = strings.TrimSpace(sql)
	if i := strings.IndexByte(sql, '\n'); i > 0 {
		return sql[:i]
	}
	return sql
}
