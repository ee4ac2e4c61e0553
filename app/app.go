// Package app assembles one Sandman instance from a Config: the database pool and its
// migrations, the provider client, the lifecycle service with its River workers, sessions,
// accounts and projects, the live hub fed by LISTEN/NOTIFY, the HTTP handlers and server, and the
// metrics registry. `sandman serve` runs it, and so does every test that needs a whole Sandman
// (through app/apptest), so the tests exercise production's wiring: its cookies, its
// Content-Security-Policy, its middleware and its job settings.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sandman/envvars"
	"strings"
	"sync"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"sandman/accounts"
	"sandman/applog"
	"sandman/credits"
	"sandman/db"
	"sandman/e2b"
	"sandman/feed"
	"sandman/handlers"
	"sandman/keyring"
	"sandman/lifecycle"
	"sandman/live"
	"sandman/ops"
	"sandman/outbox"
	"sandman/overview"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/shares"
	"sandman/versions"
	"sandman/views"
)

// Role says which parts of Sandman an instance runs (`sandman serve --role`).
type Role string

// The roles. Any number of instances of any roles may share one database.
// feedWait bounds how long Start waits for the live feed before it serves anyway.
const feedWait = 10 * time.Second

const (
	RoleAll    Role = "all"    // pages, API, webhooks and event streams, and the jobs
	RoleWeb    Role = "web"    // pages, API, webhooks and event streams; jobs are only queued
	RoleWorker Role = "worker" // the jobs only: no HTTP server
)

// serves reports whether the role answers HTTP.
func (r Role) serves() bool { return r == RoleAll || r == RoleWeb }

// works reports whether the role runs jobs.
func (r Role) works() bool { return r == RoleAll || r == RoleWorker }

// Config is everything an instance needs to know. cmd/sandman fills it from the environment
// (README lists the variables); tests start from DefaultConfig too and shorten its timings.
type Config struct {
	DatabaseURL string // DATABASE_URL
	Addr        string // SANDMAN_ADDR: where the HTTP server listens (port 0: any free port)
	Role        Role   // --role
	// StartCredits are the build credits a new founder gets (SANDMAN_START_CREDITS).
	StartCredits int32
	// BcryptCost hashes passwords; zero is accounts' default. Tests lower it to stay fast.
	BcryptCost   int
	CookieSecure bool // SANDMAN_COOKIE_SECURE: the session cookie is Secure, and pages send HSTS
	TrustProxy   bool // SANDMAN_TRUST_PROXY: the client address comes from X-Forwarded-For
	// MetricsAddr serves /metrics on an address of its own (SANDMAN_METRICS_ADDR), and not on
	// Addr. Without it, /metrics is served on Addr only when MetricsToken is set.
	MetricsAddr string
	// MetricsToken, when set, must come with every /metrics request as a bearer token
	// (SANDMAN_METRICS_TOKEN).
	MetricsToken string
	// SignUpsPerHour is how many founders may sign up from one client address in an hour
	// (SANDMAN_SIGNUPS_PER_HOUR).
	SignUpsPerHour int
	// TokenLimit is the requests one API token may make, and BearerFailureLimit the failed
	// bearer attempts one client address may make (README, "For the builder's backend"); zero:
	// accounts' defaults. Tests lower them.
	TokenLimit, BearerFailureLimit accounts.Limit
	// SessionLifetime is how long a session lasts from its log-in; its event streams end with it.
	SessionLifetime time.Duration
	// PublicURL is where browsers reach Sandman (SANDMAN_PUBLIC_URL), without a trailing slash:
	// share links are PublicURL/s/{token}. Empty: http:// and the address the server listens on
	// (PublicURL).
	PublicURL string
	// ShareKey makes share links' tokens (SANDMAN_SHARE_KEY, at least shares.MinKeyLength
	// characters). Empty: founders cannot share; links made before still open.
	ShareKey string
	// Secrets seals what is kept secret at rest (SANDMAN_SECRETS_KEY, and during a rotation
	// SANDMAN_SECRETS_KEY_PREVIOUS). Nil: secrets are refused; everything else works.
	Secrets *keyring.Keyring
	// ReadTimeout bounds the reading of a whole request, body included, except where a route
	// sets its own (an upload's longer one; the event stream, which has none).
	ReadTimeout time.Duration
	// LargeBodies is how many large bodies (uploads, versions: past the small default) the
	// instance reads at once (SANDMAN_LARGE_BODIES), and LargeBodyWait how long one more waits
	// for its turn before a 503 (handlers.DefaultLargeBodyWait; tests shorten it).
	LargeBodies   int
	LargeBodyWait time.Duration
	// ShutdownWait is how long Stop lets requests and running jobs finish.
	ShutdownWait time.Duration

	Provider  e2b.Config       // E2B_API_URL, E2B_API_KEY, E2B_DOMAIN, E2B_SANDBOX_URL
	Lifecycle lifecycle.Config // timings and choices of the sandbox lifecycle
	// Ops is the operator's console's rates and sandbox size (SANDMAN_RATE_VCPU_HOUR,
	// SANDMAN_RATE_GIB_HOUR, SANDMAN_SANDBOX_VCPUS, SANDMAN_SANDBOX_MEMORY); its size is also
	// what a new sandbox is recorded with until the provider reports its own.
	Ops ops.Config
	// AppLog bounds what is kept of the apps' output and how it is batched; Reports the
	// browsers' error reports' rates (docs/architecture.md, "The app's health").
	AppLog  applog.WriterConfig
	Reports applog.ReportLimits
	// WebhookURL is Sandman's public …/webhooks/e2b (E2B_WEBHOOK_URL): instances that run jobs
	// register it with the provider at start, signed with Lifecycle.WebhookSecret.
	WebhookURL string
	// StorageQuota is the bytes of unique content one founder may store (SANDMAN_STORAGE_QUOTA):
	// a version or a project past it is refused with 413.
	StorageQuota int64
	// ProjectLimit is how many projects one founder may have (SANDMAN_PROJECT_LIMIT).
	ProjectLimit int
	// Webhooks is the outgoing webhooks' rules and schedule (AllowPrivate:
	// SANDMAN_WEBHOOKS_ALLOW_PRIVATE); tests shorten its retries.
	Webhooks outbox.Config
}

