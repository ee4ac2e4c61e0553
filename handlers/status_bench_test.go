package handlers_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// BENCHMARKS.md target: "status read (page data from DB) p99 at 500 req/s ≤ 5 ms". A founder with ten
// projects, each with a sandbox; requests arrive at a steady 500 per second (open loop, so a
// slow answer does not slow the arrivals), alternating the JSON status of one sandbox and the
// whole dashboard page.
func BenchmarkStatusRead(b *testing.B) {
	s := webOnly(b)
	c := s.NewClient(b)
	c.SignUp("reader@example.com")
	var sandboxes []string
	for range 10 {
		var p struct{ ID string }
		apptest.RequireStatus(b, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
		var res struct{ Sandbox struct{ ID string } }
		apptest.RequireStatus(b, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": p.ID}, &res), http.StatusAccepted)
		sandboxes = append(sandboxes, res.Sandbox.ID)
	}
	const rate = 500
	seconds := testkit.BenchSize(4, 1)
	paths := func(i int) string {
		if i%2 == 0 {
			return "/"
		}
		return "/api/sandboxes/" + sandboxes[i%len(sandboxes)]
	}
	var (
		mu        sync.Mutex
		api, page []time.Duration
		failures  int
	)
	b.ResetTimer()
	for range b.N {
		tick := time.NewTicker(time.Second / rate)
		var wg sync.WaitGroup
		for i := range rate * seconds {
			<-tick.C
			wg.Go(func() {
				path := paths(i)
				req, _ := http.NewRequest(http.MethodGet, c.URL(path), nil)
				start := time.Now()
				res, err := c.HTTP().Do(req)
				took := time.Since(start)
				mu.Lock()
				defer mu.Unlock()
				if err != nil || res.StatusCode != http.StatusOK {
					failures++
					return
				}
				res.Body.Close()
				if path == "/" {
					page = append(page, took)
				} else {
					api = append(api, took)
				}
			})
		}
		tick.Stop()
		wg.Wait()
	}
	b.StopTimer()
	if failures > 0 {
		b.Fatalf("%d requests failed", failures)
	}
	reportQuantiles(b, "api", api)
	reportQuantiles(b, "dashboard", page)
}

// reportQuantiles adds p50 and p99 (ms) of samples to the benchmark's output.
func reportQuantiles(b *testing.B, name string, samples []time.Duration) {
	b.Helper()
	slices.Sort(samples)
	q := func(p float64) float64 {
		return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), name+"-p50-ms")
	b.ReportMetric(q(0.99), name+"-p99-ms")
}
