package handlers_test

import (
	"context"
	"net/http"
	"time"

	"testing"

	"github.com/google/uuid"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/lifecycle"
	"sandman/views"
)

// BENCHMARKS.md target: "webhook received → SSE message written, p99 ≤ 50 ms". Each iteration posts one
// signed provider event that changes the sandbox (paused, then resumed, alternately) and waits
// until the founder's open stream carries the new pane: the whole path of verify, store, job,
// transition, NOTIFY, LISTEN, render and stream.
func BenchmarkWebhookToSSE(b *testing.B) {
	s := start(b, apptest.Options{Config: func(c *app.Config) { c.Lifecycle.ReconcileEvery = 0 }})
	c := s.NewClient(b)
	c.SignUp("latency@example.com")
	projectID, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.Stream(ctx)
	nextMatching(b, events, views.DOMID(views.Pane, projectID), `data-status="running"`, 5*time.Second)

	at := time.Now()
	var samples []time.Duration
	b.ResetTimer()
	for i := range b.N {
		typ, want := lifecycle.EventPaused, `data-status="paused"`
		if i%2 == 1 {
			typ, want = lifecycle.EventResumed, `data-status="running"`
		}
		at = at.Add(time.Millisecond)
		body := hookBody(uuid.NewString(), typ, sb.ProviderID, at, nil)
		start := time.Now()
		res, err := http.DefaultClient.Do(webhookRequest(s.URL(), body, sign(apptest.WebhookSecret, body), uuid.NewString()))
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("webhook answered %d", res.StatusCode)
		}
		nextMatching(b, events, views.DOMID(views.Pane, projectID), want, 30*time.Second)
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	reportQuantiles(b, "webhook-to-sse", samples)
	// The floor, in the same run: a loopback HTTP round trip that commits one INSERT.
	floor := floorRoundTrip(b, s.Pool(), max(len(samples), 100))
	reportQuantiles(b, "floor", floor)
	b.ReportMetric(quantileMs(samples, 0.99)/quantileMs(floor, 0.99), "p99/floor-p99")
}