// DefaultConfig is production's configuration before the environment is read.
func DefaultConfig() Config {
	return Config{
		Addr:            "127.0.0.1:8080",
		Role:            RoleAll,
		StartCredits:    10,
		SignUpsPerHour:  accounts.DefaultSignUpsPerHour,
		SessionLifetime: 30 * 24 * time.Hour,
		ReadTimeout:     30 * time.Second,
		LargeBodies:     handlers.DefaultLargeBodies,
		LargeBodyWait:   handlers.DefaultLargeBodyWait,
		ShutdownWait:    15 * time.Second,
		Lifecycle:       lifecycle.DefaultConfig(),
		Ops:             ops.DefaultConfig(),
		StorageQuota:    versions.DefaultQuota,
		ProjectLimit:    projects.DefaultLimit,
		AppLog:          applog.DefaultWriterConfig(),
		Reports:         applog.DefaultReportLimits(),
		Webhooks:        outbox.DefaultConfig(),
	}
}

// App is one assembled instance. New builds it, Start runs it, Stop ends it (or Run does all
// three).
type App struct {
	cfg Config
	log *slog.Logger

	pool      *pgxpool.Pool
	registry  *prometheus.Registry
	provider  *e2b.Client
	lifecycle *lifecycle.Service
	overview  *overview.Reader
	ops       *ops.Service
	operators *ops.Operators
	accounts  *accounts.Service
	shares    *shares.Service
	outbox    *outbox.Service        // its sender runs where jobs run; its endpoints and feed are served
	applog    *applog.Service        // its Writer runs in every role; its Feed only where streams are served
	sessions  *accounts.SessionStore // nil for RoleWorker
	hub       *live.Hub              // nil for RoleWorker
	feed      *feed.Feed             // the one LISTEN connection: publishes to hub; nil for RoleWorker
	handler   http.Handler           // nil for RoleWorker
	server    *http.Server           // nil for RoleWorker
	listener  net.Listener           // set by Start
	metrics   *http.Server           // /metrics on MetricsAddr; nil without one
	metricsLn net.Listener           // set by Start
	serveErr  chan error             // the HTTP server's end
	cancel    func()                 // ends the background loops
	loops     sync.WaitGroup         // hub heartbeats, the database feed, pruning
	stopOnce  sync.Once
	stopErr   error
}

