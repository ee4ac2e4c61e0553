package e2b

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want Config
	}{
		{"defaults", map[string]string{"E2B_API_KEY": testKey},
			Config{APIKey: testKey, Domain: "e2b.app", APIURL: "https://api.e2b.app"}},
		{"domain only derives the API URL, as the SDKs do", map[string]string{"E2B_DOMAIN": "e2b-staging.dev"},
			Config{Domain: "e2b-staging.dev", APIURL: "https://api.e2b-staging.dev"}},
		{"explicit URLs win", map[string]string{"E2B_API_URL": "http://127.0.0.1:4000", "E2B_DOMAIN": "localhost:4001",
			"E2B_SANDBOX_URL": "http://localhost:4001"},
			Config{Domain: "localhost:4001", APIURL: "http://127.0.0.1:4000", SandboxURL: "http://localhost:4001"}},
		{"blank values are unset", map[string]string{"E2B_API_URL": "  ", "E2B_DOMAIN": " "},
			Config{Domain: "e2b.app", APIURL: "https://api.e2b.app"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := FromEnv(func(k string) string { return tt.env[k] })
			if got.APIURL != tt.want.APIURL || got.APIKey != tt.want.APIKey || got.Domain != tt.want.Domain ||
				got.SandboxURL != tt.want.SandboxURL {
				t.Errorf("FromEnv = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     Config
		wantErr string
	}{
		{"ok", Config{APIKey: testKey}, ""},
		{"upper-case hex key", Config{APIKey: "e2b_ABCDEF01"}, ""},
		{"missing key", Config{}, "APIKey"},
		{"malformed key", Config{APIKey: "sk-123"}, "APIKey"},
		{"relative API URL", Config{APIKey: testKey, APIURL: "api.e2b.app"}, "APIURL"},
		{"API URL with query", Config{APIKey: testKey, APIURL: "https://api.e2b.app?x=1"}, "APIURL"},
		{"bad sandbox URL", Config{APIKey: testKey, SandboxURL: "ftp://x"}, "SandboxURL"},
		{"negative delay", Config{APIKey: testKey, RetryDelays: []time.Duration{-1}}, "RetryDelays"},
		{"negative breaker", Config{APIKey: testKey, BreakerFailures: -1}, "BreakerFailures"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(tt.cfg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want it to mention %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), tt.cfg.APIKey) && tt.cfg.APIKey != "" {
				t.Errorf("error leaks the API key: %v", err)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	c, err := New(Config{APIKey: testKey, APIURL: "https://api.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := c.Config()
	if cfg.APIURL != "https://api.example.com" {
		t.Errorf("APIURL = %q, want the trailing slash trimmed", cfg.APIURL)
	}
	if len(cfg.RetryDelays) != 3 || cfg.RetryDelays[0] != time.Second || cfg.RetryDelays[2] != 4*time.Second {
		t.Errorf("RetryDelays = %v, want 1s 2s 4s", cfg.RetryDelays)
	}
	if cfg.BreakerFailures != 5 || cfg.BreakerOpenFor != 30*time.Second {
		t.Errorf("breaker = %d/%s, want 5/30s", cfg.BreakerFailures, cfg.BreakerOpenFor)
	}
	if cfg.Domain != "e2b.app" || cfg.HTTPClient == nil || cfg.CallTimeout == 0 || cfg.AttemptTimeout == 0 {
		t.Errorf("defaults missing: %+v", cfg)
	}

	c, err = New(Config{APIKey: testKey, RetryDelays: []time.Duration{}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(c.Config().RetryDelays); n != 0 {
		t.Errorf("an empty RetryDelays must disable retries, got %d", n)
	}
}

func TestConfigErrorIsNotAProviderError(t *testing.T) {
	t.Parallel()
	_, err := New(Config{})
	for _, kind := range []error{ErrNotFound, ErrAuth, ErrTransient, ErrCircuitOpen} {
		if errors.Is(err, kind) {
			t.Errorf("config error matches %v", kind)
		}
	}
}
