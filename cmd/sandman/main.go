// Command sandman is the web server and background workers of Sandman.
//
//	sandman [serve]                         run the server (migrates first)
//	sandman migrate                         apply database migrations and exit
//	sandman demo-founder EMAIL PASSWORD     create a founder with the starter projects (idempotent)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"sandman/accounts"
	"sandman/db"
	"sandman/handlers"
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

func demoFounder(ctx context.Context, pool *pgxpool.Pool, cfg config, email, password string) error {
	u, err := accounts.New(pool, accounts.Options{StartCredits: cfg.StartCredits}).
		EnsureUser(ctx, accounts.Credentials{Email: email, Password: password})
	if err != nil {
		return err
	}
	return projects.New(pool).EnsureStarterProjects(ctx, u.ID)
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

	acc := accounts.New(pool, accounts.Options{StartCredits: cfg.StartCredits})
	e := handlers.New(handlers.Deps{
		Pool: pool, Sessions: sessions, Accounts: acc, Projects: projects.New(pool),
		Logger: logger, Registry: reg, TrustProxy: cfg.TrustProxy,
	})

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on SANDMAN_ADDR %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
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
