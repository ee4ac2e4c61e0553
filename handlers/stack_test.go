package handlers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"sandman/db"
	"sandman/db/dbtest"
	"sandman/e2b"
	"sandman/handlers"
	"sandman/lifecycle"
	"sandman/live"
	"sandman/sandboxd/sandboxdtest"
)

// stack is one Sandman instance wired as cmd/sandman wires it (workers, live hub fed by
// LISTEN/NOTIFY, webhook receiver) in front of a real sandboxd.
type stack struct {
	*testBundle
	host *sandboxdtest.Host
	life *lifecycle.Service
	hub  *live.Hub
	url  string // the database URL, for another instance on the same database
}

// stackOptions tunes newStack.
type stackOptions struct {
	// webhooks registers the instance's /webhooks/e2b with sandboxd (as make run does).
	webhooks bool
	// host reuses a sandboxd (another instance of the same deployment); nil starts one.
	host *sandboxdtest.Host
	// databaseURL joins an existing instance's database; empty creates a fresh database.
	databaseURL string
	// config edits the test-sized lifecycle configuration.
	config func(*lifecycle.Config)
	// webOnly runs no jobs here (sandman serve --role=web): it only inserts them.
	webOnly bool
}

const testWebhookSecret = "test-webhook-secret"

// stackConfig is the production configuration with test-sized timings.
func stackConfig() lifecycle.Config {
	c := lifecycle.DefaultConfig()
	c.IdleTimeout = 10 * time.Minute
	c.ReconcileEvery = 2 * time.Second
	c.EventsEvery = 0
	c.SweepEvery = 2 * time.Second
	c.ResumeRetryWait = 200 * time.Millisecond
	c.WebhookSecret = testWebhookSecret
	return c
}

func newStack(t testing.TB, opts stackOptions) *stack {
	t.Helper()
	host := opts.host
	if host == nil {
		host = sandboxdtest.Start(t)
	}
	dbURL := opts.databaseURL
	if dbURL == "" {
		dbURL = dbtest.NewDatabase(t)
	}
	pool, err := db.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	provider, err := e2b.New(e2b.Config{APIURL: host.APIURL, APIKey: host.APIKey, Domain: host.Domain,
		RetryDelays:    []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond},
		BreakerOpenFor: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := stackConfig()
	if opts.config != nil {
		opts.config(&cfg)
	}
	life, err := lifecycle.New(lifecycle.Options{Pool: pool, Provider: provider, Config: cfg, Work: !opts.webOnly, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := life.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hub := live.New(live.Options{Render: handlers.RenderSandbox(life), Snapshot: handlers.RenderSnapshot(life), Logger: testLogger()})
	go hub.Run(ctx)
	go hub.Listen(ctx, dbURL)
	b := serve(t, pool, life, hub)
	t.Cleanup(func() {
		cancel()
		stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = life.Stop(stopCtx)
	})
	if opts.webhooks {
		if err := life.RegisterWebhook(ctx, b.srv.URL+"/webhooks/e2b", testWebhookSecret); err != nil {
			t.Fatal(err)
		}
	}
	return &stack{testBundle: b, host: host, life: life, hub: hub, url: dbURL}
}

// buildCounter creates a counter project for the client's founder, builds it and waits until
// its sandbox runs; it returns the project and sandbox ids.
func (s *stack) buildCounter(t testing.TB, c *client) (projectID, sandboxID string) {
	t.Helper()
	var p struct{ ID string }
	requireStatus(t, c.api(http.MethodPost, "/api/projects", map[string]string{"name": "Counter", "starter": "counter"}, &p), http.StatusCreated)
	var res struct{ Sandbox struct{ ID string } }
	requireStatus(t, c.api(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "first-" + p.ID}, &res), http.StatusAccepted)
	c.waitSandbox(res.Sandbox.ID, "running", 90*time.Second)
	return p.ID, res.Sandbox.ID
}

// sandboxState is the JSON API's view of a sandbox.
type sandboxState struct {
	ID, ProviderID, Status, PreviewURL, FailureCause string
	Recreated                                        bool
}

// waitSandbox polls the JSON API (a test's view, not the product's) until the sandbox has status.
func (c *client) waitSandbox(id, status string, within time.Duration) sandboxState {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var sb sandboxState
	for {
		requireStatus(c.t, c.api(http.MethodGet, "/api/sandboxes/"+id, nil, &sb), http.StatusOK)
		if sb.Status == status {
			return sb
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("sandbox %s is %s after %s, want %s", id, sb.Status, within, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
