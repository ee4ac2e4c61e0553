// Package dbtest gives each test its own migrated PostgreSQL database. A test binary starts one
// private cluster (or uses TEST_DATABASE_URL's server), migrates a template database once, and
// clones it per test with CREATE DATABASE … TEMPLATE, which takes milliseconds.
package dbtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/db"
	"sandman/db/localpg"
	"sandman/internal/testkit"
)

var (
	setupOnce sync.Once
	setupErr  error
	cluster   *localpg.Cluster
	serverURL *url.URL // points at the maintenance database "postgres"
	tmplName  string
	tmpDir    string
	createMu  sync.Mutex // CREATE DATABASE … TEMPLATE fails if two copies of the template run at once
	counter   atomic.Int64
)

// Main runs the tests and then stops the cluster: call it from TestMain.
//
//	func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	teardown()
	return code
}

func setup() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw := os.Getenv("TEST_DATABASE_URL")
	if raw == "" {
		// Not t.TempDir(): the postgres user cannot enter the test's private temp parent.
		dir, err := os.MkdirTemp("", "sandman-pg-")
		if err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		tmpDir = dir
		// A non-UTC zone catches code that forgets time zones.
		c, err := localpg.Start(ctx, localpg.Options{Dir: dir + "/data", Settings: map[string]string{"timezone": "America/Sao_Paulo"}})
		if err != nil {
			return err
		}
		cluster = c
		raw = c.URL("postgres")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("TEST_DATABASE_URL: %w", err)
	}
	serverURL = u
	tmplName = fmt.Sprintf("sandman_tpl_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	if err := exec(ctx, "CREATE DATABASE "+pgx.Identifier{tmplName}.Sanitize()); err != nil {
		return err
	}
	pool, err := db.Open(ctx, urlFor(tmplName))
	if err != nil {
		return err
	}
	defer pool.Close()
	return db.Migrate(ctx, pool)
}

func teardown() {
	if cluster != nil {
		cluster.Stop()
		_ = os.RemoveAll(tmpDir)
		return
	}
	if tmplName != "" && serverURL != nil {
		_ = exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{tmplName}.Sanitize()+" WITH (FORCE)")
	}
}

func urlFor(name string) string {
	u := *serverURL
	u.Path = "/" + name
	return u.String()
}

func exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, serverURL.String())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// NewDatabase creates a fresh migrated database for t and returns its URL; it is dropped when
// t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("test database: %v", setupErr)
	}
	name := fmt.Sprintf("%s_t%d", tmplName, counter.Add(1))
	ctx := context.Background()
	createMu.Lock()
	err := exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s",
		pgx.Identifier{name}.Sanitize(), pgx.Identifier{tmplName}.Sanitize()))
	createMu.Unlock()
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		if err := exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("drop test database: %v", err)
		}
	})
	return urlFor(name)
}

// NewPool is NewDatabase plus a pool on it, closed when t ends.
func NewPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := db.Open(context.Background(), NewDatabase(t))
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// EmptyDatabase creates an unmigrated database for tests of the migrations themselves.
func EmptyDatabase(t testing.TB) string {
	t.Helper()
	setupOnce.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("test database: %v", setupErr)
	}
	name := fmt.Sprintf("%s_e%d", tmplName, counter.Add(1))
	if err := exec(context.Background(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("create empty database: %v", err)
	}
	t.Cleanup(func() {
		_ = exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	})
	return urlFor(name)
}

// Cluster is a PostgreSQL server of the test's own, for a test that stops or restarts it (the
// binary's shared server serves every other test). Its database's URL survives restarts.
type Cluster struct {
	// URL is the test's database on it (empty: Sandman migrates it at start).
	URL string
	pg  *localpg.Cluster
}

// NewCluster starts a private server for t and creates a database on it; both go when t ends.
// It is the test's own even under TEST_DATABASE_URL (a server the tests do not own, and must
// not restart). Without PostgreSQL's server programs the test is skipped, and under CI=true it
// fails: CI runs every test.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "sandman-pg-own-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{}
	ctx := context.Background()
	if c.pg, err = localpg.Start(ctx, localpg.Options{Dir: dir + "/data"}); err != nil {
		var missing *localpg.MissingBinariesError
		testkit.Needs(t, !errors.As(err, &missing), "a private PostgreSQL server: %v", err)
		t.Fatalf("start a private cluster: %v", err)
	}
	t.Cleanup(func() { c.pg.Stop() })
	conn, err := pgx.Connect(ctx, c.pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE sandman"); err != nil {
		t.Fatal(err)
	}
	c.URL = c.pg.URL("sandman")
	return c
}

// Stop shuts the server down (a fast shutdown: connections are cut, data is kept).
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	c.pg.Stop()
}

// Start starts the stopped server again, on the same port.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	pg, err := localpg.Start(context.Background(), localpg.Options{Dir: c.pg.Dir, Port: c.pg.Port})
	if err != nil {
		t.Fatalf("start the private cluster again: %v", err)
	}
	c.pg = pg
}
