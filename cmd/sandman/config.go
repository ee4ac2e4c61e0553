package main

import (
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sandman/app"
	"sandman/e2b"
	"sandman/keyring"
	"sandman/ops"
	"sandman/shares"
)

// config is everything sandman reads from its environment (README lists each variable): the
// instance's configuration, and how much to log.
type config struct {
	app.Config
	LogLevel string
}

// loadConfig reads the environment over app.DefaultConfig. Every wrong value is reported at
// once, each naming its variable.
func loadConfig(getenv func(string) string) (config, error) {
	c := config{Config: app.DefaultConfig(), LogLevel: orDefault(getenv("SANDMAN_LOG_LEVEL"), "info")}
	c.DatabaseURL = getenv("DATABASE_URL")
	c.Addr = orDefault(getenv("SANDMAN_ADDR"), c.Addr)
	var errs []string
	if c.DatabaseURL == "" {
		errs = append(errs, "DATABASE_URL is not set (e.g. postgres://user@localhost:5432/sandman)")
	}
	credits, err := intEnv(getenv, "SANDMAN_START_CREDITS", int(c.StartCredits))
	if err != nil || credits < 0 {
		errs = append(errs, "SANDMAN_START_CREDITS must be a whole number ≥ 0")
	}
	c.StartCredits = int32(credits)
	if c.CookieSecure, err = boolEnv(getenv, "SANDMAN_COOKIE_SECURE"); err != nil {
		errs = append(errs, err.Error())
	}
	if c.TrustProxy, err = boolEnv(getenv, "SANDMAN_TRUST_PROXY"); err != nil {
		errs = append(errs, err.Error())
	}
	if c.Webhooks.AllowPrivate, err = boolEnv(getenv, "SANDMAN_WEBHOOKS_ALLOW_PRIVATE"); err != nil {
		errs = append(errs, err.Error())
	}
	c.PublicURL = getenv("SANDMAN_PUBLIC_URL")
	if c.PublicURL != "" {
		if msg := checkPublicURL(c.PublicURL); msg != "" {
			errs = append(errs, msg)
		}
		c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
	} else {
		c.PublicURL = app.DefaultPublicURL(c.Addr)
	}
	c.ShareKey = getenv("SANDMAN_SHARE_KEY")
	if c.ShareKey != "" && len(c.ShareKey) < shares.MinKeyLength {
		errs = append(errs, fmt.Sprintf("SANDMAN_SHARE_KEY must be at least %d characters (a random string, e.g. openssl rand -hex 32)", shares.MinKeyLength))
	}
	if c.Secrets, err = keyring.Parse(getenv("SANDMAN_SECRETS_KEY"), getenv("SANDMAN_SECRETS_KEY_PREVIOUS")); err != nil {
		errs = append(errs, err.Error())
	}
	c.MetricsAddr = getenv("SANDMAN_METRICS_ADDR")
	c.MetricsToken = getenv("SANDMAN_METRICS_TOKEN")
	signUps, err := intEnv(getenv, "SANDMAN_SIGNUPS_PER_HOUR", c.SignUpsPerHour)
	if err != nil || signUps < 0 {
		errs = append(errs, "SANDMAN_SIGNUPS_PER_HOUR must be a whole number ≥ 0 (0 turns the limit off)")
	}
	c.SignUpsPerHour = signUps
	if v := getenv("SANDMAN_STORAGE_QUOTA"); v != "" {
		n, err := parseBytes(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("SANDMAN_STORAGE_QUOTA must be a size like 1GiB or 500MiB (1 MiB to 1 PiB), not %q", v))
		} else {
			c.StorageQuota = n
		}
	}
	limit, err := intEnv(getenv, "SANDMAN_PROJECT_LIMIT", c.ProjectLimit)
	if err != nil || limit < 1 {
		errs = append(errs, "SANDMAN_PROJECT_LIMIT must be a whole number ≥ 1")
	} else {
		c.ProjectLimit = limit
	}
	large, err := intEnv(getenv, "SANDMAN_LARGE_BODIES", c.LargeBodies)
	if err != nil || large < 1 {
		errs = append(errs, "SANDMAN_LARGE_BODIES must be a whole number ≥ 1 (the uploads and versions an instance reads at once)")
	}
	c.LargeBodies = large
	c.Provider = e2b.FromEnv(getenv)
	c.WebhookURL = getenv("E2B_WEBHOOK_URL")
	lc := &c.Lifecycle
	lc.WebhookSecret = getenv("E2B_WEBHOOK_SECRET")
	if c.WebhookURL != "" && lc.WebhookSecret == "" {
		errs = append(errs, "E2B_WEBHOOK_URL is set but E2B_WEBHOOK_SECRET is not: webhooks must be signed")
	}
	lc.Template = orDefault(getenv("E2B_TEMPLATE"), lc.Template)
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"SANDMAN_IDLE_TIMEOUT", &lc.IdleTimeout}, {"SANDMAN_SANDBOX_TIMEOUT", &lc.SandboxTimeout}} {
		if v := getenv(d.name); v != "" {
			parsed, err := time.ParseDuration(v)
			if err != nil || parsed <= 0 {
				errs = append(errs, fmt.Sprintf("%s must be a positive duration like 3m or 1h, not %q", d.name, v))
				continue
			}
			*d.dst = parsed
		}
	}
	if lc.SandboxTimeout < time.Minute {
		errs = append(errs, "SANDMAN_SANDBOX_TIMEOUT must be at least 1m")
	}
	switch v := getenv("SANDMAN_PAUSE_AFTER_READY"); v {
	case "", "idle":
	case "immediate":
		lc.PauseAfterReady = v
	default:
		errs = append(errs, fmt.Sprintf("SANDMAN_PAUSE_AFTER_READY must be idle or immediate, not %q", v))
	}
	switch v := getenv("SANDMAN_PREVIEW_PROXY"); v {
	case "off":
	case "":
		lc.PreviewProxy = defaultPreviewProxy()
	default:
		if fi, err := os.Stat(v); err != nil || !fi.Mode().IsRegular() {
			errs = append(errs, fmt.Sprintf("SANDMAN_PREVIEW_PROXY must be the preview proxy's Linux binary (make previewproxy builds bin/sandbox/previewproxy) or off, not %q", v))
		}
		lc.PreviewProxy = v
	}
	errs = append(errs, loadOps(getenv, &c.Ops)...)
	if len(errs) > 0 {
		return c, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// loadOps reads the console's rates and the sandbox size (docs/operations.md).
func loadOps(getenv func(string) string, o *ops.Config) []string {
	var errs []string
	for _, r := range []struct {
		name string
		dst  *float64
	}{{"SANDMAN_RATE_VCPU_HOUR", &o.Rates.VCPUHour}, {"SANDMAN_RATE_GIB_HOUR", &o.Rates.GiBHour}} {
		if v := getenv(r.name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
				errs = append(errs, fmt.Sprintf("%s must be a price in US dollars ≥ 0 like 0.0504, not %q", r.name, v))
				continue
			}
			*r.dst = f
		}
	}
	if v := getenv("SANDMAN_SANDBOX_VCPUS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1024 {
			errs = append(errs, fmt.Sprintf("SANDMAN_SANDBOX_VCPUS must be a whole number of vCPUs from 1 to 1024, not %q", v))
		} else {
			o.Size.VCPUs = int32(n)
		}
	}
	if v := getenv("SANDMAN_SANDBOX_MEMORY"); v != "" {
		mib, err := parseMiB(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("SANDMAN_SANDBOX_MEMORY must be a size like 512MiB or 2GiB (1 MiB to 1 TiB), not %q", v))
		} else {
			o.Size.MemoryMiB = mib
		}
	}
	return errs
}

