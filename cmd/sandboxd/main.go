// Command sandboxd is a local, E2B-compatible sandbox host: the provider's
// control-plane API and envd on loopback, with every sandbox isolated in
// its own namespaces under per-sandbox limits (docs/sandboxd.md). Point
// E2B_API_URL at --api-addr, E2B_SANDBOX_URL at
// http://localhost:<port of --sandbox-addr> and E2B_DOMAIN at
// localhost:<that port>.
//
// Secrets never go on the command line, where every local user can read
// them: the API key comes from $E2B_API_KEY or --api-key-file, the webhook
// secret from $E2B_WEBHOOK_SECRET or --webhook-secret-file.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"sandman/sandboxd"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Getenv, os.Stderr)
	// The secrets were read; nothing started from here needs them.
	os.Unsetenv("E2B_API_KEY")
	os.Unsetenv("E2B_WEBHOOK_SECRET")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd:", strings.TrimPrefix(err.Error(), "sandboxd: "))
		os.Exit(1)
	}
}

// secretOnCommandLine is a flag that only refuses, with the way to pass
// the secret instead.
type secretOnCommandLine struct{ how string }

func (s secretOnCommandLine) String() string { return "" }
func (s secretOnCommandLine) Set(string) error {
	return errors.New("secrets on the command line are visible to every local user: " + s.how)
}

// byteSize is a size flag: bytes, or a number with K, M, G, T (powers of
// 1024, with or without "iB"); 0 turns the limit off.
type byteSize struct{ n *int64 }

func (b byteSize) String() string {
	if b.n == nil {
		return ""
	}
	return strconv.FormatInt(*b.n, 10)
}

func (b byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*b.n = n
	return nil
}

func parseBytes(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "i")
	shift := 0
	if t != "" {
		switch t[len(t)-1] {
		case 'K', 'k':
			shift = 10
		case 'M', 'm':
			shift = 20
		case 'G', 'g':
			shift = 30
		case 'T', 't':
			shift = 40
		}
		if shift > 0 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("%q is not a size (e.g. 2GiB, 256MiB, 0 for off)", s)
	}
	return n << shift, nil
}

