package lifecycle_test

import (
	"context"
	"log/slog"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/db"
	"sandman/db/dbtest"
	"sandman/e2b"
	"sandman/lifecycle"
	"sandman/overview"
	"sandman/sandboxd/sandboxdtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// testBundle is one Sandman instance, assembled by package app as production assembles it,
// with the parts these tests drive directly.
type testBundle struct {
	*apptest.Instance
	pool *pgxpool.Pool
	svc  *lifecycle.Service
	ov   *overview.Reader
}

// instanceOptions say which instance setupWith and instance start.
type instanceOptions struct {
	host        *sandboxdtest.Host // nil: a sandboxd of its own
	databaseURL string             // empty: a fresh database
	config      lifecycle.Config
	work        bool                // run the jobs (else: a web-only instance that only queues them)
	webhooks    bool                // sandboxd delivers its webhooks to the instance
	logger      *slog.Logger        // nil: testkit.Logger
	provider    []func(*e2b.Config) // edits of the provider client's configuration
}

// instance runs one Sandman instance for the test; several may share a host and a database, as
// the instances of one deployment do.
func instance(t testing.TB, o instanceOptions) *testBundle {
	t.Helper()
	role := app.RoleWeb
	if o.work {
		role = app.RoleAll
	}
	inst := apptest.Start(t, apptest.Options{Role: role, Host: o.host, DatabaseURL: o.databaseURL, Webhooks: o.webhooks, Logger: o.logger,
		Config: func(c *app.Config) {
			c.Lifecycle = o.config
			for _, edit := range o.provider {
				edit(&c.Provider)
			}
		}})
	return &testBundle{Instance: inst, pool: inst.Pool(), svc: inst.Lifecycle(), ov: inst.Overview()}
}

// setup gives a test its own instance on its own database; work runs the jobs.
func setup(t testing.TB, work bool) *testBundle {
	t.Helper()
	return instance(t, instanceOptions{config: fastConfig(), work: work})
}

// setupWith is setup in front of host, with cfg and the provider client edited by tweaks.
func setupWith(t testing.TB, host *sandboxdtest.Host, cfg lifecycle.Config, work bool, tweaks ...func(*e2b.Config)) *testBundle {
	t.Helper()
	return instance(t, instanceOptions{host: host, config: cfg, work: work, provider: tweaks})
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