// New connects to the database, applies migrations and builds every part of the instance. It
// starts nothing: no listener, no worker, no goroutine.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*App, error) {
	if !cfg.Role.serves() && !cfg.Role.works() {
		return nil, fmt.Errorf("--role must be all, web or worker, not %q", cfg.Role)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	a, err := assemble(ctx, cfg, logger, pool)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return a, nil
}

func assemble(ctx context.Context, cfg Config, logger *slog.Logger, pool *pgxpool.Pool) (*App, error) {
	if err := db.Migrate(ctx, pool); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, log: logger, pool: pool, registry: prometheus.NewRegistry()}
	a.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	pc := cfg.Provider
	pc.Registerer, pc.Logger = a.registry, logger
	var err error
	if a.provider, err = e2b.New(pc); err != nil {
		return nil, err
	}
	lc := cfg.Lifecycle
	lc.Size = cfg.Ops.Size
	a.outbox = outbox.New(pool, cfg.Secrets, cfg.Webhooks, logger)
	logs := applog.NewWriter(pool, cfg.AppLog, logger, a.registry)
	// What the apps print is stored with their secrets replaced.
	logs.RedactWith(envvars.New(pool, cfg.Secrets, nil).SecretsOf)
	a.applog = applog.New(pool, logs, applog.NewFeed(logger), cfg.Reports)
	// The reads apply the lifecycle's idle rule to a running sandbox (its SleepsAt).
	a.overview = overview.New(db.New(pool), lc.IdleDeadline)
	a.lifecycle, err = lifecycle.New(lifecycle.Options{Pool: pool, Provider: a.provider, Config: lc,
		Logger: logger, Registerer: a.registry, Work: cfg.Role.works(), Name: "sandman-watch-" + uuid.NewString()[:8],
		Sink: appLogSink{l: a.applog}, Overview: a.overview, Secrets: cfg.Secrets})
	if err != nil {
		return nil, err
	}
	describe := func(ev db.SandboxEvent, kind sandbox.BuildKind) string {
		return views.EventText(ev, kind, lc.IdleTimeout)
	}
	a.ops = ops.New(ops.Options{Pool: pool, Config: cfg.Ops, Describe: describe, StuckAfter: func() (starting, resuming time.Duration) {
		d := a.lifecycle.Deadlines()
		return d.StuckStarting, d.StuckResuming
	},
		Provider: func() ops.ProviderClient {
			return ops.ProviderClient{Circuit: a.provider.CircuitState(), Errors: a.provider.CallErrors()}
		}})
	a.operators = ops.NewOperators(pool)
	a.registry.MustRegister(ops.NewCollector(a.ops, logger))
	a.accounts = accounts.New(pool, accounts.Options{StartCredits: cfg.StartCredits, BcryptCost: cfg.BcryptCost,
		SignUpsPerHour: cfg.SignUpsPerHour, TokenLimit: cfg.TokenLimit, BearerFailureLimit: cfg.BearerFailureLimit})
	metrics := handlers.MetricsHandler(a.registry, cfg.MetricsToken)
	if cfg.MetricsAddr != "" { // any role: a worker's jobs and provider calls are worth watching too
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics)
		a.metrics = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: cfg.ReadTimeout, IdleTimeout: 2 * time.Minute}
	}
	if !cfg.Role.serves() {
		return a, nil
	}
	a.shares = shares.New(pool, shares.Options{Key: cfg.ShareKey, PublicURL: a.PublicURL})

	sessions := scs.New()
	sessions.Codec = &accounts.SessionCodec{}
	// No cleanup goroutine of pgxstore's (its start races with StopCleanup): prune clears
	// expired sessions with the rest. The sessions in use are kept in memory too, which the live
	// feed keeps true across instances (docs/architecture.md, "Sessions").
	a.sessions = accounts.NewSessionStore(pgxstore.NewWithCleanupInterval(pool, 0), sessions.Codec, pool, logger, a.registry)
	sessions.Store = a.sessions
	// A fixed lifetime and no idle timeout: with one, scs writes the session row again on every
	// request to move its expiry, a database write for each status read (BENCHMARKS.md).
	sessions.Lifetime = cfg.SessionLifetime
	sessions.Cookie.Name = "sandman_session"
	sessions.Cookie.HttpOnly = true
	sessions.Cookie.SameSite = http.SameSiteLaxMode
	sessions.Cookie.Secure = cfg.CookieSecure

	a.hub = live.New(live.Options{Logger: logger, Registerer: a.registry})
	a.feed = feed.New(feed.Options{Hub: a.hub, Sessions: a.sessions, Logs: a.applog.Feed, Logger: logger, Registerer: a.registry,
		Render: feed.Renderers{Sandbox: handlers.RenderSandbox(a.lifecycle, a.overview), Founder: handlers.RenderSnapshot(a.lifecycle, a.overview),
			ShareOfSandbox: handlers.RenderShare(a.overview), Share: handlers.RenderShareSnapshot(a.overview),
			ShareEnded: handlers.ShareEnded(), Ops: handlers.RenderOps(a.ops)}})
	var metricsOnMain http.Handler
	if cfg.MetricsAddr == "" && cfg.MetricsToken != "" {
		metricsOnMain = metrics
	}
	a.handler = handlers.New(handlers.Deps{
		Pool: pool, Sessions: sessions, Accounts: a.accounts, Projects: projects.New(pool).WithLimits(cfg.ProjectLimit, cfg.StorageQuota), Shares: a.shares,
		Versions: versions.New(pool, a.lifecycle.Hooks().VersionMade).WithQuota(cfg.StorageQuota), Env: envvars.New(pool, cfg.Secrets, a.lifecycle.Hooks().EnvChanged), Lifecycle: a.lifecycle, Credits: credits.New(pool), Overview: a.overview, AppLog: a.applog, Outbox: a.outbox,
		Live: a.hub, Feed: a.feed, Ops: a.ops, Operators: a.operators, Logger: logger, Registry: a.registry, Metrics: metricsOnMain, TrustProxy: cfg.TrustProxy, HSTS: cfg.CookieSecure,
		FrameOrigins: []string{frameOrigin(a.provider)}, LargeBodies: cfg.LargeBodies, LargeBodyWait: cfg.LargeBodyWait,
	})
	// ReadTimeout bounds a slow sender (routes with their own deadline move it: an upload gets
	// longer, the event stream none). No WriteTimeout: it would cut event streams; every other
	// handler is bounded by its context.
	a.server = &http.Server{Handler: a.handler, ReadHeaderTimeout: min(10*time.Second, cfg.ReadTimeout), ReadTimeout: cfg.ReadTimeout,
		IdleTimeout: 2 * time.Minute}
	a.server.RegisterOnShutdown(a.hub.Close)
	a.server.RegisterOnShutdown(a.applog.Feed.Close)
	return a, nil
}

