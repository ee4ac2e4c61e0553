package e2b

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sandman/internal/testkit"
)

// breakerClient has no retries, so each call is one request and the counts are easy to read.
// The fake provider answers in memory, not over a socket, so the client can run inside a
// synctest bubble, whose clock moves only when every goroutine in it waits: the breaker's
// open period is then exact, whatever the machine's load.
func breakerClient(t *testing.T, h http.Handler, openFor time.Duration) (*Client, *countingTransport, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	ct := &countingTransport{next: inMemory{h}}
	c, err := New(Config{APIURL: "http://e2b.test", APIKey: testKey, Domain: "e2b.test", RetryDelays: []time.Duration{},
		BreakerOpenFor: openFor, HTTPClient: &http.Client{Transport: ct}, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	return c, ct, reg
}

// inMemory serves requests by calling a handler directly.
type inMemory struct{ h http.Handler }

func (m inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	m.h.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err // as a real transport, whose request ends with its context
	}
	res := rec.Result()
	res.Request = r
	return res, nil
}

func TestBreakerOpensAfterConsecutiveFailuresAndFailsFast(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &script{statuses: []int{500}}
		c, ct, reg := breakerClient(t, s, time.Hour)
		for i := range 5 {
			if _, err := c.GetSandbox(t.Context(), "iabc"); !errors.Is(err, ErrTransient) {
				t.Fatalf("call %d: err = %v, want ErrTransient", i+1, err)
			}
		}
		if got := c.CircuitState(); got != "open" {
			t.Fatalf("state after 5 failures = %s, want open", got)
		}
		before := ct.n.Load()
		start := time.Now()
		_, err := c.GetSandbox(t.Context(), "iabc")
		if !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("err = %v, want ErrCircuitOpen", err)
		}
		if errors.Is(err, ErrTransient) {
			t.Error("ErrCircuitOpen must be distinguishable from a transient failure")
		}
		if ct.n.Load() != before {
			t.Error("a call with the breaker open reached the network")
		}
		// The bubble's clock only moves when the call waits for something: it did not.
		if waited := time.Since(start); waited != 0 {
			t.Errorf("failing fast waited %s", waited)
		}
		if v := testkit.MetricValue(t, reg, "sandman_e2b_circuit_state", nil); v != 2 {
			t.Errorf("circuit_state gauge = %v, want 2 (open)", v)
		}
		if n := testkit.MetricValue(t, reg, "sandman_e2b_calls_total", map[string]string{"op": "get", "outcome": "circuit_open"}); n != 1 {
			t.Errorf("calls_total{get,circuit_open} = %v, want 1", n)
		}
		// The breaker is for the control plane only: envd calls go on.
		_, err = c.ListProcesses(t.Context(), Sandbox{ID: "iabc"})
		if errors.Is(err, ErrCircuitOpen) {
			t.Error("envd calls must not pass the API breaker")
		}
	})
}

func TestBreakerHalfOpenProbe(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const openFor = 250 * time.Millisecond
		s := &script{statuses: []int{500, 500, 500, 500, 500, 500, 200}, body: sandboxJSON}
		c, ct, _ := breakerClient(t, s, openFor)
		for range 5 {
			_, _ = c.GetSandbox(t.Context(), "iabc")
		}
		if c.CircuitState() != "open" {
			t.Fatal("breaker did not open")
		}
		// Open for exactly openFor (the bubble's clock is exact), then half-open.
		time.Sleep(openFor)
		if got := c.CircuitState(); got != "open" {
			t.Fatalf("state at the end of the open period = %s, want open", got)
		}
		time.Sleep(time.Nanosecond)
		if got := c.CircuitState(); got != "half-open" {
			t.Fatalf("state after the open period = %s, want half-open", got)
		}
		// The probe fails (6th 500): open again for another period.
		if _, err := c.GetSandbox(t.Context(), "iabc"); !errors.Is(err, ErrTransient) {
			t.Fatalf("probe err = %v", err)
		}
		if got := c.CircuitState(); got != "open" {
			t.Fatalf("state after a failed probe = %s, want open", got)
		}
		n := ct.n.Load()
		if _, err := c.GetSandbox(t.Context(), "iabc"); !errors.Is(err, ErrCircuitOpen) || ct.n.Load() != n {
			t.Fatalf("reopened breaker let a call through: %v", err)
		}
		time.Sleep(openFor + time.Nanosecond)
		// The next probe succeeds: closed.
		if _, err := c.GetSandbox(t.Context(), "iabc"); err != nil {
			t.Fatalf("probe: %v", err)
		}
		if got := c.CircuitState(); got != "closed" {
			t.Fatalf("state after a good probe = %s, want closed", got)
		}
	})
}

