package handlers_test

import (
	"net/http"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// BENCHMARKS.md: "/ops p99 at 100,000 sandboxes and 1,000,000 events". An operator's page view
// of the console (every figure, the charts, needs a hand, provider health) over a seeded fleet
// (apptest.SeedFleet), one request after another, 200 per iteration (with -short, as make test
// runs it: 2,000 sandboxes, 20,000 events and 20 page views, each of which must answer 200).
func BenchmarkOpsPage(b *testing.B) {
	s := webOnly(b)
	apptest.SeedFleet(b, s.Pool(), testkit.BenchSize(100_000, 2_000), testkit.BenchSize(1_000_000, 20_000))
	c := s.NewClient(b)
	c.SignUp("bench-operator@example.com")
	s.makeOperator(b, "bench-operator@example.com")
	apptest.RequireStatus(b, c.Get("/ops"), http.StatusOK) // warm: plans, caches
	perIteration := testkit.BenchSize(200, 20)
	var samples []time.Duration
	b.ResetTimer()
	for range b.N {
		for range perIteration {
			req, _ := http.NewRequest(http.MethodGet, c.URL("/ops"), nil)
			start := time.Now()
			res, err := c.HTTP().Do(req)
			if err != nil {
				b.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("/ops answered %d", res.StatusCode)
			}
			samples = append(samples, time.Since(start))
		}
	}
	b.StopTimer()
	reportQuantiles(b, "ops", samples)
}