// Start runs the instance: the workers (roles that work), the webhook registration with the
// provider (when WebhookURL is set), and the HTTP server with the live hub (roles that serve).
// It returns once everything runs. Stop ends it, and cleans up after a Start that failed.
func (a *App) Start(ctx context.Context) error {
	// The background parts get a context of their own, so that the caller's (a signal, say)
	// starts a graceful Stop rather than cutting running jobs short.
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	a.background(bg, a.applog.Writer.Run) // before the workers, which write to it
	if err := a.lifecycle.Start(bg); err != nil {
		return err
	}
	if a.cfg.Role.works() {
		a.background(bg, a.outbox.Run)
	}
	if a.cfg.WebhookURL != "" && a.cfg.Role.works() {
		if err := a.lifecycle.RegisterWebhook(ctx, a.cfg.WebhookURL, a.cfg.Lifecycle.WebhookSecret); err != nil {
			// Not fatal: reconciliation and the events reader keep state right without webhooks.
			a.log.Error("register webhook with the provider", "url", a.cfg.WebhookURL, "err", err)
		} else {
			a.log.Info("webhook registered", "url", a.cfg.WebhookURL)
		}
	}
	a.serveErr = make(chan error, 2)
	switch {
	case a.metrics != nil:
		ln, err := net.Listen("tcp", a.cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen on SANDMAN_METRICS_ADDR %s: %w", a.cfg.MetricsAddr, err)
		}
		a.metricsLn = ln
		go func() { a.serveErr <- a.metrics.Serve(ln) }()
		a.log.Info("metrics listening", "addr", ln.Addr().String())
	case !a.cfg.Role.serves():
		a.log.Warn("metrics are not served: set SANDMAN_METRICS_ADDR (an address of their own)")
	case a.cfg.MetricsToken == "":
		a.log.Warn("metrics are not served: set SANDMAN_METRICS_ADDR (an address of their own) or SANDMAN_METRICS_TOKEN (a bearer token for /metrics)")
	}
	if !a.cfg.Role.serves() {
		a.log.Info("sandman workers running")
		return nil
	}
	ln, err := net.Listen("tcp", a.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on SANDMAN_ADDR %s: %w", a.cfg.Addr, err)
	}
	a.listener = ln
	// No stream before the feed is up: a log-out or a change announced before it would never
	// reach the streams it concerns. A database that can't be reached yet delays only that long.
	feedUp := make(chan struct{})
	a.background(bg, a.hub.Run)
	a.background(bg, func(ctx context.Context) { a.feed.Listen(ctx, a.cfg.DatabaseURL, func() { close(feedUp) }) })
	select {
	case <-feedUp:
	case <-time.After(feedWait):
		a.log.Warn("live: the database feed is not up yet; serving anyway (streams are resynced once it is)", "after", feedWait)
	case <-ctx.Done():
		ln.Close()
		return ctx.Err()
	}
	go func() { a.serveErr <- a.server.Serve(ln) }()
	a.background(bg, a.prune)
	a.log.Info("sandman listening", "addr", a.URL(), "public_url", a.PublicURL())
	if a.cfg.Lifecycle.PreviewProxy == "" {
		a.log.Warn("the preview proxy is off: previews report no browser errors; build it (make previewproxy) or set SANDMAN_PREVIEW_PROXY")
	}
	if !a.shares.Enabled() {
		a.log.Warn("share links are off: set SANDMAN_SHARE_KEY (at least 32 characters) to let founders share their previews")
	}
	if !a.cfg.Secrets.Enabled() {
		a.log.Warn("secrets are off: set SANDMAN_SECRETS_KEY (openssl rand -hex 32) to let founders keep secret values")
	}
	return nil
}

