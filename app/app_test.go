package app_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
	"sandman/sandboxd/sandboxdtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func TestNewRefusesAnUnknownRole(t *testing.T) {
	t.Parallel()
	cfg := apptest.Config(sandboxdtest.Start(t), dbtest.NewDatabase(t))
	cfg.Role = "everything"
	if _, err := app.New(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "--role") {
		t.Fatalf("err %v, want one naming --role", err)
	}
}

// A worker runs jobs and serves nothing: no listener, no hub, no handler; with a metrics
// address, its metrics (its jobs' provider calls) are served there.
func TestWorkerServesNothing(t *testing.T) {
	t.Parallel()
	w := apptest.Start(t, apptest.Options{Role: app.RoleWorker})
	if w.URL() != "" || w.Hub() != nil || w.Handler() != nil || w.MetricsURL() != "" {
		t.Fatalf("a worker serves: url %q, hub %v, handler %v, metrics %q", w.URL(), w.Hub(), w.Handler(), w.MetricsURL())
	}
	m := apptest.Start(t, apptest.Options{Role: app.RoleWorker, Config: func(c *app.Config) { c.MetricsAddr = "127.0.0.1:0" }})
	res, err := http.Get(m.MetricsURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "sandman_e2b_circuit_state") || m.URL() != "" {
		t.Fatalf("a worker's metrics address: %d %.200s; its main address %q", res.StatusCode, body, m.URL())
	}
}

// Stop ends every event stream (server shutdown would wait for them otherwise), closes the
// pool, and may be called again.
func TestStopEndsStreamsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, apptest.Options{Role: app.RoleWeb})
	c := s.NewClient(t)
	c.SignUp("stop@example.com")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.Stream(ctx)
	testkit.Until(t, 10*time.Second, "the stream to open", func() bool { return s.Hub().Clients() == 1 })

	stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := s.App.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 10*time.Second, "the stream to end", func() bool {
		select {
		case _, open := <-events:
			return !open
		default:
			return false
		}
	})
	if err := s.App.Stop(stopCtx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := s.Pool().Ping(context.Background()); err == nil {
		t.Fatal("the pool still answers after Stop")
	}
	if _, err := http.Get(s.URL() + "/healthz"); err == nil {
		t.Fatal("the server still answers after Stop")
	}
}

// sandman demo-founder is what make run calls at every start: running it twice creates one
// founder with the starter projects and charges each first build once.
func TestDemoFounderIsIdempotent(t *testing.T) {
	t.Parallel()
	s := apptest.Start(t, apptest.Options{Role: app.RoleWeb})
	cfg := s.Config()
	for range 2 {
		if err := app.DemoFounder(context.Background(), cfg, "demo@example.com", apptest.Password); err != nil {
			t.Fatal(err)
		}
	}
	var founders, projects, builds, credits int
	if err := s.Pool().QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM users),
		(SELECT count(*) FROM projects),
		(SELECT count(*) FROM builds),
		(SELECT credits FROM users WHERE email = 'demo@example.com')`).Scan(&founders, &projects, &builds, &credits); err != nil {
		t.Fatal(err)
	}
	if founders != 1 || projects != 2 || builds != 2 || credits != int(cfg.StartCredits)-2 {
		t.Fatalf("%d founders, %d projects, %d builds, %d credits left; want 1, 2, 2 and %d",
			founders, projects, builds, credits, cfg.StartCredits-2)
	}
}
