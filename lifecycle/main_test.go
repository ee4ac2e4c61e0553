package lifecycle_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/db"
	"sandman/db/dbtest"
	"sandman/e2b"
	"sandman/lifecycle"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

type testBundle struct {
	pool *pgxpool.Pool
	svc  *lifecycle.Service
}

// setup gives a test its own database and a lifecycle Service; work starts the River workers
// (which then need a provider, see setupWithProvider).
func setup(t testing.TB, work bool) *testBundle {
	t.Helper()
	return setupWith(t, nil, lifecycle.DefaultConfig(), work)
}

func setupWith(t testing.TB, provider *e2b.Client, cfg lifecycle.Config, work bool) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("SANDMAN_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	}
	svc, err := lifecycle.New(lifecycle.Options{Pool: pool, Provider: provider, Config: cfg, Work: work, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if work {
		ctx, cancel := context.WithCancel(context.Background())
		if err := svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cancel()
			_ = svc.Stop(context.Background())
		})
	}
	return &testBundle{pool: pool, svc: svc}
}

// sandboxesOf lists a project's sandboxes, newest first.
func (b *testBundle) sandboxesOf(t testing.TB, projectID uuid.UUID) []db.Sandbox {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT id FROM sandboxes WHERE project_id = $1 ORDER BY created_at DESC", projectID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []db.Sandbox
	q := db.New(b.pool)
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		sb, err := q.GetSandbox(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sb)
	}
	return out
}

func logLevel() slog.Level {
	var l slog.Level
	_ = l.UnmarshalText([]byte(os.Getenv("SANDMAN_TEST_LOG")))
	return l
}
