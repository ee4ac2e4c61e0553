package e2b

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults used by New for zero Config fields.
const (
	DefaultDomain          = "e2b.app"
	DefaultBreakerFailures = 5
	DefaultBreakerOpenFor  = 30 * time.Second
	DefaultCallTimeout     = 60 * time.Second
	DefaultAttemptTimeout  = 30 * time.Second
	// EnvdPort is the port of envd inside every sandbox.
	EnvdPort = 49983
)

// DefaultRetryDelays are the waits before the 1st, 2nd and 3rd retry of a transient failure
// (docs/provider.md, "Errors").
var DefaultRetryDelays = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}

// The SDKs accept upper-case hex too.
var apiKeyPattern = regexp.MustCompile(`(?i)^e2b_[0-9a-f]+$`)

// Config says where the provider is and how patient to be with it.
type Config struct {
	// APIURL is the control-plane base URL, e.g. https://api.e2b.app (E2B_API_URL).
	APIURL string
	// APIKey is sent as X-API-Key (E2B_API_KEY).
	APIKey string
	// Domain is the sandbox domain used for {port}-{id}.{domain} hosts when the provider's
	// answer carries none (E2B_DOMAIN).
	Domain string
	// SandboxURL, when set, is where every envd request goes, naming the sandbox with the
	// E2b-Sandbox-Id / E2b-Sandbox-Port headers instead of the host name (E2B_SANDBOX_URL).
	SandboxURL string
	// HTTPClient sends every request. Its Timeout should be zero: the client sets deadlines
	// per call and attempt, and a process stream lives as long as its process. Nil means a
	// client on NewHTTPTransport.
	HTTPClient *http.Client
	// RetryDelays are the waits before each retry of a transient failure; their number is the
	// number of retries. Nil means DefaultRetryDelays; an empty non-nil slice disables retries.
	RetryDelays []time.Duration
	// BreakerFailures is how many consecutive failed requests open the circuit breaker.
	BreakerFailures int
	// BreakerOpenFor is how long the breaker stays open before letting one probe through.
	BreakerOpenFor time.Duration
	// CallTimeout bounds a whole call, retries included, when the caller's context has no
	// deadline.
	CallTimeout time.Duration
	// AttemptTimeout bounds each single HTTP request, so one hung request leaves time to retry.
	AttemptTimeout time.Duration
	// Registerer, when set, receives the client's Prometheus metrics.
	Registerer prometheus.Registerer
	// Logger receives retries and breaker transitions; nil discards them.
	Logger *slog.Logger
}

// FromEnv reads the provider settings the way the provider's SDKs do: E2B_DOMAIN (default
// e2b.app), E2B_API_URL (default https://api.<domain>), E2B_API_KEY and E2B_SANDBOX_URL.
// Only those fields are set; New fills in the rest.
func FromEnv(getenv func(string) string) Config {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	cfg := Config{
		APIKey:     get("E2B_API_KEY"),
		Domain:     get("E2B_DOMAIN"),
		APIURL:     get("E2B_API_URL"),
		SandboxURL: get("E2B_SANDBOX_URL"),
	}
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api." + cfg.Domain
	}
	return cfg
}

// withDefaults returns cfg with zero fields filled in, or the first problem found.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.Domain == "" {
		cfg.Domain = DefaultDomain
	}
	if cfg.APIURL == "" {
		cfg.APIURL = "https://api." + cfg.Domain
	}
	cfg.APIURL = strings.TrimRight(cfg.APIURL, "/")
	cfg.SandboxURL = strings.TrimRight(cfg.SandboxURL, "/")
	if cfg.RetryDelays == nil {
		cfg.RetryDelays = DefaultRetryDelays
	}
	cfg.RetryDelays = append([]time.Duration(nil), cfg.RetryDelays...)
	if cfg.BreakerFailures == 0 {
		cfg.BreakerFailures = DefaultBreakerFailures
	}
	if cfg.BreakerOpenFor == 0 {
		cfg.BreakerOpenFor = DefaultBreakerOpenFor
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: NewHTTPTransport()}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}

	var errs []error
	if err := checkBaseURL(cfg.APIURL); err != nil {
		errs = append(errs, fmt.Errorf("APIURL: %w", err))
	}
	if cfg.SandboxURL != "" {
		if err := checkBaseURL(cfg.SandboxURL); err != nil {
			errs = append(errs, fmt.Errorf("SandboxURL: %w", err))
		}
	}
	if !apiKeyPattern.MatchString(cfg.APIKey) {
		// Never echo the key: it is a secret even when malformed.
		errs = append(errs, errors.New("APIKey: want e2b_ followed by hex (E2B_API_KEY)"))
	}
	if strings.ContainsAny(cfg.Domain, "/ ") {
		errs = append(errs, fmt.Errorf("Domain: %q is not a host name", cfg.Domain))
	}
	for _, d := range cfg.RetryDelays {
		if d < 0 {
			errs = append(errs, errors.New("RetryDelays: negative delay"))
			break
		}
	}
	if cfg.BreakerFailures < 1 || cfg.BreakerOpenFor < 0 || cfg.CallTimeout < 0 || cfg.AttemptTimeout < 0 {
		errs = append(errs, errors.New("BreakerFailures, BreakerOpenFor, CallTimeout and AttemptTimeout must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return cfg, fmt.Errorf("e2b config: %w", err)
	}
	return cfg, nil
}

func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q must not have a query or fragment", raw)
	}
	return nil
}
