// Command sandman is the web server and background workers of Sandman.
//
//	sandman [serve] [--role=all|web|worker] run the server and/or the background workers
//	sandman migrate                         apply database migrations and exit
//	sandman demo-founder EMAIL PASSWORD     create a founder with the starter projects, built (idempotent)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"sandman/accounts"
	"sandman/db"
	"sandman/e2b"
	"sandman/handlers"
	"sandman/lifecycle"
	"sandman/live"
	"sandman/projects"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "sandman:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	logger := newLogger(stdout, cfg.LogLevel)
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool); err != nil {
		return err
	}
	switch cmd {
	case "migrate":
		logger.Info("migrations applied")
		return nil
	case "demo-founder":
		if len(args) != 2 {
			return errors.New("usage: sandman demo-founder EMAIL PASSWORD")
		}
		return demoFounder(ctx, pool, cfg, args[0], args[1])
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.StringVar(&cfg.Role, "role", "all", "all (web and workers), web (pages and API only) or worker (jobs only)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if cfg.Role != "all" && cfg.Role != "web" && cfg.Role != "worker" {
			return fmt.Errorf("--role must be all, web or worker, not %q", cfg.Role)
		}
		return serve(ctx, pool, cfg, logger)
	}
	return fmt.Errorf("unknown command %q (want serve, migrate or demo-founder)", cmd)
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}))
}

// demoFounder creates the demo founder with the starter projects and queues a first build of
// each project never built, so `make run` opens on live previews.
func demoFounder(ctx context.Context, pool *pgxpool.Pool, cfg config, email, password string) error {
	u, err := accounts.New(pool, accounts.Options{StartCredits: cfg.StartCredits}).
		EnsureUser(ctx, accounts.Credentials{Email: email, Password: password})
	if err != nil {
		return err
	}
	if err := projects.New(pool).EnsureStarterProjects(ctx, u.ID); err != nil {
		return err
	}
	life, err := lifecycle.New(lifecycle.Options{Pool: pool, Config: cfg.Lifecycle})
	if err != nil {
		return err
	}
	views, err := life.Projects(ctx, u.ID)
	if err != nil {
		return err
	}
	for _, v := range views {
		if v.Build != nil {
			continue
		}
		// The key makes a second `make run` before the first build lands a replay, not a charge.
		if _, err := life.StartBuild(ctx, u.ID, v.Project.ID, "demo-first-build-"+v.Project.ID.String(), false); err != nil {
			return fmt.Errorf("build %s: %w", v.Project.Name, err)
		}
	}
	return nil
}

func serve(ctx context.Context, pool *pgxpool.Pool, cfg config, logger *slog.Logger) error {
	sessions := scs.New()
	store := pgxstore.NewWithCleanupInterval(pool, 10*time.Minute)
	defer store.StopCleanup()
	sessions.Store = store
	sessions.Lifetime = 30 * 24 * time.Hour
	sessions.IdleTimeout = 7 * 24 * time.Hour
	sessions.Cookie.Name = "sandman_session"
	sessions.Cookie.HttpOnly = true
	sessions.Cookie.SameSite = http.SameSiteLaxMode
	sessions.Cookie.Secure = cfg.CookieSecure

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	pc := cfg.Provider
	pc.Registerer, pc.Logger = reg, logger
	provider, err := e2b.New(pc)
	if err != nil {
		return err
	}
	life, err := lifecycle.New(lifecycle.Options{Pool: pool, Provider: provider, Config: cfg.Lifecycle, Logger: logger,
		Work: cfg.Role != "web"})
	if err != nil {
		return err
	}
	if err := life.Start(ctx); err != nil {
		return err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownWait)
		defer cancel()
		if err := life.Stop(stopCtx); err != nil {
			logger.Warn("stop workers", "err", err)
		}
	}()
	if cfg.WebhookURL != "" && cfg.Role != "web" {
		if err := life.RegisterWebhook(ctx, cfg.WebhookURL, cfg.WebhookSecret); err != nil {
			// Not fatal: reconciliation and the events reader keep state right without webhooks.
			logger.Error("register webhook with the provider", "url", cfg.WebhookURL, "err", err)
		} else {
			logger.Info("webhook registered", "url", cfg.WebhookURL)
		}
	}
	if cfg.Role == "worker" {
		logger.Info("sandman workers running")
		<-ctx.Done()
		return nil
	}

	hub := live.New(live.Options{Render: handlers.RenderSandbox(life), Snapshot: handlers.RenderSnapshot(life),
		Logger: logger, Registerer: reg})
	go hub.Run(ctx)
	go hub.Listen(ctx, cfg.DatabaseURL)

	acc := accounts.New(pool, accounts.Options{StartCredits: cfg.StartCredits})
	e := handlers.New(handlers.Deps{
		Pool: pool, Sessions: sessions, Accounts: acc, Projects: projects.New(pool), Lifecycle: life, Live: hub,
		Logger: logger, Registry: reg, TrustProxy: cfg.TrustProxy, FrameOrigins: []string{frameOrigin(provider)},
	})

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on SANDMAN_ADDR %s: %w", cfg.Addr, err)
	}
	// No WriteTimeout: it would cut SSE streams; every other handler is bounded by its context.
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	srv.RegisterOnShutdown(hub.Close)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("sandman listening", "addr", "http://"+ln.Addr().String())

	go pruneLoginFailures(ctx, acc, logger)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownWait)
	defer cancel()
	return srv.Shutdown(shutCtx)
}

// pruneLoginFailures keeps the failures table small; it is safe to run on every instance.
func pruneLoginFailures(ctx context.Context, acc *accounts.Service, logger *slog.Logger) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := acc.PruneLoginFailures(ctx); err != nil && ctx.Err() == nil {
				logger.Warn("prune login failures", "err", err)
			}
		}
	}
}

// frameOrigin is the CSP source that lets the build page frame any preview host.
func frameOrigin(p *e2b.Client) string {
	u := p.PreviewURL(e2b.Sandbox{ID: "x"}, 1)
	scheme, rest, _ := strings.Cut(u, "://")
	_, host, _ := strings.Cut(rest, ".")
	return scheme + "://*." + strings.TrimSuffix(host, "/")
}
