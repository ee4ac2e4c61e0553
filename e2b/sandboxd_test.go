package e2b_test

// Integration tests: the client against a real sandboxd on loopback (sandman/sandboxd), an
// independent implementation of the provider's contract.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

var fastDelays = []time.Duration{20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}

// clientFor configures a client exactly as Sandman does in production: from the environment.
func clientFor(t testing.TB, h *sandboxdtest.Host, edit ...func(*e2b.Config)) *e2b.Client {
	t.Helper()
	env := map[string]string{"E2B_API_URL": h.APIURL, "E2B_API_KEY": h.APIKey, "E2B_DOMAIN": h.Domain}
	cfg := e2b.FromEnv(func(k string) string { return env[k] })
	cfg.RetryDelays = fastDelays
	for _, e := range edit {
		e(&cfg)
	}
	c, err := e2b.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const serverJS = `const http = require('http');
let hits = 0;
http.createServer((req, res) => {
  hits++;
  res.end('hits=' + hits + ' greeting=' + process.env.GREETING);
}).listen(Number(process.env.PORT), '0.0.0.0', () => console.log('listening'));
`

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// getPreview fetches url until it answers 200 or within passes.
func getPreview(t *testing.T, hc *http.Client, url string, within time.Duration) string {
	t.Helper()
	var body string
	testkit.Eventually(t, within, "preview "+url+" to answer 200", func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		body = string(b)
		return nil
	})
	return body
}

