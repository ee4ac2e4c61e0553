package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const sandboxJSON = `{"sandboxID":"iabc","templateID":"base","envdVersion":"0.6.13","envdAccessToken":"tok","domain":null}`

func TestRetryTransientThenSucceed(t *testing.T) {
	t.Parallel()
	s := &script{statuses: []int{500, 503, 200}, body: sandboxJSON}
	c, _ := newFakeClient(t, s)
	sb, err := c.GetSandbox(t.Context(), "iabc")
	if err != nil {
		t.Fatalf("GetSandbox: %v", err)
	}
	if sb.ID != "iabc" || sb.EnvdAccessToken != "tok" || sb.Domain != "" {
		t.Errorf("sandbox = %+v", sb)
	}
	gaps := s.gaps()
	if len(gaps) != 2 {
		t.Fatalf("%d attempts, want 3", len(gaps)+1)
	}
	for i, g := range gaps {
		if g < fastDelays[i] {
			t.Errorf("retry %d came after %s, want ≥ %s", i+1, g, fastDelays[i])
		}
	}
}

func TestRetryGivesUpAfterConfiguredDelays(t *testing.T) {
	t.Parallel()
	s := &script{statuses: []int{502}}
	c, _ := newFakeClient(t, s)
	start := time.Now()
	err := c.Kill(t.Context(), "iabc")
	if !errors.Is(err, ErrTransient) {
		t.Fatalf("err = %v, want ErrTransient", err)
	}
	if n := s.calls.Load(); n != 4 {
		t.Errorf("%d attempts, want 1 + 3 retries", n)
	}
	if took := time.Since(start); took < 70*time.Millisecond {
		t.Errorf("gave up after %s, want ≥ 10+20+40ms of backoff", took)
	}
}

func TestNoRetryOnDefinitiveAnswers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		want   error
	}{{404, ErrNotFound}, {401, ErrAuth}, {403, ErrAuth}, {400, ErrInvalid}, {409, ErrConflict}} {
		s := &script{statuses: []int{tt.status}}
		c, _ := newFakeClient(t, s)
		err := c.SetTimeout(t.Context(), "iabc", 60)
		if !errors.Is(err, tt.want) {
			t.Errorf("%d: err = %v, want %v", tt.status, err, tt.want)
		}
		if n := s.calls.Load(); n != 1 {
			t.Errorf("%d: %d attempts, want 1", tt.status, n)
		}
	}
}

func TestRateLimitHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	s := &script{statuses: []int{429, 200}, body: sandboxJSON, header: http.Header{"Retry-After": {"1"}}}
	c, _ := newFakeClient(t, s)
	sb, resumed, err := c.Connect(t.Context(), "iabc", 60)
	if err != nil || sb.ID != "iabc" || resumed {
		t.Fatalf("Connect = %+v, %v, %v", sb, resumed, err)
	}
	if g := s.gaps(); len(g) != 1 || g[0] < time.Second {
		t.Errorf("retry gaps %v, want one of ≥ 1s (Retry-After), not the 10ms backoff", g)
	}
}