func TestBreakerIgnoresAnswers(t *testing.T) {
	t.Parallel()
	// 404, 409, 400, 401 and 429 come from a healthy provider: they must never open it.
	for _, status := range []int{404, 409, 400, 401, 429} {
		s := &script{statuses: []int{status}}
		c, _, _ := breakerClient(t, s, time.Hour)
		for range 10 {
			_ = c.Kill(t.Context(), "iabc")
		}
		if got := c.CircuitState(); got != "closed" {
			t.Errorf("%d ×10 left the breaker %s", status, got)
		}
	}
}

func TestBreakerCountsAttemptsNotCalls(t *testing.T) {
	t.Parallel()
	// With retries, one call is up to 4 attempts; two failing calls open the breaker, and the
	// second call stops retrying at once instead of waiting out its backoff.
	s := &script{statuses: []int{500}}
	c, _ := newFakeClient(t, s, func(cfg *Config) { cfg.BreakerOpenFor = time.Hour })
	if _, err := c.GetSandbox(t.Context(), "iabc"); !errors.Is(err, ErrTransient) {
		t.Fatal(err)
	}
	_, err := c.GetSandbox(t.Context(), "iabc")
	if !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("second call: %v, want ErrCircuitOpen after 5 failed attempts", err)
	}
	if n := s.calls.Load(); n != 5 {
		t.Errorf("%d requests, want 5", n)
	}
}

func TestMetricsShareARegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for range 2 {
		if _, err := New(Config{APIKey: testKey, Registerer: reg}); err != nil {
			t.Fatalf("second client on one registry: %v", err)
		}
	}
}

// A caller whose own deadline passes while the provider is still answering has learnt nothing
// about the provider: however often it happens, the breaker stays closed. An attempt that runs
// out of its own time (AttemptTimeout) is the provider being slow, and does count.
func TestBreakerIgnoresTheCallersDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		})
		c, ct, _ := breakerClient(t, slow, time.Hour)
		for i := range 10 {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second) // well under AttemptTimeout
			_, err := c.GetSandbox(ctx, "iabc")
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("call %d: err = %v, want the caller's deadline", i+1, err)
			}
		}
		if got, n := c.CircuitState(), ct.n.Load(); got != "closed" || n != 10 {
			t.Fatalf("after 10 callers gave up: breaker %s, %d requests; want closed and 10", got, n)
		}
		if counts := c.breaker.Counts(); counts.TotalFailures != 0 {
			t.Fatalf("the callers' deadlines counted as provider failures: %+v", counts)
		}

		// The provider's own slowness (the attempt's timeout, with time left on the call) opens it.
		attemptTimeout := c.Config().AttemptTimeout
		for range 5 {
			ctx, cancel := context.WithTimeout(t.Context(), 10*attemptTimeout)
			_, _ = c.GetSandbox(ctx, "iabc")
			cancel()
		}
		if got := c.CircuitState(); got != "open" {
			t.Fatalf("five attempts that timed out left the breaker %s, want open", got)
		}
	})
	testkit.Record(t, testkit.Scenario{ID: "breaker-callers-deadline", Times: 10,
		Injected: "callers whose own deadline (1 s) passes while the provider is still answering",
		Result:   "the breaker stays closed, no failure counted; five attempts timed out by the provider's slowness do open it"})
}