func previewStatus(hc *http.Client, url string) int {
	resp, err := hc.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

func run(t *testing.T, c *e2b.Client, sb e2b.Sandbox, cmd string) e2b.ProcessResult {
	t.Helper()
	p, err := c.StartProcess(t.Context(), sb, e2b.ProcessParams{Command: cmd})
	if err != nil {
		t.Fatalf("start %q: %v", cmd, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	res, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait %q: %v", cmd, err)
	}
	return res
}

func TestSandboxLifecycle(t *testing.T) {
	t.Parallel()
	h := sandboxdtest.Start(t)
	c := clientFor(t, h)
	ctx := t.Context()
	started := time.Now()
	suite := "lifecycle-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	md := map[string]string{"suite": suite, "project": "p1", "odd": "a b&c=d/é"}

	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600, Metadata: md, Secure: true,
		OnTimeout: e2b.OnTimeoutKill, EnvVars: map[string]string{"GREETING": "hello"}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if sb.ID == "" || sb.EnvdAccessToken == "" || sb.EnvdVersion == "" {
		t.Fatalf("created %+v: want an ID, an envd token (secure) and a version", sb)
	}

	// envd: files, a short command, a background dev server.
	port := freePort(t)
	if err := c.UploadFiles(ctx, sb, []e2b.File{
		{Path: "app/server.js", Content: []byte(serverJS)},
		{Path: "app/package.json", Content: []byte(`{"name":"tiny","version":"1.0.0"}`)},
		{Path: "app/deep/dir/note.txt", Content: []byte("nested")},
	}); err != nil {
		t.Fatalf("upload: %v", err)
	}
	res := run(t, c, sb, "cat app/deep/dir/note.txt && echo; echo to-stderr >&2; exit 3")
	if res.ExitCode != 3 || res.Stdout != "nested\n" || res.Stderr != "to-stderr\n" {
		t.Fatalf("short command result %+v", res)
	}
	dev, err := c.StartProcess(ctx, sb, e2b.ProcessParams{Command: "node server.js", Cwd: "app", Tag: "dev",
		Envs: map[string]string{"PORT": strconv.Itoa(port)}})
	if err != nil {
		t.Fatalf("start dev server: %v", err)
	}
	dev.Detach()

	hc := &http.Client{Transport: e2b.NewHTTPTransport(), Timeout: 5 * time.Second}
	url := c.PreviewURL(sb, port)
	if !strings.HasPrefix(url, "http://") || !strings.Contains(url, sb.ID) {
		t.Fatalf("preview URL %q", url)
	}
	if body := getPreview(t, hc, url, 10*time.Second); body != "hits=1 greeting=hello" {
		t.Fatalf("preview answered %q", body)
	}
	procs, err := c.ListProcesses(ctx, sb)
	if err != nil || !slices.ContainsFunc(procs, func(p e2b.ProcessInfo) bool { return p.PID == dev.PID && p.Tag == "dev" }) {
		t.Fatalf("ListProcesses = %+v, %v; want pid %d tagged dev", procs, err, dev.PID)
	}

	// Pause with memory, twice: the second is the provider's 409, which is success.
	if paused, err := c.Pause(ctx, sb.ID, true); err != nil || !paused {
		t.Fatalf("pause: %v, %v", paused, err)
	}
	if paused, err := c.Pause(ctx, sb.ID, true); err != nil || paused {
		t.Fatalf("second pause: %v, %v; want false, nil", paused, err)
	}
	got, err := c.GetSandbox(ctx, sb.ID)
	if err != nil || got.State != e2b.StatePaused || got.Metadata["odd"] != md["odd"] {
		t.Fatalf("get while paused = %+v, %v", got, err)
	}
	if st := previewStatus(hc, url); st == http.StatusOK {
		t.Error("a paused sandbox's preview still answers")
	}
	if err := c.SetTimeout(ctx, sb.ID, 60); !errors.Is(err, e2b.ErrNotFound) {
		t.Errorf("set timeout while paused = %v, want ErrNotFound", err)
	}

	// Connect resumes (201), then only extends (200). Memory survived: the counter goes on.
	resumedSb, resumed, err := c.Connect(ctx, sb.ID, 300)
	if err != nil || !resumed {
		t.Fatalf("connect: resumed=%v err=%v", resumed, err)
	}
	if _, resumed, err := c.Connect(ctx, sb.ID, 300); err != nil || resumed {
		t.Fatalf("second connect: resumed=%v err=%v", resumed, err)
	}
	if body := getPreview(t, hc, c.PreviewURL(resumedSb, port), 10*time.Second); body != "hits=2 greeting=hello" {
		t.Fatalf("after a memory resume the preview answered %q", body)
	}

	if err := c.SetTimeout(ctx, sb.ID, 120); err != nil {
		t.Fatalf("set timeout: %v", err)
	}
	got, err = c.GetSandbox(ctx, sb.ID)
	if err != nil || got.State != e2b.StateRunning {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if left := time.Until(got.EndAt); left < 100*time.Second || left > 125*time.Second {
		t.Errorf("end in %s after set timeout 120s", left)
	}
	if err := c.Refresh(ctx, sb.ID, 30); err != nil {
		t.Errorf("refresh: %v", err)
	}

	// List with the metadata filter over more than one page.
	for range 2 {
		if _, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600, Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600,
		Metadata: map[string]string{"suite": suite, "project": "other"}}); err != nil {
		t.Fatal(err)
	}
	page1, err := c.ListSandboxes(ctx, e2b.ListParams{Metadata: md, Limit: 2, States: []e2b.State{e2b.StateRunning, e2b.StatePaused}})
	if err != nil || len(page1.Sandboxes) != 2 || page1.NextToken == "" {
		t.Fatalf("page 1 = %+v, %v", page1, err)
	}
	if page1.TotalRunning != 3 {
		t.Errorf("X-Total-Running = %d, want 3", page1.TotalRunning)
	}
	page2, err := c.ListSandboxes(ctx, e2b.ListParams{Metadata: md, Limit: 2, NextToken: page1.NextToken})
	if err != nil || len(page2.Sandboxes) != 1 || page2.NextToken != "" {
		t.Fatalf("page 2 = %+v, %v", page2, err)
	}
	all, err := c.ListAllSandboxes(ctx, e2b.ListParams{Metadata: md, Limit: 2})
	if err != nil || len(all) != 3 {
		t.Fatalf("ListAllSandboxes = %d sandboxes, %v; want 3", len(all), err)
	}
	for _, s := range all {
		if s.Metadata["project"] != "p1" {
			t.Errorf("the metadata filter let %+v through", s)
		}
	}
	suiteOnly, err := c.ListAllSandboxes(ctx, e2b.ListParams{Metadata: map[string]string{"suite": suite}})
	if err != nil || len(suiteOnly) != 4 {
		t.Fatalf("suite filter: %d, %v; want 4", len(suiteOnly), err)
	}

	// Signals: the dev server stops; an unknown PID is ErrNotFound.
	if err := c.SendSignal(ctx, sb, dev.PID, e2b.SignalTerm); err != nil {
		t.Fatalf("SIGTERM the dev server: %v", err)
	}
	testkit.Until(t, 5*time.Second, "the dev server to stop answering", func() bool { return previewStatus(hc, url) != http.StatusOK })
	if err := c.SendSignal(ctx, sb, 999999, e2b.SignalKill); !errors.Is(err, e2b.ErrNotFound) {
		t.Errorf("signal to an unknown pid = %v, want ErrNotFound", err)
	}

	// Kill: gone for every call after it.
	if err := c.Kill(ctx, sb.ID); err != nil {
		t.Fatalf("kill: %v", err)
	}
	if _, err := c.GetSandbox(ctx, sb.ID); !errors.Is(err, e2b.ErrNotFound) {
		t.Fatalf("get after kill = %v, want ErrNotFound", err)
	}
	if err := c.Kill(ctx, sb.ID); !errors.Is(err, e2b.ErrNotFound) {
		t.Errorf("second kill = %v, want ErrNotFound", err)
	}
	if _, err := c.Pause(ctx, sb.ID, true); !errors.Is(err, e2b.ErrNotFound) {
		t.Errorf("pause after kill = %v, want ErrNotFound", err)
	}
	if _, _, err := c.Connect(ctx, sb.ID, 60); !errors.Is(err, e2b.ErrNotFound) {
		t.Errorf("connect after kill = %v, want ErrNotFound", err)
	}

	// The events API tells the story, in order.
	want := []string{e2b.EventCreated, e2b.EventPaused, e2b.EventResumed, e2b.EventUpdated, e2b.EventKilled}
	var evs []e2b.Event
	testkit.Until(t, 5*time.Second, "the killed event in the events API", func() bool {
		evs, err = c.ListEvents(ctx, e2b.EventsParams{SandboxID: sb.ID, OrderAsc: true})
		return err == nil && len(evs) > 0 && evs[len(evs)-1].Type == e2b.EventKilled
	})
	var types []string
	for _, ev := range evs {
		if ev.SandboxID != sb.ID || ev.Timestamp.Before(started.Add(-time.Second)) {
			t.Errorf("event %+v", ev)
		}
		if !slices.Contains(types, ev.Type) {
			types = append(types, ev.Type)
		}
	}
	if !slices.Equal(types, want) {
		t.Errorf("event types in order = %v, want %v", types, want)
	}
	if last := evs[len(evs)-1]; last.KillReason != e2b.KillReasonRequest || last.Metadata["project"] != "p1" {
		t.Errorf("killed event = %+v", last)
	}
	paused, err := c.ListEvents(ctx, e2b.EventsParams{SandboxID: sb.ID, Types: []string{e2b.EventPaused}})
	if err != nil || len(paused) != 1 {
		t.Errorf("types filter: %d events, %v; want the one pause (the 409 pause emits none)", len(paused), err)
	}
	caught, complete, err := c.CatchUpEvents(ctx, started.Add(-time.Second), 5)
	if err != nil || !complete {
		t.Fatalf("catch up: complete=%v err=%v", complete, err)
	}
	var created int
	for i, ev := range caught {
		if i > 0 && ev.Timestamp.Before(caught[i-1].Timestamp) {
			t.Fatal("catch-up events out of order")
		}
		if ev.Type == e2b.EventCreated {
			created++
		}
	}
	if created != 4 {
		t.Errorf("catch-up saw %d created events, want 4", created)
	}
}

// The E2B_SANDBOX_URL override sends envd traffic to one base URL, naming the sandbox in
// headers; a filesystem-only pause survives a restart of the host and resumes cold.
func TestSandboxURLOverrideAndFilesystemSnapshot(t *testing.T) {
	t.Parallel()
	h := sandboxdtest.Start(t)
	c := clientFor(t, h, func(cfg *e2b.Config) { cfg.SandboxURL = h.SandboxURL })
	ctx := t.Context()
	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UploadFiles(ctx, sb, []e2b.File{{Path: "keep.txt", Content: []byte("survives")}}); err != nil {
		t.Fatalf("upload via E2B_SANDBOX_URL: %v", err)
	}
	sleeper, err := c.StartProcess(ctx, sb, e2b.ProcessParams{Command: "sleep 600", Tag: "sleeper"})
	if err != nil {
		t.Fatal(err)
	}
	sleeper.Detach()

	// A secure sandbox's envd refuses a wrong token.
	if _, err := c.ListProcesses(ctx, e2b.Sandbox{ID: sb.ID, EnvdAccessToken: "wrong"}); !errors.Is(err, e2b.ErrAuth) {
		t.Errorf("wrong envd token = %v, want ErrAuth", err)
	}

	if paused, err := c.Pause(ctx, sb.ID, false); err != nil || !paused {
		t.Fatalf("filesystem-only pause: %v, %v", paused, err)
	}
	h.Restart(t)
	c = clientFor(t, h, func(cfg *e2b.Config) { cfg.SandboxURL = h.SandboxURL })
	resumedSb, resumed, err := c.Connect(ctx, sb.ID, 300)
	if err != nil || !resumed {
		t.Fatalf("connect after restart: %v, %v", resumed, err)
	}
	if res := run(t, c, resumedSb, "cat keep.txt"); res.Stdout != "survives" {
		t.Errorf("file after a filesystem snapshot: %+v", res)
	}
	procs, err := c.ListProcesses(ctx, resumedSb)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.Tag == "sleeper" {
			t.Errorf("a cold boot kept process %+v", p)
		}
	}
}

func TestFaultsRetriedAndRateLimits(t *testing.T) {
	t.Parallel()
	h := sandboxdtest.Start(t)
	c := clientFor(t, h)
	ctx := t.Context()
	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600})
	if err != nil {
		t.Fatal(err)
	}

	h.InjectFault(t, sandboxd.Fault{Route: "GET /sandboxes/{sandboxID}", Status: 500, Count: 2})
	start := time.Now()
	if _, err := c.GetSandbox(ctx, sb.ID); err != nil {
		t.Fatalf("get through two 500s: %v", err)
	}
	if took := time.Since(start); took < fastDelays[0]+fastDelays[1] {
		t.Errorf("two retries took %s, want ≥ %s of backoff", took, fastDelays[0]+fastDelays[1])
	}

	h.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes/{sandboxID}/connect", Status: 429, RetryAfterSeconds: 1, Count: 1})
	start = time.Now()
	if _, _, err := c.Connect(ctx, sb.ID, 300); err != nil {
		t.Fatalf("connect through a 429: %v", err)
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("connect retried after %s, want ≥ 1s (Retry-After)", took)
	}

	// Retry-After beyond the caller's deadline: no waiting, a typed error.
	h.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes/{sandboxID}/connect", Status: 429, RetryAfterSeconds: 30, Count: 1})
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, _, err = c.Connect(short, sb.ID, 300)
	var rl *e2b.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 30*time.Second {
		t.Fatalf("connect with Retry-After 30s and a 2s deadline = %v", err)
	}

	// A hung request is cut by the attempt timeout and retried.
	slow := clientFor(t, h, func(cfg *e2b.Config) { cfg.AttemptTimeout = 300 * time.Millisecond })
	h.InjectFault(t, sandboxd.Fault{Route: "GET /v2/sandboxes", LatencyMs: 2000, Count: 1})
	if page, err := slow.ListSandboxes(ctx, e2b.ListParams{}); err != nil || len(page.Sandboxes) != 1 {
		t.Fatalf("list after a hung attempt = %+v, %v", page, err)
	}

	// A create that failed with a 500 is not repeated blindly...
	h.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes", Status: 500, Count: 1})
	if _, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base"}); !errors.Is(err, e2b.ErrTransient) {
		t.Fatalf("create through a 500 = %v, want ErrTransient (not retried)", err)
	}
	// ...but with an idempotency key the client checks and then repeats, creating exactly one.
	h.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes", Status: 502, Count: 1})
	made, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", IdempotencyKey: "build-7"})
	if err != nil {
		t.Fatalf("keyed create through a 502: %v", err)
	}
	keyed, err := c.ListAllSandboxes(ctx, e2b.ListParams{Metadata: map[string]string{e2b.CreateKeyMetadata: "build-7"}})
	if err != nil || len(keyed) != 1 || keyed[0].ID != made.ID {
		t.Fatalf("sandboxes with the key: %+v, %v; want exactly the one returned", keyed, err)
	}

	// Killed from the dashboard: the client just sees it gone.
	h.KillFromDashboard(t, sb.ID)
	if _, err := c.GetSandbox(ctx, sb.ID); !errors.Is(err, e2b.ErrNotFound) {
		t.Fatalf("get after a dashboard kill = %v", err)
	}

	// 401 is typed and not retried.
	bad := clientFor(t, h, func(cfg *e2b.Config) { cfg.APIKey = "e2b_" + strings.Repeat("0", 40) })
	if _, err := bad.ListSandboxes(ctx, e2b.ListParams{}); !errors.Is(err, e2b.ErrAuth) {
		t.Errorf("wrong key = %v, want ErrAuth", err)
	}
}