func TestRateLimitBeyondDeadlineFailsAtOnce(t *testing.T) {
	t.Parallel()
	s := &script{statuses: []int{429}, header: http.Header{"Retry-After": {"30"}}}
	c, _ := newFakeClient(t, s)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, _, err := c.Connect(ctx, "iabc", 60)
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 30*time.Second {
		t.Fatalf("err = %v, want *RateLimitedError{30s}", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("waited %s for a Retry-After past the deadline", took)
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("%d attempts, want 1", n)
	}
}

func TestRateLimitWithoutRetryAfterUsesBackoff(t *testing.T) {
	t.Parallel()
	s := &script{statuses: []int{429, 429, 200}, body: `[]`}
	c, _ := newFakeClient(t, s)
	if _, err := c.ListSandboxes(t.Context(), ListParams{}); err != nil {
		t.Fatal(err)
	}
	if n := s.calls.Load(); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

func TestCreateIsNotRepeatedOnAmbiguousFailure(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 502, 504} {
		s := &script{statuses: []int{status, 201}, body: sandboxJSON}
		c, _ := newFakeClient(t, s)
		_, err := c.CreateSandbox(t.Context(), CreateParams{Template: "base"})
		if !errors.Is(err, ErrTransient) {
			t.Errorf("%d: err = %v, want ErrTransient", status, err)
		}
		if n := s.calls.Load(); n != 1 {
			t.Errorf("%d: create sent %d times; a repeat could make a second sandbox", status, n)
		}
	}
}

func TestCreateRepeatsWhenNothingWasDone(t *testing.T) {
	t.Parallel()
	for _, status := range []int{503, 429} {
		s := &script{statuses: []int{status, 201}, body: sandboxJSON}
		c, _ := newFakeClient(t, s)
		sb, err := c.CreateSandbox(t.Context(), CreateParams{Template: "base"})
		if err != nil || sb.ID != "iabc" {
			t.Errorf("%d: CreateSandbox = %+v, %v", status, sb, err)
		}
		if n := s.calls.Load(); n != 2 {
			t.Errorf("%d: %d attempts, want 2", status, n)
		}
	}
}

func TestCreateRepeatsAfterRefusedConnection(t *testing.T) {
	t.Parallel()
	// A closed port: the request provably never reached anyone.
	s := &script{statuses: []int{201}, body: sandboxJSON}
	c, srv := newFakeClient(t, s)
	addr := srv.Listener.Addr().String()
	srv.Close()
	var dials atomic.Int64
	c.http = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		dials.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
	_, err := c.CreateSandbox(t.Context(), CreateParams{Template: "base"})
	if !errors.Is(err, ErrTransient) {
		t.Fatalf("err = %v, want ErrTransient", err)
	}
	if n := dials.Load(); n != 4 {
		t.Errorf("create tried %d times against refused %s, want 4", n, addr)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// With an idempotency key, an ambiguous create is resolved by looking for the key before
// repeating: the sandbox the failed attempt made is returned, and no second one is created.
func TestCreateWithKeyResolvesAmbiguity(t *testing.T) {
	t.Parallel()
	var creates atomic.Int64
	var gotFilter string
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sandboxes", func(w http.ResponseWriter, r *http.Request) {
		creates.Add(1)
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if md, _ := body["metadata"].(map[string]any); md[CreateKeyMetadata] != "build-42" || md["project"] != "p1" {
			t.Errorf("create metadata = %v", body["metadata"])
		}
		// The sandbox is made, but the answer is lost.
		w.WriteHeader(http.StatusBadGateway)
	})
	mux.HandleFunc("GET /v2/sandboxes", func(w http.ResponseWriter, r *http.Request) {
		gotFilter = r.URL.Query().Get("metadata")
		_, _ = w.Write([]byte(`[{"sandboxID":"iabc","templateID":"base","state":"running"}]`))
	})
	mux.HandleFunc("GET /sandboxes/iabc", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"sandboxID":"iabc","templateID":"base","state":"running","envdAccessToken":"tok"}`))
	})
	c, _ := newFakeClient(t, mux)
	sb, err := c.CreateSandbox(t.Context(), CreateParams{Template: "base", IdempotencyKey: "build-42",
		Metadata: map[string]string{"project": "p1"}})
	if err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
	if sb.ID != "iabc" || sb.EnvdAccessToken != "tok" {
		t.Errorf("sandbox = %+v, want the one found with its token", sb)
	}
	if n := creates.Load(); n != 1 {
		t.Errorf("%d creates, want 1", n)
	}
	if gotFilter != CreateKeyMetadata+"=build-42" {
		t.Errorf("lookup filter = %q", gotFilter)
	}
}

func TestCreateWithKeyRepeatsWhenNothingFound(t *testing.T) {
	t.Parallel()
	var creates atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /sandboxes", func(w http.ResponseWriter, r *http.Request) {
		if creates.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(sandboxJSON))
	})
	mux.HandleFunc("GET /v2/sandboxes", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`[]`)) })
	c, _ := newFakeClient(t, mux)
	sb, err := c.CreateSandbox(t.Context(), CreateParams{Template: "base", IdempotencyKey: "k"})
	if err != nil || sb.ID != "iabc" {
		t.Fatalf("CreateSandbox = %+v, %v", sb, err)
	}
	if n := creates.Load(); n != 2 {
		t.Errorf("%d creates, want 2", n)
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-r.Context().Done() // hang until the client gives up on this attempt
			return
		}
		_, _ = w.Write([]byte(sandboxJSON))
	})
	c, _ := newFakeClient(t, h, func(cfg *Config) { cfg.AttemptTimeout = 100 * time.Millisecond })
	if _, err := c.GetSandbox(t.Context(), "iabc"); err != nil {
		t.Fatalf("GetSandbox: %v", err)
	}
	if got := n.Load(); got != 2 {
		t.Errorf("%d attempts, want 2", got)
	}
}

func TestDefaultDeadline(t *testing.T) {
	t.Parallel()
	var sawDeadline atomic.Bool
	c, _ := newFakeClient(t, &script{statuses: []int{200}, body: sandboxJSON}, func(cfg *Config) {
		cfg.CallTimeout = time.Minute
		cfg.AttemptTimeout = time.Hour
	})
	c.http = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if d, ok := r.Context().Deadline(); ok && time.Until(d) <= time.Minute {
			sawDeadline.Store(true)
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
	if _, err := c.GetSandbox(context.Background(), "iabc"); err != nil {
		t.Fatal(err)
	}
	if !sawDeadline.Load() {
		t.Error("a call without a caller deadline must get the default call timeout")
	}
}

func TestCallerDeadlineBoundsRetries(t *testing.T) {
	t.Parallel()
	s := &script{statuses: []int{500}}
	c, _ := newFakeClient(t, s, func(cfg *Config) {
		cfg.RetryDelays = []time.Duration{50 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.GetSandbox(ctx, "iabc")
	if !errors.Is(err, ErrTransient) {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > 400*time.Millisecond {
		t.Errorf("took %s: a retry that cannot finish before the deadline must not be waited for", took)
	}
	if n := s.calls.Load(); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}

func TestCallerCancellationIsNotTransient(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c, _ := newFakeClient(t, h)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err := c.GetSandbox(ctx, "iabc")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTransient) {
		t.Fatalf("err = %v, want context.Canceled and not transient", err)
	}
	if st := c.breaker.Counts(); st.TotalFailures != 0 {
		t.Errorf("a cancellation counted as a breaker failure: %+v", st)
	}
}

func TestRequestShape(t *testing.T) {
	t.Parallel()
	type seen struct{ method, path, query, key, ctype, body string }
	got := make(chan seen, 10)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("X-API-Key"), r.Header.Get("Content-Type"), string(body)}
		switch {
		case strings.HasSuffix(r.URL.Path, "/pause"):
			w.WriteHeader(http.StatusNoContent)
		case strings.HasSuffix(r.URL.Path, "/connect"):
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(sandboxJSON))
		case r.Method == http.MethodPost && r.URL.Path == "/sandboxes":
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(sandboxJSON))
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	c, _ := newFakeClient(t, h)
	ctx := t.Context()
	if _, err := c.CreateSandbox(ctx, CreateParams{Template: "base", TimeoutSec: 600, Secure: true,
		OnTimeout: OnTimeoutPause, FilesystemOnlyPause: true, Metadata: map[string]string{"project": "p"}}); err != nil {
		t.Fatal(err)
	}
	if paused, err := c.Pause(ctx, "iabc", false); err != nil || !paused {
		t.Fatalf("Pause = %v, %v", paused, err)
	}
	if _, resumed, err := c.Connect(ctx, "iabc", 3600); err != nil || !resumed {
		t.Fatalf("Connect = %v, %v; 201 means resumed", resumed, err)
	}
	if err := c.SetTimeout(ctx, "iabc", 90); err != nil {
		t.Fatal(err)
	}
	if err := c.Refresh(ctx, "iabc", 0); err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(ctx, "iabc"); err != nil {
		t.Fatal(err)
	}
	want := []seen{
		{"POST", "/sandboxes", "", testKey, "application/json",
			`{"templateID":"base","timeout":600,"autoPause":true,"autoPauseMemory":false,"autoResume":{"enabled":false},"secure":true,"metadata":{"project":"p"}}`},
		{"POST", "/sandboxes/iabc/pause", "", testKey, "application/json", `{"memory":false}`},
		{"POST", "/sandboxes/iabc/connect", "", testKey, "application/json", `{"timeout":3600}`},
		{"POST", "/sandboxes/iabc/timeout", "", testKey, "application/json", `{"timeout":90}`},
		{"POST", "/sandboxes/iabc/refreshes", "", testKey, "application/json", ``},
		{"DELETE", "/sandboxes/iabc", "", testKey, "", ``},
	}
	for i, w := range want {
		g := <-got
		if g != w {
			t.Errorf("request %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}
