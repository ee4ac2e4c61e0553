package main

import (
	"strings"
	"testing"
	"time"

	"sandman/app"
)

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	base := map[string]string{"DATABASE_URL": "postgres://localhost/sandman"}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string // empty: valid
		check   func(t *testing.T, c config)
	}{
		{name: "defaults", check: func(t *testing.T, c config) {
			if c.Addr != "127.0.0.1:8080" || c.StartCredits != 10 || c.Lifecycle.IdleTimeout != 3*time.Minute ||
				c.Lifecycle.SandboxTimeout != time.Hour || c.Lifecycle.Template != "base" || c.Lifecycle.PauseAfterReady != "idle" ||
				c.Role != app.RoleAll || c.ShutdownWait != app.DefaultConfig().ShutdownWait || c.LogLevel != "info" ||
				c.MetricsAddr != "" || c.MetricsToken != "" || c.SignUpsPerHour != 10 || c.LargeBodies != 4 ||
				c.PublicURL != "http://127.0.0.1:8080" || c.ShareKey != "" ||
				c.Ops.Rates.VCPUHour != 0.0504 || c.Ops.Rates.GiBHour != 0.0162 || c.Ops.Size.VCPUs != 2 || c.Ops.Size.MemoryMiB != 512 ||
				c.StorageQuota != 1<<30 || c.ProjectLimit != 100 || c.Webhooks.AllowPrivate || c.Webhooks.Timeout != 10*time.Second {
				t.Fatalf("defaults: %+v", c)
			}
		}},
		{name: "every setting", env: map[string]string{
			"SANDMAN_ADDR": "0.0.0.0:9000", "SANDMAN_START_CREDITS": "3", "SANDMAN_COOKIE_SECURE": "true",
			"SANDMAN_TRUST_PROXY": "1", "SANDMAN_IDLE_TIMEOUT": "90s", "SANDMAN_SANDBOX_TIMEOUT": "2h",
			"SANDMAN_PAUSE_AFTER_READY": "immediate", "E2B_TEMPLATE": "node", "E2B_WEBHOOK_URL": "https://x/webhooks/e2b",
			"E2B_WEBHOOK_SECRET": "s", "SANDMAN_METRICS_ADDR": "10.0.0.5:9100", "SANDMAN_METRICS_TOKEN": "m3trics",
			"SANDMAN_SIGNUPS_PER_HOUR": "0", "SANDMAN_PUBLIC_URL": "https://sandman.example.com/", "SANDMAN_LARGE_BODIES": "9",
			"SANDMAN_SHARE_KEY":      "0123456789abcdef0123456789abcdef",
			"SANDMAN_RATE_VCPU_HOUR": "0.1", "SANDMAN_RATE_GIB_HOUR": "0.02", "SANDMAN_SANDBOX_VCPUS": "4", "SANDMAN_SANDBOX_MEMORY": "1.5GiB",
			"SANDMAN_STORAGE_QUOTA": "500MiB", "SANDMAN_PROJECT_LIMIT": "7", "SANDMAN_WEBHOOKS_ALLOW_PRIVATE": "true",
		}, check: func(t *testing.T, c config) {
			if c.Addr != "0.0.0.0:9000" || c.StartCredits != 3 || !c.CookieSecure || !c.TrustProxy ||
				c.MetricsAddr != "10.0.0.5:9100" || c.MetricsToken != "m3trics" || c.SignUpsPerHour != 0 || c.LargeBodies != 9 ||
				c.Lifecycle.IdleTimeout != 90*time.Second || c.Lifecycle.SandboxTimeout != 2*time.Hour ||
				c.Lifecycle.PauseAfterReady != "immediate" || c.Lifecycle.Template != "node" ||
				c.WebhookURL == "" || c.Lifecycle.WebhookSecret != "s" ||
				c.PublicURL != "https://sandman.example.com" || c.ShareKey != "0123456789abcdef0123456789abcdef" ||
				c.Ops.Rates.VCPUHour != 0.1 || c.Ops.Rates.GiBHour != 0.02 || c.Ops.Size.VCPUs != 4 || c.Ops.Size.MemoryMiB != 1536 ||
				c.StorageQuota != 500<<20 || c.ProjectLimit != 7 || !c.Webhooks.AllowPrivate {
				t.Fatalf("settings not taken: %+v", c)
			}
		}},
		{name: "public URL from an address on every interface", env: map[string]string{"SANDMAN_ADDR": "0.0.0.0:9000"}, check: func(t *testing.T, c config) {
			if c.PublicURL != "http://localhost:9000" {
				t.Fatalf("SANDMAN_PUBLIC_URL defaults to %q", c.PublicURL)
			}
		}},
		{name: "public URL from an address with no host", env: map[string]string{"SANDMAN_ADDR": ":9000"}, check: func(t *testing.T, c config) {
			if c.PublicURL != "http://localhost:9000" {
				t.Fatalf("SANDMAN_PUBLIC_URL defaults to %q", c.PublicURL)
			}
		}},
		{name: "public URL with a path", env: map[string]string{"SANDMAN_PUBLIC_URL": "https://example.com/sandman"}, check: func(t *testing.T, c config) {
			if c.PublicURL != "https://example.com/sandman" {
				t.Fatalf("SANDMAN_PUBLIC_URL is %q", c.PublicURL)
			}
		}},
		{name: "public URL without a scheme", env: map[string]string{"SANDMAN_PUBLIC_URL": "sandman.example.com"}, wantErr: "SANDMAN_PUBLIC_URL must be an http or https URL"},
		{name: "public URL with a query", env: map[string]string{"SANDMAN_PUBLIC_URL": "https://sandman.example.com/?x=1"}, wantErr: "SANDMAN_PUBLIC_URL must be"},
		{name: "public URL of another scheme", env: map[string]string{"SANDMAN_PUBLIC_URL": "ftp://sandman.example.com"}, wantErr: "SANDMAN_PUBLIC_URL must be"},
		{name: "short share key", env: map[string]string{"SANDMAN_SHARE_KEY": "secret"}, wantErr: "SANDMAN_SHARE_KEY must be at least 32 characters"},
		{name: "memory in MiB", env: map[string]string{"SANDMAN_SANDBOX_MEMORY": "768MiB"}, check: func(t *testing.T, c config) {
			if c.Ops.Size.MemoryMiB != 768 {
				t.Fatalf("SANDMAN_SANDBOX_MEMORY=768MiB read as %d MiB", c.Ops.Size.MemoryMiB)
			}
		}},
		{name: "memory as a bare number of MiB", env: map[string]string{"SANDMAN_SANDBOX_MEMORY": "2048"}, check: func(t *testing.T, c config) {
			if c.Ops.Size.MemoryMiB != 2048 {
				t.Fatalf("SANDMAN_SANDBOX_MEMORY=2048 read as %d MiB", c.Ops.Size.MemoryMiB)
			}
		}},
		{name: "memory of another unit", env: map[string]string{"SANDMAN_SANDBOX_MEMORY": "512MB!"}, wantErr: "SANDMAN_SANDBOX_MEMORY must be a size"},
		{name: "no memory", env: map[string]string{"SANDMAN_SANDBOX_MEMORY": "0GiB"}, wantErr: "SANDMAN_SANDBOX_MEMORY must be a size"},
		{name: "negative rate", env: map[string]string{"SANDMAN_RATE_VCPU_HOUR": "-0.05"}, wantErr: "SANDMAN_RATE_VCPU_HOUR must be a price"},
		{name: "rate not a number", env: map[string]string{"SANDMAN_RATE_GIB_HOUR": "cheap"}, wantErr: "SANDMAN_RATE_GIB_HOUR must be a price"},
		{name: "no vCPUs", env: map[string]string{"SANDMAN_SANDBOX_VCPUS": "0"}, wantErr: "SANDMAN_SANDBOX_VCPUS must be"},
		{name: "no database", env: map[string]string{"DATABASE_URL": ""}, wantErr: "DATABASE_URL is not set"},
		{name: "negative credits", env: map[string]string{"SANDMAN_START_CREDITS": "-1"}, wantErr: "SANDMAN_START_CREDITS"},
		{name: "credits not a number", env: map[string]string{"SANDMAN_START_CREDITS": "ten"}, wantErr: "SANDMAN_START_CREDITS"},
		{name: "quota in GiB", env: map[string]string{"SANDMAN_STORAGE_QUOTA": "2.5 GiB"}, check: func(t *testing.T, c config) {
			if c.StorageQuota != 5<<29 {
				t.Fatalf("SANDMAN_STORAGE_QUOTA=2.5 GiB read as %d bytes", c.StorageQuota)
			}
		}},
		{name: "quota of another unit", env: map[string]string{"SANDMAN_STORAGE_QUOTA": "1GB"}, wantErr: "SANDMAN_STORAGE_QUOTA must be a size like 1GiB"},
		{name: "quota too small", env: map[string]string{"SANDMAN_STORAGE_QUOTA": "10KiB"}, wantErr: "SANDMAN_STORAGE_QUOTA must be a size"},
		{name: "no projects", env: map[string]string{"SANDMAN_PROJECT_LIMIT": "0"}, wantErr: "SANDMAN_PROJECT_LIMIT must be a whole number ≥ 1"},
		{name: "negative sign-up limit", env: map[string]string{"SANDMAN_SIGNUPS_PER_HOUR": "-1"}, wantErr: "SANDMAN_SIGNUPS_PER_HOUR"},
		{name: "no large body at a time", env: map[string]string{"SANDMAN_LARGE_BODIES": "0"}, wantErr: "SANDMAN_LARGE_BODIES must be a whole number ≥ 1"},
		{name: "bad bool", env: map[string]string{"SANDMAN_COOKIE_SECURE": "yes please"}, wantErr: "SANDMAN_COOKIE_SECURE must be true or false"},
		{name: "bad duration", env: map[string]string{"SANDMAN_IDLE_TIMEOUT": "3 minutes"}, wantErr: "SANDMAN_IDLE_TIMEOUT must be a positive duration"},
		{name: "negative duration", env: map[string]string{"SANDMAN_IDLE_TIMEOUT": "-3m"}, wantErr: "SANDMAN_IDLE_TIMEOUT"},
		{name: "lifetime too short", env: map[string]string{"SANDMAN_SANDBOX_TIMEOUT": "30s"}, wantErr: "at least 1m"},
		{name: "preview proxy off", env: map[string]string{"SANDMAN_PREVIEW_PROXY": "off"}, check: func(t *testing.T, c config) {
			if c.Lifecycle.PreviewProxy != "" {
				t.Fatalf("SANDMAN_PREVIEW_PROXY=off runs the proxy %q", c.Lifecycle.PreviewProxy)
			}
		}},
		{name: "preview proxy at a path", env: map[string]string{"SANDMAN_PREVIEW_PROXY": "config_test.go"}, check: func(t *testing.T, c config) {
			if c.Lifecycle.PreviewProxy != "config_test.go" {
				t.Fatalf("SANDMAN_PREVIEW_PROXY=config_test.go read as %q", c.Lifecycle.PreviewProxy)
			}
		}},
		{name: "preview proxy missing", env: map[string]string{"SANDMAN_PREVIEW_PROXY": "no/such/previewproxy"}, wantErr: "SANDMAN_PREVIEW_PROXY must be the preview proxy's Linux binary"},
		{name: "unknown pause policy", env: map[string]string{"SANDMAN_PAUSE_AFTER_READY": "never"}, wantErr: "idle or immediate"},
		{name: "unsigned webhooks", env: map[string]string{"E2B_WEBHOOK_URL": "https://x/webhooks/e2b"}, wantErr: "E2B_WEBHOOK_SECRET is not"},
		{name: "every error at once", env: map[string]string{"DATABASE_URL": "", "SANDMAN_START_CREDITS": "x"},
			wantErr: "DATABASE_URL is not set (e.g. postgres://user@localhost:5432/sandman); SANDMAN_START_CREDITS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			c, err := loadConfig(func(k string) string { return env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

// FuzzParseMiB: whatever SANDMAN_SANDBOX_MEMORY holds, it is refused or read as a size in range.
func FuzzParseMiB(f *testing.F) {
	for _, s := range []string{"512MiB", "2GiB", "1.5gib", "2048", "0", "-1GiB", "1e30", "NaN", "Inf", " 64 MiB "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		mib, err := parseMiB(v)
		if err == nil && (mib < 1 || mib > 1<<20) {
			t.Fatalf("parseMiB(%q) = %d MiB, out of range", v, mib)
		}
	})
}

// FuzzParseBytes: whatever SANDMAN_STORAGE_QUOTA holds, it is refused or read as a size in range.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"1GiB", "500MiB", "1.5gib", "1073741824", "0", "-1GiB", "1e30", "NaN", "Inf", " 64 MiB ", "2TiB", "1KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := parseBytes(v)
		if err == nil && (n < 1<<20 || n > 1<<50) {
			t.Fatalf("parseBytes(%q) = %d bytes, out of range", v, n)
		}
	})
}
