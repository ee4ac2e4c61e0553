package e2b

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const testKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// fastDelays keep retry tests quick while keeping the 1:2:4 shape.
var fastDelays = []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond}

// newFakeClient returns a client for a fake provider served by h.
func newFakeClient(t *testing.T, h http.Handler, edit ...func(*Config)) (*Client, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := Config{APIURL: srv.URL, APIKey: testKey, Domain: "e2b.test", SandboxURL: srv.URL, RetryDelays: fastDelays,
		AttemptTimeout: 2 * time.Second, CallTimeout: 5 * time.Second}
	for _, e := range edit {
		e(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, srv
}

// script answers requests with the given statuses in turn (the last one repeats), recording
// when each request came.
type script struct {
	mu       sync.Mutex
	statuses []int
	header   http.Header
	body     string
	times    []time.Time
	calls    atomic.Int64
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	n := len(s.times)
	s.times = append(s.times, time.Now())
	status := s.statuses[min(n, len(s.statuses)-1)]
	s.mu.Unlock()
	s.calls.Add(1)
	for k, v := range s.header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status/100 == 2 {
		_, _ = w.Write([]byte(s.body))
		return
	}
	_, _ = w.Write([]byte(`{"code":` + strconv.Itoa(status) + `,"message":"scripted"}`))
}

func (s *script) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Duration
	for i := 1; i < len(s.times); i++ {
		out = append(out, s.times[i].Sub(s.times[i-1]))
	}
	return out
}

// countingTransport counts the requests that actually leave the client.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}
