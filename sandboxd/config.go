package sandboxd

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"
)

// Isolation selects how sandbox processes are contained.
type Isolation string

const (
	// IsolationAuto uses bubblewrap when it is installed and works, and the
	// plain working directory otherwise.
	IsolationAuto Isolation = "auto"
	// IsolationBwrap requires bubblewrap: every sandbox gets a private root
	// (its directory is /home/user), its own network namespace (so every
	// sandbox can listen on port 3000) and its own PID namespace.
	IsolationBwrap Isolation = "bwrap"
	// IsolationNone runs commands in the sandbox directory on the host network.
	// Two sandboxes cannot listen on the same port.
	IsolationNone Isolation = "none"
)

// Config configures a Server. Zero values take the defaults noted per field.
type Config struct {
	// APIAddr is where the control-plane API listens ("127.0.0.1:0" picks a port).
	APIAddr string
	// SandboxAddr is where sandbox traffic (envd and user ports) listens.
	SandboxAddr string
	// StateDir holds sandbox files, sandbox records, events and pending webhook
	// deliveries. Required.
	StateDir string
	// APIKey is the only key the API accepts; it must look like e2b_<hex>.
	APIKey string
	// WebhookURL, when set, receives every lifecycle event, signed with
	// WebhookSecret, in addition to the webhooks registered through the API.
	WebhookURL    string
	WebhookSecret string
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger

	// Isolation defaults to IsolationAuto.
	Isolation Isolation
	// MaxTimeout caps sandbox lifetimes like a plan's maximum instance length
	// (default 24h).
	MaxTimeout time.Duration
	// WebhookRetries is how many times a failed delivery is retried (default 3;
	// negative means none).
	WebhookRetries int
	// WebhookRetryDelay is the first retry's delay; each later one doubles it
	// (default 2s).
	WebhookRetryDelay time.Duration
	// WebhookTimeout bounds one delivery attempt (default 10s).
	WebhookTimeout time.Duration
	// WebhookURLSafeSignature signs with the URL-safe base64 alphabet instead of
	// the standard one that production was observed to send.
	WebhookURLSafeSignature bool
	// EventRetention drops older events at start (default 7 days, as the provider).
	EventRetention time.Duration
	// KeepaliveMax caps the interval between keepalive messages on process
	// streams whatever the client asks (default 90s, envd's default).
	KeepaliveMax time.Duration
}

var apiKeyPattern = regexp.MustCompile(`^e2b_[0-9a-f]+$`)

func (c *Config) setDefaults() error {
	if c.StateDir == "" {
		return errors.New("sandboxd: StateDir is required")
	}
	if !apiKeyPattern.MatchString(c.APIKey) {
		return fmt.Errorf("sandboxd: APIKey must match %s", apiKeyPattern)
	}
	if c.APIAddr == "" {
		c.APIAddr = "127.0.0.1:49982"
	}
	if c.SandboxAddr == "" {
		c.SandboxAddr = "127.0.0.1:49983"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch c.Isolation {
	case "":
		c.Isolation = IsolationAuto
	case IsolationAuto, IsolationBwrap, IsolationNone:
	default:
		return fmt.Errorf("sandboxd: unknown isolation %q (want auto, bwrap or none)", c.Isolation)
	}
	if c.MaxTimeout <= 0 {
		c.MaxTimeout = 24 * time.Hour
	}
	if c.WebhookRetries == 0 {
		c.WebhookRetries = 3
	} else if c.WebhookRetries < 0 {
		c.WebhookRetries = 0
	}
	if c.WebhookRetryDelay <= 0 {
		c.WebhookRetryDelay = 2 * time.Second
	}
	if c.WebhookTimeout <= 0 {
		c.WebhookTimeout = 10 * time.Second
	}
	if c.EventRetention <= 0 {
		c.EventRetention = 7 * 24 * time.Hour
	}
	if c.KeepaliveMax <= 0 {
		c.KeepaliveMax = 90 * time.Second
	}
	if c.WebhookURL != "" && c.WebhookSecret == "" {
		return errors.New("sandboxd: WebhookURL needs WebhookSecret")
	}
	return nil
}