// parseMiB reads a memory size in MiB or GiB ("512MiB", "2GiB", "1.5GiB"; a bare number is MiB).
// parseBytes reads a size in bytes, KiB, MiB, GiB or TiB ("1GiB", "500 MiB", "1073741824").
func parseBytes(v string) (int64, error) {
	s := strings.TrimSpace(v)
	unit := 1.0
	for _, u := range []struct {
		suffix string
		size   float64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40}} {
		if strings.HasSuffix(strings.ToLower(s), u.suffix) {
			unit, s = u.size, s[:len(s)-len(u.suffix)]
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("not a size: %q", v)
	}
	n := math.Round(f * unit)
	if n < 1<<20 || n > 1<<50 {
		return 0, fmt.Errorf("out of range: %q", v)
	}
	return int64(n), nil
}

func parseMiB(v string) (int32, error) {
	s := strings.TrimSpace(v)
	unit := 1.0
	switch lower := strings.ToLower(s); {
	case strings.HasSuffix(lower, "gib"):
		unit, s = 1024, s[:len(s)-3]
	case strings.HasSuffix(lower, "mib"):
		s = s[:len(s)-3]
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) {
		return 0, fmt.Errorf("not a size: %q", v)
	}
	mib := math.Round(f * unit)
	if mib < 1 || mib > 1<<20 {
		return 0, fmt.Errorf("out of range: %q", v)
	}
	return int32(mib), nil
}

// checkPublicURL says what is wrong with a SANDMAN_PUBLIC_URL ("" when nothing is).
func checkPublicURL(v string) string {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Sprintf("SANDMAN_PUBLIC_URL must be an http or https URL where browsers reach Sandman, like https://sandman.example.com, not %q", v)
	}
	return ""
}

// defaultPreviewProxy is SANDMAN_PREVIEW_PROXY's default: sandbox/previewproxy next to the
// executable (bin/sandman beside bin/sandbox/previewproxy, as make build lays them out), else
// bin/sandbox/previewproxy in the working directory (go run in the repository); "" when neither
// is there, which runs previews without the proxy.
func defaultPreviewProxy() string {
	var candidates []string
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "sandbox", "previewproxy"))
	}
	for _, p := range append(candidates, filepath.Join("bin", "sandbox", "previewproxy")) {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			if abs, err := filepath.Abs(p); err == nil {
				return abs
			}
			return p
		}
	}
	return ""
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func intEnv(getenv func(string) string, name string, def int) (int, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	return strconv.Atoi(v)
}

func boolEnv(getenv func(string) string, name string) (bool, error) {
	v := getenv(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s must be true or false, not %q", name, v)
	}
	return b, nil
}
