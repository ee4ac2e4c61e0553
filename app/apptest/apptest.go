// Package apptest runs whole Sandman instances in tests, assembled by package app exactly as
// `sandman serve` assembles them, in front of a real sandboxd (sandboxdtest) and on a private
// PostgreSQL database (dbtest), with a browser-like HTTP client to drive them.
//
//	s := apptest.Start(t, apptest.Options{Webhooks: true})
//	c := s.NewClient(t)
//	c.SignUp("founder@example.com")
//	projectID, sandboxID := c.BuildCounter()
//
// Only the timings differ from production (Config): cookies, Content-Security-Policy,
// middleware, sessions and job settings are production's own. A test binary that uses it must
// run dbtest.Main from its TestMain.
package apptest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"sandman/app"
	"sandman/db/dbtest"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/keyring"
	"sandman/lifecycle"
	"sandman/sandboxd/sandboxdtest"
)

// WebhookSecret signs the webhooks sandboxd sends to instances started with Options.Webhooks,
// and is the secret every instance checks.
const WebhookSecret = "test-webhook-secret"

// Secrets is the SANDMAN_SECRETS_KEY every instance gets (one deployment, one key).
var Secrets = func() *keyring.Keyring {
	k, err := keyring.Parse("5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e", "")
	if err != nil {
		panic(err)
	}
	return k
}()

// ShareKey is the SANDMAN_SHARE_KEY every instance gets, so instances of one deployment make the
// same links.
const ShareKey = "test-share-key-0123456789abcdef0123456789abcdef"

// RetryDelays are the provider client's waits between retries in tests: production's 1:2:4
// shape, fast.
var RetryDelays = []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}

// Options say which instance to start. The zero value is an instance of every role on a fresh
// database, in front of a sandboxd of its own.
type Options struct {
	// Role is app.RoleAll when empty.
	Role app.Role
	// Host is the sandboxd to use (another instance of the same deployment); nil starts one.
	Host *sandboxdtest.Host
	// DatabaseURL joins an existing instance's database; empty creates a fresh database.
	DatabaseURL string
	// Webhooks registers the instance's /webhooks/e2b with sandboxd, as E2B_WEBHOOK_URL does.
	Webhooks bool
	// Config edits the test configuration before the instance is built.
	Config func(*app.Config)
	// Logger receives the instance's logs (a testkit.LogRecorder's, say); nil: testkit.Logger.
	Logger *slog.Logger
}

// Instance is a running Sandman, stopped when the test ends.
type Instance struct {
	*app.App
	// Host is the sandboxd the instance uses as its provider.
	Host *sandboxdtest.Host
	// DatabaseURL is the instance's database, for another instance to join.
	DatabaseURL string
}

// Config is production's configuration (app.DefaultConfig) pointed at host and databaseURL,
// with test-sized timings: no idle pause within a test unless asked for, the periodic jobs
// every 2 s (the events reader off: webhooks and reconciliation cover the tests), fast provider
// retries and a short breaker, quick password hashing, and any free port.
func Config(host *sandboxdtest.Host, databaseURL string) app.Config {
	c := app.DefaultConfig()
	c.DatabaseURL = databaseURL
	c.Addr = "127.0.0.1:0"
	c.BcryptCost = bcrypt.MinCost
	c.ShareKey = ShareKey
	c.Secrets = Secrets
	// The tests' receivers listen on loopback.
	c.Webhooks.AllowPrivate = true
	// A job still running when a test ends gets this long, then it is cancelled.
	c.ShutdownWait = 2 * time.Second
	c.Provider = e2b.Config{APIURL: host.APIURL, APIKey: host.APIKey, Domain: host.Domain,
		RetryDelays: RetryDelays, BreakerOpenFor: 2 * time.Second}
	c.Lifecycle = LifecycleConfig()
	return c
}

// LifecycleConfig is the lifecycle part of Config: production's rules with test-sized timings.
func LifecycleConfig() lifecycle.Config {
	c := lifecycle.DefaultConfig()
	c.IdleTimeout = 10 * time.Minute
	c.SandboxTimeout = 10 * time.Minute
	c.ReconcileEvery = 2 * time.Second
	c.EventsEvery = 0
	c.SweepEvery = 2 * time.Second
	c.ResumeRetryWait = 200 * time.Millisecond
	c.BuildRetryWait = 100 * time.Millisecond
	c.CreateTimeout, c.UploadTimeout, c.InstallTimeout, c.ReadyTimeout, c.ResumeTimeout =
		20*time.Second, 20*time.Second, time.Minute, 30*time.Second, 20*time.Second
	c.WebhookSecret = WebhookSecret
	return c
}

// Start builds and starts an instance. Its logs go where testkit.Logger sends them
// (SANDMAN_TEST_LOG).
func Start(t testing.TB, opts Options) *Instance {
	t.Helper()
	host := opts.Host
	if host == nil {
		host = sandboxdtest.Start(t)
	}
	url := opts.DatabaseURL
	if url == "" {
		url = dbtest.NewDatabase(t)
	}
	cfg := Config(host, url)
	cfg.Lifecycle.PreviewProxy = PreviewProxy(t)
	if opts.Role != "" {
		cfg.Role = opts.Role
	}
	if opts.Config != nil {
		opts.Config(&cfg)
	}
	ctx := context.Background()
	logger := opts.Logger
	if logger == nil {
		logger = testkit.Logger()
	}
	a, err := app.New(ctx, cfg, logger)
	if err != nil {
		t.Fatalf("assemble Sandman: %v", err)
	}
	if err := a.Start(ctx); err != nil {
		_ = a.Stop(ctx)
		t.Fatalf("start Sandman: %v", err)
	}
	inst := &Instance{App: a, Host: host, DatabaseURL: url}
	t.Cleanup(func() { inst.Stop(t) })
	if opts.Webhooks {
		if err := a.Lifecycle().RegisterWebhook(ctx, a.URL()+"/webhooks/e2b", WebhookSecret); err != nil {
			t.Fatalf("register the webhook with sandboxd: %v", err)
		}
	}
	return inst
}

// Stop stops the instance now, as a process that exits cleanly would: running jobs get
// ShutdownWait to finish, then they are cancelled. The test's end also stops it (a second Stop
// does nothing); its database stays for other instances.
func (i *Instance) Stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), i.Config().ShutdownWait)
	defer cancel()
	if err := i.App.Stop(ctx); err != nil {
		// A job outliving the test is not the test's failure; anything else shows in the log.
		t.Logf("stop Sandman: %v", err)
	}
}