type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

// TestCircuitBreakerAgainstSandboxd: sandboxd's 503s open the breaker, no call reaches sandboxd
// while it is open, a single probe goes through after the open period, and the breaker closes
// once sandboxd answers again. Nothing here depends on how fast the machine is: the open period
// of the first client outlasts any test, and the second client's transitions are read as the
// events it logs.
func TestCircuitBreakerAgainstSandboxd(t *testing.T) {
	t.Parallel()
	h := sandboxdtest.Start(t)
	ct := &countingTransport{next: e2b.NewHTTPTransport()}
	c := clientFor(t, h, func(cfg *e2b.Config) {
		cfg.BreakerOpenFor = time.Hour
		cfg.HTTPClient = &http.Client{Transport: ct}
	})
	ctx := t.Context()
	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600})
	if err != nil {
		t.Fatal(err)
	}
	h.InjectFault(t, sandboxd.Fault{Route: "*", Status: 503})
	// First call: 1 attempt + 3 retries, all 503. The second call's first attempt is the 5th
	// consecutive failure: the breaker opens and that call stops retrying at once.
	if _, err := c.GetSandbox(ctx, sb.ID); !errors.Is(err, e2b.ErrTransient) {
		t.Fatalf("first call = %v", err)
	}
	if _, err := c.GetSandbox(ctx, sb.ID); !errors.Is(err, e2b.ErrCircuitOpen) {
		t.Fatalf("second call = %v, want ErrCircuitOpen", err)
	}
	if n := ct.n.Load(); n != 1+5 {
		t.Errorf("%d requests, want 1 create + 5 failed attempts", n)
	}
	before := ct.n.Load()
	for range 20 {
		if _, err := c.GetSandbox(ctx, sb.ID); !errors.Is(err, e2b.ErrCircuitOpen) {
			t.Fatalf("while open = %v", err)
		}
	}
	if ct.n.Load() != before {
		t.Error("calls reached sandboxd while the breaker was open")
	}

	// A client without retries, so that each call is one attempt, and a short open period.
	var logs testkit.LogRecorder
	probing := clientFor(t, h, func(cfg *e2b.Config) {
		cfg.BreakerOpenFor = 50 * time.Millisecond
		cfg.RetryDelays = []time.Duration{}
		cfg.Logger = logs.Logger()
	})
	for range 5 {
		if _, err := probing.GetSandbox(ctx, sb.ID); !errors.Is(err, e2b.ErrTransient) {
			t.Fatalf("call against the failing sandboxd = %v", err)
		}
	}
	halfOpen := func() bool { return probing.CircuitState() == "half-open" }
	// Still failing after the open period: the single probe fails and it opens again.
	testkit.Until(t, 10*time.Second, "the breaker to let a probe through", halfOpen)
	if _, err := probing.GetSandbox(ctx, sb.ID); !errors.Is(err, e2b.ErrTransient) {
		t.Fatalf("probe = %v", err)
	}
	// The provider recovers: the next probe succeeds and closes the breaker.
	h.ClearFaults(t)
	testkit.Until(t, 10*time.Second, "the breaker to let a second probe through", halfOpen)
	if _, err := probing.GetSandbox(ctx, sb.ID); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	var got []string
	for _, r := range logs.Records("e2b circuit breaker") {
		got = append(got, r["from"]+"→"+r["to"])
	}
	want := []string{"closed→open", "open→half-open", "half-open→open", "open→half-open", "half-open→closed"}
	if !slices.Equal(got, want) {
		t.Fatalf("breaker transitions %q, want %q", got, want)
	}
}

