package handlers_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// BENCHMARKS.md target: "status read p99 ≤ 5 ms: JSON at 5,000 req/s, dashboard page at 2,000
// req/s (≤ 2 ms at 500 req/s)". A founder with ten projects, each with a sandbox; requests
// arrive at a steady rate (open loop, so a slow answer does not slow the arrivals) for 4 s:
// mixed-500 alternates the JSON status of one sandbox and the whole dashboard page at 500/s;
// json and dashboard send one kind at its target rate. Each reports its floor beside it: a
// bare pgx point read behind loopback HTTP at the same rate, in the same run.
func BenchmarkStatusRead(b *testing.B) {
	s, c, sandboxes := statusReader(b)
	api := func(i int) string { return "/api/sandboxes/" + sandboxes[i%len(sandboxes)] }
	for _, run := range []struct {
		name string
		rate int
		path func(i int) string
	}{
		{"mixed-500", 500, func(i int) string {
			if i%2 == 0 {
				return "/"
			}
			return api(i)
		}},
		{"json", testkit.BenchSize(5000, 500), api},
		{"dashboard", testkit.BenchSize(2000, 200), func(int) string { return "/" }},
	} {
		b.Run(run.name, func(b *testing.B) {
			n := run.rate * testkit.BenchSize(4, 1)
			var json, page []time.Duration
			url := func(i int) string { return c.URL(run.path(i)) }
			// The founder's session, and enough kept connections for the rate: with the default
			// two, thousands of requests a second would each open a connection of their own. At most 512
			// at once: a request that waits for one counts its wait (the arrivals never slow).
			client := &http.Client{Jar: c.HTTP().Jar, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 512}}
			openLoop(b, client, run.rate, run.rate/5, url) // warm up: connections, caches
			b.ResetTimer()
			for range b.N {
				all := openLoop(b, client, run.rate, n, url)
				for i, took := range all {
					if run.path(i) == "/" {
						page = append(page, took)
					} else {
						json = append(json, took)
					}
				}
			}
			b.StopTimer()
			floor := floorPointRead(b, s.Pool(), run.rate, n, sandboxes[0])
			reportQuantiles(b, "floor", floor)
			for name, samples := range map[string][]time.Duration{"api": json, "dashboard": page} {
				if len(samples) > 0 {
					reportQuantiles(b, name, samples)
					b.ReportMetric(quantileMs(samples, 0.99)/quantileMs(floor, 0.99), name+"-p99/floor-p99")
				}
			}
		})
	}
}

// openLoop GETs url(i) for i < n, one request every 1/rate of a second whatever the answers
// take (open loop: a slow answer does not slow the arrivals), and returns each one's time to
// its body's end, in the order sent. Any failure fails the benchmark.
func openLoop(b *testing.B, client *http.Client, rate, n int, url func(i int) string) []time.Duration {
	b.Helper()
	took := make([]time.Duration, n)
	var failures atomic.Int64
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	var first atomic.Value
	for i := range n {
		<-tick.C
		wg.Go(func() {
			start := time.Now()
			res, err := client.Get(url(i))
			if err == nil {
				// Read to its end, as a browser does: a body closed unread closes its connection,
				// and every request would then pay a new one (a dial, an accept, fresh buffers).
				_, err = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			took[i] = time.Since(start)
			if err != nil {
				failures.Add(1)
				first.CompareAndSwap(nil, err.Error())
				return
			}
			if res.StatusCode != http.StatusOK {
				failures.Add(1)
			}
		})
	}
	wg.Wait()
	if f := failures.Load(); f > 0 {
		b.Fatalf("%d of %d requests failed (%v)", f, n, first.Load())
	}
	return took
}

// reportQuantiles adds p50 and p99 (ms) of samples to the benchmark's output.
func reportQuantiles(b *testing.B, name string, samples []time.Duration) {
	b.Helper()
	b.ReportMetric(quantileMs(samples, 0.5), name+"-p50-ms")
	b.ReportMetric(quantileMs(samples, 0.99), name+"-p99-ms")
}

// quantileMs is the p quantile of samples in milliseconds (samples end sorted).
func quantileMs(samples []time.Duration, p float64) float64 {
	slices.Sort(samples)
	return float64(samples[min(len(samples)-1, int(p*float64(len(samples))))].Microseconds()) / 1000
}

// BenchmarkStatusReadHandler is one status read served by the instance's handler itself, with
// every middleware and no network: the CPU time, bytes and allocations a JSON status and a
// dashboard page cost on the server (BenchmarkStatusRead's tails follow them on two shared
// cores), for the same founder (statusReader).
func BenchmarkStatusReadHandler(b *testing.B) {
	s, c, sandboxes := statusReader(b)
	h := s.Handler()
	for _, run := range []struct{ name, path string }{{"json", "/api/sandboxes/" + sandboxes[0]}, {"dashboard", "/"}} {
		b.Run(run.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, c.URL(run.path), nil)
			for _, ck := range c.HTTP().Jar.Cookies(req.URL) {
				req.AddCookie(ck)
			}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s answered %d: %s", run.path, w.Code, w.Body)
				}
			}
		})
	}
}

// statusReader starts a web instance with the status reads' founder: ten projects, each built
// once. It returns the founder's client and the ten sandboxes.
func statusReader(b *testing.B) (*stack, *apptest.Client, []string) {
	b.Helper()
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
	return s, c, sandboxes
}
