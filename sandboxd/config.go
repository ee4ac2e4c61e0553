package sandboxd

import (
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"sandman/sandboxd/machine"
)

// Isolation selects how sandbox processes are contained (machine.Isolation).
type Isolation = machine.Isolation

// The isolations Config.Isolation may name.
const (
	IsolationAuto  = machine.IsolationAuto
	IsolationBwrap = machine.IsolationBwrap
	IsolationNone  = machine.IsolationNone
)

// Limits are a sandbox's resource limits (machine.Limits).
type Limits = machine.Limits

// IsolationReport is the isolation and limits in force (machine.IsolationReport).
type IsolationReport = machine.IsolationReport

// DefaultLimits are the per-sandbox limits when Config leaves them zero.
var DefaultLimits = Limits{Memory: 2 << 30, Pids: 1024, CPUWeight: 100, Disk: 5 << 30, IOWeight: 100}

const (
	// DefaultMaxSandboxes caps running sandboxes when Config leaves it zero.
	DefaultMaxSandboxes = 100
	// DefaultMaxStored caps kept sandboxes when Config leaves it zero.
	DefaultMaxStored = 500
	// UIDRangeSize is how many host uids one root sandboxd uses, from
	// its base: the base for its start-up probe, the rest for sandboxes.
	UIDRangeSize = machine.UIDRangeSize
	// DefaultUIDBase is where root sandboxd starts the host uids of
	// sandboxes (DefaultUIDBase+1 on; the base itself is for the start-up
	// probe), far above the ranges of users and of subordinate ids.
	DefaultUIDBase = 2_000_000_000
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
	// MetricsInterval is how often running sandboxes are measured (default 5 s, the
	// provider's bucket); tests shorten it.
	MetricsInterval time.Duration
	// KeepaliveMax caps the interval between keepalive messages on process
	// streams whatever the client asks (default 90s, envd's default).
	KeepaliveMax time.Duration

	// Limits per isolated sandbox: a zero field takes DefaultLimits', a
	// negative one turns that limit off.
	Limits Limits
	// MaxSandboxes caps running sandboxes (default DefaultMaxSandboxes;
	// negative: no cap). One more create or resume answers the provider's
	// 429.
	MaxSandboxes int
	// ShareOpt shows sandboxes the host's /opt, read-only (off by default:
	// only /usr, the /bin and /lib beside it and a list of /etc entries are
	// shared, docs/sandboxd.md).
	ShareOpt bool
	// MaxStored caps the sandboxes sandboxd keeps, running and paused (a
	// paused one holds its disk image): one more create answers 429
	// (default DefaultMaxStored; negative: no cap).
	MaxStored int
	// DiskReserve is the free space on the state directory's file system
	// that sandboxes' disk images may never take: a create or resume whose
	// image, with what the running sandboxes' images may still grow by,
	// would eat into it answers 507 (default 1 GiB; negative: no check).
	DiskReserve int64
	// UIDBase is the first host uid root sandboxd gives sandboxes (default
	// DefaultUIDBase); its range is UIDBase to UIDBase+UIDRangeSize-1, locked
	// for this sandboxd while it runs. Unused when sandboxd is not root.
	UIDBase int
	// EnvdVersion is the envd version sandboxes report (default
	// DefaultEnvdVersion). A sandbox takes the version in force when it
	// starts: at create and at every resume, as the provider live-upgrades
	// envd at resume, so a resumed sandbox may report another version than
	// before its pause.
	EnvdVersion string
	// FaultInjection opens the admin endpoints that inject the provider's
	// misbehaviours (Fault) for resilience tests. Off, sandboxd has no such
	// endpoint and takes no fault: production never runs one.
	FaultInjection bool
}

// DefaultEnvdVersion is the envd version sandboxes report unless Config says
// otherwise.
const DefaultEnvdVersion = "0.6.13"

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
	if c.MetricsInterval <= 0 {
		c.MetricsInterval = 5 * time.Second
	}
	if c.EnvdVersion == "" {
		c.EnvdVersion = DefaultEnvdVersion
	}
	c.Limits = Limits{
		Memory:    orDefault(c.Limits.Memory, DefaultLimits.Memory),
		Pids:      orDefault(c.Limits.Pids, DefaultLimits.Pids),
		CPUWeight: orDefault(c.Limits.CPUWeight, DefaultLimits.CPUWeight),
		Disk:      orDefault(c.Limits.Disk, DefaultLimits.Disk),
		IOWeight:  orDefault(c.Limits.IOWeight, DefaultLimits.IOWeight),
	}
	if c.Limits.CPUWeight > 10000 {
		return errors.New("sandboxd: the CPU weight must be between 1 and 10000")
	}
	if c.Limits.IOWeight > 10000 {
		return errors.New("sandboxd: the I/O weight must be between 1 and 10000")
	}
	if c.Limits.Pids > 0 && c.Limits.Pids < 16 {
		return errors.New("sandboxd: a sandbox needs at least 16 processes")
	}
	if c.Limits.Memory > 0 && c.Limits.Memory < 64<<20 {
		return errors.New("sandboxd: a sandbox needs at least 64 MiB of memory")
	}
	if c.Limits.Disk > 0 && c.Limits.Disk < 16<<20 {
		return errors.New("sandboxd: a sandbox's disk needs at least 16 MiB")
	}
	c.MaxSandboxes = max(orDefault(c.MaxSandboxes, DefaultMaxSandboxes), 0)
	c.MaxStored = max(orDefault(c.MaxStored, DefaultMaxStored), 0)
	if c.DiskReserve == 0 {
		c.DiskReserve = 1 << 30
	}
	if c.UIDBase == 0 {
		c.UIDBase = DefaultUIDBase
	}
	if c.UIDBase < 65536 || c.UIDBase > 1<<31-1<<24 {
		return fmt.Errorf("sandboxd: the uid base must be between 65536 and %d", 1<<31-1<<24)
	}
	if c.WebhookURL != "" && c.WebhookSecret == "" {
		return errors.New("sandboxd: WebhookURL needs WebhookSecret")
	}
	return nil
}

// orDefault reads a Config number: zero takes def, negative means off (0).
func orDefault[T int | int64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// ErrNoIsolation reports whether New failed because isolation is
// unavailable (and --isolation=none is the way to start anyway).
func ErrNoIsolation(err error) bool { return machine.ErrNoIsolation(err) }

// ErrUIDRangeTaken reports whether New failed because another live sandboxd
// holds an overlapping host uid range (Config.UIDBase).
func ErrUIDRangeTaken(err error) bool { return machine.ErrUIDRangeTaken(err) }
