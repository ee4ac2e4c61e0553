// Package sandboxdtest runs a real sandboxd on loopback for tests of any
// package: random ports, a temporary state directory, an API key of the
// provider's format, and helpers for the admin (fault injection) endpoint.
package sandboxdtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandman/internal/testkit"
	"sandman/sandboxd"
)

// Host is a running sandboxd. Its fields change on Restart (new ports).
type Host struct {
	// APIURL is E2B_API_URL, e.g. http://127.0.0.1:41234.
	APIURL string
	// SandboxURL is E2B_SANDBOX_URL, e.g. http://localhost:41235: envd is
	// reached there with the E2b-Sandbox-Id and E2b-Sandbox-Port headers.
	SandboxURL string
	// Domain is the sandbox domain, e.g. localhost:41235; port P of sandbox
	// ID answers at http://P-ID.localhost:41235/.
	Domain string
	// APIKey is E2B_API_KEY (e2b_ and 40 hex characters).
	APIKey   string
	StateDir string
	Server   *sandboxd.Server

	cfg sandboxd.Config
	// pickUIDBase: the uid base was chosen here, and may be chosen again
	// until a first start succeeds.
	pickUIDBase bool
}

// UIDBase picks a random uid range for a root sandboxd under test, away
// from the default (a sandboxd of `make run`) and from the uids tests run
// unprivileged sandboxd as: every root sandboxd must have a range of its
// own (sandboxd refuses to start on one in use).
func UIDBase() int {
	return 1_000_000_000 + mrand.IntN(12_000)*sandboxd.UIDRangeSize
}

// Option configures Start.
type Option func(*sandboxd.Config)

// WithWebhook makes sandboxd deliver every event to url, signed with secret
// (sandboxd's --webhook-url and --webhook-secret).
func WithWebhook(url, secret string) Option {
	return func(c *sandboxd.Config) { c.WebhookURL, c.WebhookSecret = url, secret }
}

// WithStateDir uses dir instead of a fresh temporary directory.
func WithStateDir(dir string) Option {
	return func(c *sandboxd.Config) { c.StateDir = dir }
}

// WithConfig edits the configuration freely (isolation, retry timings...).
func WithConfig(f func(*sandboxd.Config)) Option { return f }

// Start runs sandboxd on 127.0.0.1 with random ports and stops it when the
// test ends. Webhook retries start at 50ms so tests stay fast. Logs go to
// stderr when SANDBOXD_TEST_LOG is set. Sandboxes are isolated as sandboxd
// does by default; where that cannot work (no bubblewrap, no user
// namespaces) the test runs them unisolated and logs it, unless CI=true,
// where that fails the test. In the quick lane (testkit.Lane) it skips the test.
func Start(t testing.TB, opts ...Option) *Host {
	t.Helper()
	testkit.NotInQuickLane(t, "a sandboxd")
	key := make([]byte, 20)
	rand.Read(key)
	cfg := sandboxd.Config{
		APIAddr:           "127.0.0.1:0",
		SandboxAddr:       "127.0.0.1:0",
		APIKey:            "e2b_" + hex.EncodeToString(key),
		WebhookRetryDelay: 50 * time.Millisecond,
		WebhookTimeout:    5 * time.Second,
		Logger:            slog.New(slog.DiscardHandler),
		// Tests inject the provider's misbehaviours (InjectFault and the
		// rest); a production sandboxd takes none.
		FaultInjection: true,
	}
	if os.Getenv("SANDBOXD_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.StateDir == "" {
		cfg.StateDir = StateDir(t)
	}
	// Many hosts run at once in a test run: smaller disk images keep their
	// sum within the disk budget of a developer's machine.
	if cfg.Limits.Disk == 0 {
		cfg.Limits.Disk = 1 << 30
	}
	pickUIDBase := cfg.UIDBase == 0
	if pickUIDBase {
		cfg.UIDBase = UIDBase()
	}
	h := &Host{cfg: cfg, pickUIDBase: pickUIDBase}
	h.start(t)
	t.Cleanup(func() { h.stop(t) })
	return h
}