func (a *App) background(ctx context.Context, loop func(context.Context)) {
	a.loops.Add(1)
	go func() {
		defer a.loops.Done()
		loop(ctx)
	}()
}

// Run starts the instance and stops it when ctx ends (or the server fails), giving requests and
// running jobs ShutdownWait to finish.
func (a *App) Run(ctx context.Context) error {
	err := a.Start(ctx)
	if err == nil {
		select {
		case err = <-a.serveErr: // a server's end (a worker without metrics has none: only ctx ends it)
		case <-ctx.Done():
			a.log.Info("shutting down")
		}
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), a.cfg.ShutdownWait)
	defer cancel()
	return errors.Join(err, a.Stop(stopCtx))
}

// Stop ends what Start started, in order: the HTTP server (closing every event stream), the
// workers (running jobs may finish until ctx ends, then they are cancelled), the background
// loops and the pool. It is safe to call more than once, and on an
// App never started or whose Start failed.
func (a *App) Stop(ctx context.Context) error {
	a.stopOnce.Do(func() {
		var errs []error
		if a.listener != nil {
			if err := a.server.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stop the HTTP server: %w", err))
			}
		}
		if a.metricsLn != nil {
			if err := a.metrics.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("stop the metrics server: %w", err))
			}
		}
		workersErr := a.lifecycle.Stop(ctx)
		if a.cancel != nil {
			a.cancel() // jobs still running past ctx are cancelled now
		}
		if workersErr != nil {
			errs = append(errs, fmt.Errorf("stop the workers: %w", workersErr))
			// Let the cancelled jobs return before the pool closes under them.
			waitCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = a.lifecycle.Stop(waitCtx)
			cancel()
		}
		a.loops.Wait()
		a.pool.Close()
		a.stopErr = errors.Join(errs...)
	})
	return a.stopErr
}

