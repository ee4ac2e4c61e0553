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
	"os"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/accounts"
	"sandman/app"
	"sandman/db"
	"sandman/lifecycle"
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
	switch cmd {
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		role := fs.String("role", string(app.RoleAll), "all (web and workers), web (pages and API only) or worker (jobs only)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		cfg.Role = app.Role(*role)
		if cfg.Role != app.RoleAll && cfg.Role != app.RoleWeb && cfg.Role != app.RoleWorker {
			return fmt.Errorf("--role must be all, web or worker, not %q", *role)
		}
		a, err := app.New(ctx, cfg.Config, logger)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	case "migrate", "demo-founder":
		pool, err := db.Open(ctx, cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		if err := db.Migrate(ctx, pool); err != nil {
			return err
		}
		if cmd == "migrate" {
			logger.Info("migrations applied")
			return nil
		}
		if len(args) != 2 {
			return errors.New("usage: sandman demo-founder EMAIL PASSWORD")
		}
		return demoFounder(ctx, pool, cfg, args[0], args[1])
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
// each project never built, so `make run` opens on live previews. It needs no provider: the
// builds run on whichever instance takes them.
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