type receiver struct {
	mu         sync.Mutex
	deliveries []delivery
}

type delivery struct {
	header http.Header
	body   []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.deliveries = append(rc.deliveries, delivery{r.Header.Clone(), b})
	rc.mu.Unlock()
}

func (rc *receiver) find(secret string, match func(e2b.Event) bool) (e2b.Event, delivery, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, d := range rc.deliveries {
		if !e2b.VerifyWebhookSignature(secret, d.body, d.header.Get("e2b-signature")) {
			continue
		}
		ev, err := e2b.ParseWebhook(d.body)
		if err == nil && match(ev) {
			return ev, d, true
		}
	}
	return e2b.Event{}, delivery{}, false
}

func TestWebhooksAgainstSandboxd(t *testing.T) {
	t.Parallel()
	h := sandboxdtest.Start(t)
	c := clientFor(t, h)
	ctx := t.Context()

	// Plain CRUD.
	hook, err := c.CreateWebhook(ctx, e2b.WebhookParams{Name: "crud", URL: "http://127.0.0.1:1/crud", Enabled: true,
		Events: []string{e2b.EventKilled}, SignatureSecret: "s1"})
	if err != nil || hook.ID == "" || hook.URL != "http://127.0.0.1:1/crud" || !hook.Enabled {
		t.Fatalf("create webhook = %+v, %v", hook, err)
	}
	list, err := c.ListWebhooks(ctx)
	if err != nil || !slices.ContainsFunc(list, func(w e2b.Webhook) bool { return w.ID == hook.ID }) {
		t.Fatalf("list = %+v, %v", list, err)
	}
	off := false
	if err := c.UpdateWebhook(ctx, hook.ID, e2b.WebhookUpdate{Enabled: &off, Events: []string{e2b.EventPaused, e2b.EventKilled}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetWebhook(ctx, hook.ID)
	if err != nil || got.Enabled || len(got.Events) != 2 || got.Name != "crud" || got.TeamID == "" || got.CreatedAt.IsZero() {
		t.Fatalf("after update = %+v, %v", got, err)
	}
	if err := c.DeleteWebhook(ctx, hook.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWebhook(ctx, hook.ID); !errors.Is(err, e2b.ErrNotFound) {
		t.Fatalf("get deleted webhook = %v", err)
	}
	if err := c.DeleteWebhook(ctx, hook.ID); !errors.Is(err, e2b.ErrNotFound) {
		t.Errorf("delete twice = %v", err)
	}
	if _, err := c.CreateWebhook(ctx, e2b.WebhookParams{URL: "http://x", SignatureSecret: "s", Events: []string{"nope"}}); !errors.Is(err, e2b.ErrInvalid) {
		t.Errorf("unknown event type = %v, want ErrInvalid", err)
	}

	// EnsureWebhook converges on one registration per URL, enabled, with our secret.
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	for range 2 { // duplicates, as two instances starting together could leave
		if _, err := c.CreateWebhook(ctx, e2b.WebhookParams{Name: "dup", URL: srv.URL, Enabled: false,
			Events: []string{e2b.EventPaused}, SignatureSecret: "old-secret"}); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "whsec-test"
	ensured, err := c.EnsureWebhook(ctx, srv.URL, secret, nil)
	if err != nil {
		t.Fatalf("ensure: %v", err)
	}
	again, err := c.EnsureWebhook(ctx, srv.URL, secret, nil)
	if err != nil || again.ID != ensured.ID {
		t.Fatalf("second ensure = %+v, %v; want the same webhook", again, err)
	}
	list, _ = c.ListWebhooks(ctx)
	var mine []e2b.Webhook
	for _, w := range list {
		if w.URL == srv.URL {
			mine = append(mine, w)
		}
	}
	if len(mine) != 1 || !mine[0].Enabled || len(mine[0].Events) != len(e2b.AllEventTypes) {
		t.Fatalf("registrations for our URL = %+v", mine)
	}

	// Deliveries are signed with our secret and parse as snake_case events.
	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600, Metadata: map[string]string{"project": "p9"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	var killed e2b.Event
	var d delivery
	testkit.Until(t, 5*time.Second, "a signed killed delivery", func() bool {
		var ok bool
		killed, d, ok = rc.find(secret, func(ev e2b.Event) bool { return ev.SandboxID == sb.ID && ev.Type == e2b.EventKilled })
		return ok
	})
	if killed.KillReason != e2b.KillReasonRequest || killed.Metadata["project"] != "p9" {
		t.Errorf("killed delivery = %+v", killed)
	}
	if d.header.Get("e2b-webhook-id") != ensured.ID || d.header.Get("e2b-delivery-id") == "" || d.header.Get("e2b-signature-version") != "v1" {
		t.Errorf("delivery headers = %v", d.header)
	}
	if _, _, ok := rc.find(secret, func(ev e2b.Event) bool { return ev.SandboxID == sb.ID && ev.Type == e2b.EventCreated }); !ok {
		t.Error("no signed created delivery")
	}
	if _, _, ok := rc.find("old-secret", func(e2b.Event) bool { return true }); ok {
		t.Error("a delivery was signed with the replaced secret")
	}
}

// sandboxd's static webhook (--webhook-url/--webhook-secret) signs what VerifyWebhookSignature
// accepts.
func TestStaticWebhookSignature(t *testing.T) {
	t.Parallel()
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	h := sandboxdtest.Start(t, sandboxdtest.WithWebhook(srv.URL, "static-secret"))
	c := clientFor(t, h)
	sb, err := c.CreateSandbox(t.Context(), e2b.CreateParams{Template: "base"})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 5*time.Second, "a created delivery signed with the static secret", func() bool {
		_, _, ok := rc.find("static-secret", func(ev e2b.Event) bool { return ev.SandboxID == sb.ID && ev.Type == e2b.EventCreated })
		return ok
	})
}