// prune keeps the rate limits' and the sessions' tables small: what no longer counts, and
// expired sessions (and their copies in memory); and the event feed to its 7 days. It is safe to run on every instance.
func (a *App) prune(ctx context.Context) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.sessions.Sweep()
			err := errors.Join(a.accounts.PruneLimits(ctx), a.shares.PruneLimits(ctx), db.New(a.pool).DeleteExpiredSessions(ctx),
				a.outbox.Prune(ctx))
			if err != nil && ctx.Err() == nil {
				a.log.Warn("prune the rate limits' and sessions' tables", "err", err)
			}
		}
	}
}

// URL is the base URL the HTTP server answers on once started ("" before, or for a worker).
func (a *App) URL() string {
	if a.listener == nil {
		return ""
	}
	return "http://" + a.listener.Addr().String()
}

// PublicURL is where browsers reach the instance, which share links start with:
// Config.PublicURL, or else http:// and the address the server listens on (an unspecified host,
// like 0.0.0.0, as localhost).
func (a *App) PublicURL() string {
	if a.cfg.PublicURL != "" {
		return strings.TrimSuffix(a.cfg.PublicURL, "/")
	}
	addr := a.cfg.Addr
	if a.listener != nil {
		addr = a.listener.Addr().String()
	}
	return DefaultPublicURL(addr)
}

// DefaultPublicURL is SANDMAN_PUBLIC_URL's default for the address SANDMAN_ADDR: http:// and the
// address, with an unspecified host (none, 0.0.0.0, ::) as localhost.
func DefaultPublicURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// MetricsURL is the base URL of the metrics listener once started ("" without MetricsAddr).
func (a *App) MetricsURL() string {
	if a.metricsLn == nil {
		return ""
	}
	return "http://" + a.metricsLn.Addr().String()
}

// Config is the instance's configuration.
func (a *App) Config() Config { return a.cfg }

// Pool is the instance's database pool.
func (a *App) Pool() *pgxpool.Pool { return a.pool }

// Lifecycle is the instance's lifecycle service.
func (a *App) Lifecycle() *lifecycle.Service { return a.lifecycle }

// Overview is the instance's reader of projects' states.
func (a *App) Overview() *overview.Reader { return a.overview }

// Provider is the instance's provider client (one per process: it holds the circuit breaker).
func (a *App) Provider() *e2b.Client { return a.provider }

// Hub is the instance's live hub (nil for a worker).
func (a *App) Hub() *live.Hub { return a.hub }

// AppLog is the apps' output and problems: the dev servers' watch writes their lines to its
// Writer.
func (a *App) AppLog() *applog.Service { return a.applog }

// Outbox is the instance's outgoing webhooks (for tests, and `sandman secrets rotate`'s Reseal).
func (a *App) Outbox() *outbox.Service { return a.outbox }

// Handler is the instance's HTTP handler with every route and middleware (nil for a worker).
func (a *App) Handler() http.Handler { return a.handler }

// Registry holds the instance's Prometheus metrics, served at /metrics (see MetricsAddr).
func (a *App) Registry() *prometheus.Registry { return a.registry }

// frameOrigin is the CSP source that lets the build page frame any preview host: the
// provider's preview URLs with the sandbox's label replaced by a wildcard, e.g.
// https://*.e2b.app or, for sandboxd, http://*.localhost:8082.
func frameOrigin(p *e2b.Client) string {
	u := p.PreviewURL(e2b.Sandbox{ID: "x"}, 1)
	scheme, rest, _ := strings.Cut(u, "://")
	_, host, _ := strings.Cut(rest, ".")
	return scheme + "://*." + strings.TrimSuffix(host, "/")
}
