package ops_test

import (
	"context"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/db"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
	"sandman/ops"
	"sandman/sandbox"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// seedSandboxes makes a founder with one project and n sandboxes in the given states, and
// returns the sandboxes.
func seedSandboxes(t *testing.T, pool *pgxpool.Pool, statuses ...string) []db.Sandbox {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ($1, 'x', 1) RETURNING id),
		     p AS (INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'Demo app', 'node server.js', 3000 FROM u RETURNING id, owner_id),
		     v AS (INSERT INTO versions (project_id, number, source, file_count, total_bytes) SELECT id, 1, 'created', 0, 0 FROM p RETURNING id),
		     b AS (INSERT INTO builds (project_id, version, kind, files_version_id) SELECT p.id, g, 'initial', v.id FROM p, v,
		           generate_series(1, cardinality($2::text[])) g RETURNING id, version, files_version_id)
		INSERT INTO sandboxes (owner_id, project_id, build_id, deployed_version_id, status)
		SELECT p.owner_id, p.id, b.id, b.files_version_id, ($2::text[])[b.version]::sandbox_status FROM p, b ORDER BY b.version
		RETURNING id`, "f-"+uuid.NewString()[:8]+"@example.com", statuses)
	if err != nil {
		t.Fatal(err)
	}
	var out []db.Sandbox
	q := db.New(pool)
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		sb, err := q.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sb)
	}
	return out
}

// move records a change of state at a given time, as lifecycle's apply does in its transaction.
func move(t *testing.T, pool *pgxpool.Pool, sb *db.Sandbox, to sandbox.Status, at time.Time, endAt *time.Time) {
	t.Helper()
	err := db.InTx(context.Background(), pool, func(tx db.Tx) error {
		var before *db.Sandbox
		if sb.Status != "" {
			b := *sb
			before = &b
		}
		sb.Status, sb.EndAt = to, endAt
		return ops.Record(context.Background(), tx, before, *sb, at)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The console's figures, read from the stretches apply records (the closed ones through the
// hourly rollup, the open ones live), are the pure functions' sums over the same stretches,
// with hand-computed amounts: a preview costs $0.1089 an hour awake at the default size. The
// chart, one preview's page and the Prometheus metrics say the same.
func TestFiguresFollowTheRecordedStretches(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx := context.Background()
	sbs := seedSandboxes(t, pool, "running", "paused")
	a, b := &sbs[0], &sbs[1]
	// A clock finer than the database's (Go's nanoseconds, PostgreSQL's microseconds), as in production.
	now := time.Date(2026, 1, 2, 12, 0, 0, 789, time.UTC)
	at := func(h, m int) time.Time { return time.Date(2026, 1, 2, h, m, 0, 0, time.UTC) }
	end := func(h, m int) *time.Time { e := at(h, m); return &e }

	// A: built at 8:00, paused at 9:00 with an hour of lifetime left, resumed at 9:40, running since.
	a.Status = ""
	move(t, pool, a, sandbox.Starting, at(8, 0), end(10, 0))
	move(t, pool, a, sandbox.Running, at(8, 1), end(10, 0))
	move(t, pool, a, sandbox.Paused, at(9, 0), end(10, 0))
	move(t, pool, a, sandbox.Resuming, at(9, 40), end(10, 0))
	move(t, pool, a, sandbox.Running, at(9, 41), end(10, 41))
	// B: built at 10:30 with no end time known (lifetime 1 h from then), paused at 11:00: its
	// sleep counts until 11:30 only.
	b.Status = ""
	move(t, pool, b, sandbox.Starting, at(10, 30), nil)
	move(t, pool, b, sandbox.Paused, at(11, 0), nil)

	s := ops.New(ops.Options{Pool: pool, Config: ops.DefaultConfig(), StuckAfter: func() (time.Duration, time.Duration) { return time.Hour, time.Hour },
		Describe: func(ev db.SandboxEvent, _ sandbox.BuildKind) string { return string(ev.Reason) }})
	fig, err := s.Figures(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	const hour = 0.1089
	// Spent: A 1 h + 2 h 20 min, B 30 min. Saved: A 40 min, B 30 min (of a sleep of an hour).
	wantSpent, wantSaved := hour*(3+20.0/60+0.5), hour*(40.0/60+0.5)
	for _, p := range []string{"day", "week", "month"} {
		if math.Abs(fig.Spent[p]-wantSpent) > 1e-6 || math.Abs(fig.Saved[p]-wantSaved) > 1e-6 {
			t.Errorf("%s: spent $%.6f, saved $%.6f; want $%.6f, $%.6f", p, fig.Spent[p], fig.Saved[p], wantSpent, wantSaved)
		}
	}
	if fig.Awake != 1 || math.Abs(fig.CostPerHour-hour) > 1e-9 {
		t.Errorf("awake %d at $%.4f an hour, want 1 at $%.4f", fig.Awake, fig.CostPerHour, hour)
	}
	// The chart: A all of 10:00–11:00 and B half of it; A alone from 11:00.
	points, err := s.Chart(ctx, now.Add(time.Hour), 4)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]float64{10: 1.5, 11: 1}
	for _, p := range points {
		if w, ok := want[p.Hour.Hour()]; ok && (math.Abs(p.Running-w) > 1e-9 || math.Abs(p.Cost-w*hour) > 1e-9) {
			t.Errorf("%s: %.3f running for $%.4f, want %.3f for $%.4f", p.Hour.Format("15:04"), p.Running, p.Cost, w, w*hour)
		}
	}
	// Prometheus reads the same figures at each scrape.
	reg := prometheus.NewRegistry()
	reg.MustRegister(ops.NewCollector(s, slog.New(slog.DiscardHandler)))
	for name, want := range map[string]float64{"sandman_cost_dollars_per_hour": hour, "sandman_saved_dollars_total": wantSaved} {
		if got := testkit.MetricValue(t, reg, name, nil); math.Abs(got-want) > 1e-6 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for state, want := range map[string]float64{"running": 1, "paused": 1, "starting": 0} {
		if got := testkit.MetricValue(t, reg, "sandman_sandboxes", map[string]string{"state": state}); got != want {
			t.Errorf("sandman_sandboxes{state=%q} = %v, want %v", state, got, want)
		}
	}
	// Figures from one sandbox's own stretches agree.
	page, err := s.Sandbox(ctx, a.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(page.Spent-hour*(3+20.0/60)) > 1e-6 || math.Abs(page.Saved-hour*40/60) > 1e-6 {
		t.Errorf("A's page: spent $%.6f, saved $%.6f", page.Spent, page.Saved)
	}
}

// Operators are granted and revoked by email, idempotently, each change logged with who made
// it; an account that does not exist is refused with a message that says so.
func TestOperatorsAreGrantedOnceAndLogged(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx := context.Background()
	seedSandboxes(t, pool)
	var email string
	var id uuid.UUID
	if err := pool.QueryRow(ctx, "SELECT id, email FROM users").Scan(&id, &email); err != nil {
		t.Fatal(err)
	}
	o := ops.NewOperators(pool)
	steps := []struct {
		grant bool
		want  string
		is    bool
	}{
		{true, email + " is now an operator", true},
		{true, email + " already is an operator", true},
		{false, email + " is no longer an operator", false},
		{false, email + " was not an operator", false},
	}
	for _, st := range steps {
		change := o.Revoke
		if st.grant {
			change = o.Grant
		}
		msg, err := change(ctx, strings.ToUpper(email), "test")
		if err != nil || msg != st.want {
			t.Fatalf("%q, %v; want %q", msg, err, st.want)
		}
		if is, err := o.IsOperator(ctx, id); err != nil || is != st.is {
			t.Fatalf("after %q: operator %v (%v)", msg, is, err)
		}
	}
	var log string
	if err := pool.QueryRow(ctx, "SELECT string_agg(action::text || ' by ' || actor, ', ' ORDER BY id) FROM operator_log").Scan(&log); err != nil {
		t.Fatal(err)
	}
	if log != "grant by test, revoke by test" {
		t.Fatalf("operator log: %q", log)
	}
	if _, err := o.Grant(ctx, "nobody@example.com", "test"); err == nil || !strings.Contains(err.Error(), "must sign up first") {
		t.Fatalf("granting an account that does not exist: %v", err)
	}
}
