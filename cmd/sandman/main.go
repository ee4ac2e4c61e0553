// Command sandman is the web server and background workers of Sandman.
//
//	sandman [serve] [--role=all|web|worker] run the server and/or the background workers
//	sandman migrate                         apply database migrations and exit
//	sandman demo-founder EMAIL PASSWORD     create a founder with the starter projects, built (idempotent)
//	sandman operator add|remove EMAIL       let a founder's account open the operator's console, or not (idempotent)
//	sandman secrets rotate                  seal every secret again under SANDMAN_SECRETS_KEY (after a key change)
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

	"sandman/app"
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
		a, err := app.New(ctx, cfg.Config, logger)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	case "migrate":
		if err := app.Migrate(ctx, cfg.Config); err != nil {
			return err
		}
		logger.Info("migrations applied")
		return nil
	case "demo-founder":
		if len(args) != 2 {
			return errors.New("usage: sandman demo-founder EMAIL PASSWORD")
		}
		return app.DemoFounder(ctx, cfg.Config, args[0], args[1])
	case "operator":
		if len(args) != 2 || (args[0] != "add" && args[0] != "remove") {
			return errors.New("usage: sandman operator add EMAIL, or sandman operator remove EMAIL")
		}
		msg, err := app.Operator(ctx, cfg.Config, args[0] == "add", args[1], cliActor(getenv))
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, msg)
		return nil
	case "secrets":
		if len(args) != 1 || args[0] != "rotate" {
			return errors.New("usage: sandman secrets rotate")
		}
		msg, err := app.RotateSecrets(ctx, cfg.Config)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, msg)
		return nil
	}
	return fmt.Errorf("unknown command %q (want serve, migrate, demo-founder, operator or secrets)", cmd)
}

// cliActor is who ran a command, as the operators' log records it.
func cliActor(getenv func(string) string) string {
	who := getenv("USER")
	if who == "" {
		who = "unknown user"
	}
	if host, err := os.Hostname(); err == nil {
		who += "@" + host
	}
	return "command line (" + who + ")"
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		lvl = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl}))
}