// offIfZero turns a flag's 0 (off) into the Config's negative (off); the
// Config's 0 means the default.
func offIfZero[T int | int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// readSecret reads a secret from file, else from the environment variable.
func readSecret(file, env string, getenv func(string) string) (string, error) {
	if file == "" {
		return getenv(env), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s is empty", file)
	}
	return v, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg                  sandboxd.Config
		apiKeyFile           string
		webhookSecretFile    string
		isolation            string
		logFormat            string
		logLevel             string
		urlSafe              bool
		memory, disk         = sandboxd.DefaultLimits.Memory, sandboxd.DefaultLimits.Disk
		diskReserve          = int64(1 << 30)
		pids, cpu, sandboxes int
		ioWeight, stored     int
	)
	fs.StringVar(&cfg.APIAddr, "api-addr", "127.0.0.1:49982", "control-plane API address (E2B_API_URL)")
	fs.StringVar(&cfg.SandboxAddr, "sandbox-addr", "127.0.0.1:49983", "sandbox traffic address: envd and sandbox ports")
	fs.StringVar(&cfg.StateDir, "state-dir", "", "directory for sandboxes, events and webhooks (required)")
	fs.StringVar(&apiKeyFile, "api-key-file", "", "file holding the API key to accept, e2b_<hex> (default $E2B_API_KEY)")
	fs.Var(secretOnCommandLine{"set E2B_API_KEY or use --api-key-file"}, "api-key", "refused: use $E2B_API_KEY or --api-key-file")
	fs.StringVar(&cfg.WebhookURL, "webhook-url", "", "deliver every lifecycle event to this URL")
	fs.StringVar(&webhookSecretFile, "webhook-secret-file", "", "file holding the signature secret for --webhook-url (default $E2B_WEBHOOK_SECRET)")
	fs.Var(secretOnCommandLine{"set E2B_WEBHOOK_SECRET or use --webhook-secret-file"}, "webhook-secret", "refused: use $E2B_WEBHOOK_SECRET or --webhook-secret-file")
	fs.BoolVar(&urlSafe, "webhook-signature-urlsafe", false, "sign webhooks with the URL-safe base64 alphabet instead of the standard one")
	fs.IntVar(&cfg.WebhookRetries, "webhook-retries", 3, "retries of a failed webhook delivery")
	fs.DurationVar(&cfg.WebhookRetryDelay, "webhook-retry-delay", 2*time.Second, "first retry delay; it doubles per retry")
	fs.DurationVar(&cfg.MaxTimeout, "max-timeout", 24*time.Hour, "longest sandbox lifetime a request may ask for")
	fs.StringVar(&isolation, "isolation", "auto", "auto or bwrap (isolate every sandbox; refuse to start when that cannot work), or none (no isolation, no limits: trusted code only)")
	fs.Var(byteSize{&memory}, "memory-limit", "memory per sandbox, swap included (0: off)")
	fs.IntVar(&pids, "pids-limit", sandboxd.DefaultLimits.Pids, "processes and threads per sandbox (0: off)")
	fs.IntVar(&cpu, "cpu-weight", sandboxd.DefaultLimits.CPUWeight, "CPU share per sandbox against the others, 1-10000 (0: off)")
	fs.Var(byteSize{&disk}, "disk-limit", "writable disk per sandbox, home and /tmp (0: off)")
	fs.IntVar(&ioWeight, "io-weight", sandboxd.DefaultLimits.IOWeight, "disk time share per sandbox against the others, 1-10000, where the I/O scheduler has weights (0: off)")
	fs.Var(byteSize{&diskReserve}, "disk-reserve", "free space on the state directory's disk that sandboxes' images may never take: a create or resume that could eat into it is refused with 507 (0: no check)")
	fs.IntVar(&sandboxes, "max-sandboxes", sandboxd.DefaultMaxSandboxes, "running sandboxes at once; one more is refused with 429 (0: no cap)")
	fs.IntVar(&stored, "max-stored-sandboxes", sandboxd.DefaultMaxStored, "sandboxes kept, running and paused; one more create is refused with 429 (0: no cap)")
	fs.BoolVar(&cfg.ShareOpt, "share-opt", false, "show sandboxes the host's /opt, read-only")
	fs.IntVar(&cfg.UIDBase, "uid-base", sandboxd.DefaultUIDBase, fmt.Sprintf("as root: sandboxes run as host uids from uid-base+1 to uid-base+%d; locked while sandboxd runs", sandboxd.UIDRangeSize-1))
	fs.BoolVar(&cfg.FaultInjection, "fault-injection", false, "open the admin endpoints that inject the provider's faults, for resilience tests: never in production")
	fs.StringVar(&logFormat, "log-format", "text", "text or json")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.StateDir == "" {
		return errors.New("--state-dir is required")
	}
	var err error
	if cfg.APIKey, err = readSecret(apiKeyFile, "E2B_API_KEY", getenv); err != nil {
		return fmt.Errorf("--api-key-file: %w", err)
	}
	if cfg.APIKey == "" {
		return errors.New("no API key: set E2B_API_KEY or use --api-key-file")
	}
	if cfg.WebhookSecret, err = readSecret(webhookSecretFile, "E2B_WEBHOOK_SECRET", getenv); err != nil {
		return fmt.Errorf("--webhook-secret-file: %w", err)
	}
	if cfg.WebhookURL == "" {
		cfg.WebhookSecret = ""
	}
	if cfg.WebhookRetries == 0 {
		cfg.WebhookRetries = -1 // the flag's 0 means none; the Config's means default
	}
	cfg.WebhookURLSafeSignature = urlSafe
	cfg.Isolation = sandboxd.Isolation(isolation)
	cfg.Limits = sandboxd.Limits{Memory: offIfZero(memory), Pids: offIfZero(pids), CPUWeight: offIfZero(cpu), Disk: offIfZero(disk), IOWeight: offIfZero(ioWeight)}
	cfg.MaxSandboxes = offIfZero(sandboxes)
	cfg.MaxStored = offIfZero(stored)
	cfg.DiskReserve = offIfZero(diskReserve)

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
