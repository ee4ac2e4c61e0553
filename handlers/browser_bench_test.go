package handlers_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/views"
)

// BENCHMARKS.md target: "requests from an idle open dashboard: 0 per minute". A dashboard with a running
// preview sits open for a minute and a bit (15 s under -short); every request it sends to
// Sandman is counted (the shared event stream lives in a worker and is not one of the page's
// requests), and any fails the benchmark.
func BenchmarkIdleDashboardRequests(b *testing.B) {
	s := start(b, apptest.Options{Webhooks: true})
	c := s.NewClient(b)
	c.SignUp("idle@example.com")
	projectID, _ := c.BuildCounter()
	_, dash := s.Browse(b, "idle@example.com")
	dash.WaitFor(b, "the card running", statusIs(views.Card, projectID, "running"))
	// The page's own loading is over once Chromium has fetched its favicon, which it does after
	// the page has loaded: that request is the page's, not a poll. (The log-in pages before it
	// may or may not have fetched theirs.)
	testkit.Eventually(b, 10*time.Second, "the dashboard's favicon fetched", func() error {
		sent := dash.Requests()
		page := slices.Index(sent, "GET "+s.URL()+"/")
		if page < 0 || !slices.ContainsFunc(sent[page:], func(r string) bool { return strings.HasSuffix(r, "/static/favicon.svg") }) {
			return fmt.Errorf("no favicon request after the dashboard's among %q", sent)
		}
		return nil
	})
	before := len(dash.Requests())
	idle := time.Duration(testkit.BenchSize(65, 15)) * time.Second
	b.ResetTimer()
	for range b.N {
		time.Sleep(idle)
	}
	b.StopTimer()
	var sent []string
	for _, r := range dash.Requests()[before:] {
		if strings.Contains(r, s.URL()) {
			sent = append(sent, r)
		}
	}
	b.ReportMetric(float64(len(sent))/(idle.Minutes()*float64(b.N)), "requests/min")
	if len(sent) > 0 {
		b.Fatalf("an idle dashboard sent %d requests in %s, want none: %q", len(sent), time.Duration(b.N)*idle, sent)
	}
}
