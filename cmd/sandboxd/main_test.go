package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandman/internal/testkit"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// serve runs sandboxd until the test ends and returns its API URL.
func serve(t *testing.T, args []string, getenv func(string) string) (string, *testkit.SyncBuffer) {
	t.Helper()
	// A uid range of its own: other sandboxd instances may run meanwhile.
	args = append(args, "--uid-base", strconv.Itoa(sandboxdtest.UIDBase()))
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testkit.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, getenv, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !t.Skipped() {
				t.Errorf("run: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("run did not stop")
		}
	})
	apiURL := regexp.MustCompile(`"api_url":"(http://[^"]+)"`)
	var m []string
	deadline := time.Now().Add(10 * time.Second)
	for m = apiURL.FindStringSubmatch(logs.String()); m == nil; m = apiURL.FindStringSubmatch(logs.String()) {
		select {
		case err := <-done:
			done <- err // for the cleanup
			if sandboxd.ErrNoIsolation(err) && os.Getenv("CI") != "true" {
				t.Skipf("skipped: sandboxd cannot isolate here (%v); CI=true makes this a failure", err)
			}
			t.Fatalf("run ended: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening line in %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return m[1], logs
}

func TestRunServesUntilCancelled(t *testing.T) {
	url, logs := serve(t, []string{"--api-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0",
		"--state-dir", sandboxdtest.StateDir(t), "--log-format", "json"}, env(map[string]string{"E2B_API_KEY": "e2b_00ff"}))
	resp, err := http.Get(url + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	if !strings.Contains(logs.String(), `"msg":"sandbox isolation"`) {
		t.Fatalf("the isolation mode must be logged: %s", logs.String())
	}
}

func TestRunReadsSecretsFromFiles(t *testing.T) {
	dir := t.TempDir()
	keyFile, secretFile := filepath.Join(dir, "key"), filepath.Join(dir, "secret")
	for f, v := range map[string]string{keyFile: "e2b_0a1b\n", secretFile: "s3cret\n"} {
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	url, _ := serve(t, []string{"--api-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0",
		"--state-dir", sandboxdtest.StateDir(t), "--log-format", "json", "--isolation", "none",
		"--api-key-file", keyFile, "--webhook-url", "http://127.0.0.1:9/hook", "--webhook-secret-file", secretFile,
		"--memory-limit", "256MiB", "--max-sandboxes", "7"}, env(map[string]string{"E2B_API_KEY": "e2b_ffff"}))
	req, _ := http.NewRequest("GET", url+"/_sandboxd/isolation", nil)
	req.Header.Set("X-API-Key", "e2b_0a1b") // the file's, not the environment's
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var report struct {
		Mode         string
		MaxSandboxes int
	}
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil || resp.StatusCode != 200 {
		t.Fatalf("isolation report: %d %v", resp.StatusCode, err)
	}
	if report.Mode != "none" || report.MaxSandboxes != 7 {
		t.Fatalf("report %+v", report)
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	key := env(map[string]string{"E2B_API_KEY": "e2b_00"})
	tests := []struct {
		name   string
		args   []string
		getenv func(string) string
		want   string
	}{
		{"no state dir", nil, key, "--state-dir"},
		{"key on the command line", []string{"--state-dir", t.TempDir(), "--api-key", "e2b_00"}, key, "E2B_API_KEY"},
		{"secret on the command line", []string{"--state-dir", t.TempDir(), "--webhook-secret", "s"}, key, "E2B_WEBHOOK_SECRET"},
		{"no key", []string{"--state-dir", t.TempDir()}, env(nil), "E2B_API_KEY"},
		{"missing key file", []string{"--state-dir", t.TempDir(), "--api-key-file", "/nonexistent/key"}, key, "api-key-file"},
		{"bad key", []string{"--state-dir", t.TempDir()}, env(map[string]string{"E2B_API_KEY": "sk_nope"}), "APIKey"},
		{"bad isolation", []string{"--state-dir", t.TempDir(), "--isolation", "vm"}, key, "isolation"},
		{"secretless hook", []string{"--state-dir", t.TempDir(), "--webhook-url", "http://x"}, key, "WebhookSecret"},
		{"bad log format", []string{"--state-dir", t.TempDir(), "--log-format", "xml"}, key, "log-format"},
		{"bad size", []string{"--state-dir", t.TempDir(), "--memory-limit", "lots"}, key, "size"},
		{"tiny memory", []string{"--state-dir", t.TempDir(), "--memory-limit", "1MiB"}, key, "memory"},
		{"bad weight", []string{"--state-dir", t.TempDir(), "--cpu-weight", "20000"}, key, "weight"},
		{"unknown flag", []string{"--nope"}, key, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs testkit.SyncBuffer
			err := run(context.Background(), tt.args, tt.getenv, &logs)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error()+logs.String(), tt.want) {
				t.Fatalf("error %q (log %q) does not mention %q", err, logs.String(), tt.want)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "2GiB": 2 << 30, "256MiB": 256 << 20, "5G": 5 << 30, "64m": 64 << 20, "1TiB": 1 << 40} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "GiB", "2XB", "1.5G"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) accepted", in)
		}
	}
}
