// Command sandboxd is a local, E2B-compatible sandbox host: the provider's
// control-plane API and envd on loopback, with sandboxes as directories and
// real processes. Point E2B_API_URL at --api-addr, E2B_SANDBOX_URL at
// http://localhost:<port of --sandbox-addr> and E2B_DOMAIN at
// localhost:<that port>.
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
	"time"

	"sandman/sandboxd"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg       sandboxd.Config
		isolation string
		logFormat string
		logLevel  string
		urlSafe   bool
	)
	fs.StringVar(&cfg.APIAddr, "api-addr", "127.0.0.1:49982", "control-plane API address (E2B_API_URL)")
	fs.StringVar(&cfg.SandboxAddr, "sandbox-addr", "127.0.0.1:49983", "sandbox traffic address: envd and sandbox ports")
	fs.StringVar(&cfg.StateDir, "state-dir", "", "directory for sandboxes, events and webhooks (required)")
	fs.StringVar(&cfg.APIKey, "api-key", os.Getenv("E2B_API_KEY"), "the API key to accept, e2b_<hex> (default $E2B_API_KEY)")
	fs.StringVar(&cfg.WebhookURL, "webhook-url", "", "deliver every lifecycle event to this URL")
	fs.StringVar(&cfg.WebhookSecret, "webhook-secret", "", "signature secret for --webhook-url")
	fs.BoolVar(&urlSafe, "webhook-signature-urlsafe", false, "sign webhooks with the URL-safe base64 alphabet instead of the standard one")
	fs.IntVar(&cfg.WebhookRetries, "webhook-retries", 3, "retries of a failed webhook delivery")
	fs.DurationVar(&cfg.WebhookRetryDelay, "webhook-retry-delay", 2*time.Second, "first retry delay; it doubles per retry")
	fs.DurationVar(&cfg.MaxTimeout, "max-timeout", 24*time.Hour, "longest sandbox lifetime a request may ask for")
	fs.StringVar(&isolation, "isolation", "auto", "auto, bwrap (private root and network per sandbox) or none")
	fs.StringVar(&logFormat, "log-format", "text", "text or json")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.StateDir == "" {
		return errors.New("--state-dir is required")
	}
	if cfg.WebhookRetries == 0 {
		cfg.WebhookRetries = -1 // the flag's 0 means none; the Config's means default
	}
	cfg.WebhookURLSafeSignature = urlSafe
	cfg.Isolation = sandboxd.Isolation(isolation)

	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch logFormat {
	case "text":
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, hopts))
	case "json":
		cfg.Logger = slog.New(slog.NewJSONHandler(stderr, hopts))
	default:
		return fmt.Errorf("--log-format must be text or json")
	}

	srv, err := sandboxd.New(cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	cfg.Logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