func (h *Host) start(t testing.TB) {
	t.Helper()
	srv, err := sandboxd.New(h.cfg)
	// Another test's sandboxd (in this process or another) may hold the
	// uid range picked at random: pick again, before any sandbox has a uid.
	for try := 0; sandboxd.ErrUIDRangeTaken(err) && h.pickUIDBase && try < 20; try++ {
		h.cfg.UIDBase = UIDBase()
		srv, err = sandboxd.New(h.cfg)
	}
	if sandboxd.ErrNoIsolation(err) && h.cfg.Isolation == "" && os.Getenv("CI") != "true" {
		// A developer's machine without bubblewrap or user namespaces still
		// runs the suite, without isolation, and says so; CI must isolate.
		t.Logf("sandboxd cannot isolate here, so this test's sandboxes run unisolated (CI=true fails instead): %v", err)
		h.cfg.Isolation = sandboxd.IsolationNone
		srv, err = sandboxd.New(h.cfg)
	}
	if err != nil {
		t.Fatalf("sandboxd: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("sandboxd: %v", err)
	}
	h.Server = srv
	h.APIURL, h.SandboxURL, h.Domain = srv.APIURL(), srv.SandboxURL(), srv.SandboxDomain()
	h.APIKey, h.StateDir = h.cfg.APIKey, h.cfg.StateDir
	h.pickUIDBase = false // its sandboxes' records now hold uids of this range
	// A restart comes back on the same addresses, as a restarted host does: clients configured
	// with them (a Sandman instance) keep working.
	h.cfg.APIAddr = strings.TrimPrefix(h.APIURL, "http://")
	h.cfg.SandboxAddr = "127.0.0.1:" + h.Domain[strings.LastIndex(h.Domain, ":")+1:]
}

func (h *Host) stop(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Server.Shutdown(ctx); err != nil {
		t.Errorf("sandboxd shutdown: %v", err)
	}
}

// Restart stops sandboxd cleanly and starts it again on the same state
// directory, API key and addresses.
func (h *Host) Restart(t testing.TB) {
	t.Helper()
	h.stop(t)
	h.start(t)
}

// RestartWith stops sandboxd cleanly, edits its configuration and starts it again on the same
// state directory, API key and addresses: an upgrade, say.
func (h *Host) RestartWith(t testing.TB, edit func(*sandboxd.Config)) {
	t.Helper()
	h.stop(t)
	edit(&h.cfg)
	h.start(t)
}

// StateDir returns a fresh temporary state directory that sandbox users
// can reach: root sandboxd runs each sandbox as a host uid of its own,
// which must be able to search every directory above the sandbox's files
// (t.TempDir's are private to the test's user).
func StateDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// InjectFault adds a fault through the admin endpoint.
func (h *Host) InjectFault(t testing.TB, f sandboxd.Fault) {
	t.Helper()
	body, _ := json.Marshal(f)
	h.admin(t, http.MethodPost, "/_sandboxd/faults", body, http.StatusCreated)
}

// ClearFaults removes every injected fault.
func (h *Host) ClearFaults(t testing.TB) {
	t.Helper()
	h.admin(t, http.MethodDelete, "/_sandboxd/faults", nil, http.StatusNoContent)
}

// KillFromDashboard kills a sandbox as the provider's dashboard would: the
// client made no call, and a killed event (kill_reason "request") follows.
func (h *Host) KillFromDashboard(t testing.TB, sandboxID string) {
	t.Helper()
	h.admin(t, http.MethodPost, "/_sandboxd/sandboxes/"+sandboxID+"/kill", nil, http.StatusNoContent)
}

// Lose removes a sandbox as the provider sometimes loses one (E2B#1381): gone, with no killed
// event and no webhook.
func (h *Host) Lose(t testing.TB, sandboxID string) {
	t.Helper()
	h.admin(t, http.MethodPost, "/_sandboxd/sandboxes/"+sandboxID+"/lose", nil, http.StatusNoContent)
}

// DamageAtResume damages files of a paused sandbox when it is next resumed (sandboxd.DamageDelete
// or sandboxd.DamageCorrupt), once. Paths are the sandbox's (absolute, or relative to /home/user).
func (h *Host) DamageAtResume(t testing.TB, sandboxID, damage string, paths ...string) {
	t.Helper()
	h.InjectFault(t, sandboxd.Fault{SandboxID: sandboxID, Files: paths, Damage: damage, Count: 1})
}

func (h *Host) admin(t testing.TB, method, path string, body []byte, want int) {
	t.Helper()
	req, err := http.NewRequest(method, h.APIURL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", h.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("sandboxd admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("sandboxd admin %s %s: %d %s", method, path, resp.StatusCode, b)
	}
}

// PreviewURL is the browser URL of a sandbox port, e.g.
// http://3000-i123.localhost:41235/.
func (h *Host) PreviewURL(sandboxID string, port int) string {
	return "http://" + strconv.Itoa(port) + "-" + sandboxID + "." + h.Domain + "/"
}

// HTTPClient returns a client that reaches *.localhost hosts: browsers send
// them to loopback by themselves, but Go's resolver (and glibc's) do not.
func (h *Host) HTTPClient() *http.Client {
	return &http.Client{Transport: LoopbackTransport(), Timeout: 30 * time.Second}
}

// LoopbackTransport is an http.Transport that dials every host ending in
// ".localhost" on 127.0.0.1, keeping the Host header (which carries the
// sandbox routing).
func LoopbackTransport() *http.Transport {
	var d net.Dialer
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err == nil && (host == "localhost" || strings.HasSuffix(host, ".localhost")) {
			addr = net.JoinHostPort("127.0.0.1", port)
		}
		return d.DialContext(ctx, network, addr)
	}
	return tr
}
