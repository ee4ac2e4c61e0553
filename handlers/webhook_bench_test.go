package handlers_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/lifecycle"
)

// BENCHMARKS.md target: "verified webhooks ingested ≥ 2,000/s, none lost, none applied twice". Signed
// deliveries for a running sandbox (pause and resume events with rising timestamps, one in ten
// delivered twice under a new delivery id, as the provider's retries do) are posted by 64
// concurrent senders (the provider sends each event on its own request, many at once; until
// 2026-11-24 the benchmark used 16, which capped a group commit at 16 deliveries); the rate is
// of accepted deliveries. Two set-ups:
//   - applying: one instance takes the webhooks and applies them at the same time;
//   - web-only: a --role=web instance takes them while no worker runs; a worker instance then
//     applies the backlog (its rate is reported as applied-events/s).
//
// Afterwards every event must be stored once, processed, and applied at most once.
func BenchmarkWebhookIngest(b *testing.B) {
	b.Run("applying", func(b *testing.B) { benchIngest(b, false) })
	b.Run("web-only", func(b *testing.B) { benchIngest(b, true) })
}

// hookSenders is how many deliveries are in flight at once.
const hookSenders = 64

func benchIngest(b *testing.B, webOnly bool) {
	quiet := func(c *app.Config) {
		c.Lifecycle.ReconcileEvery, c.Lifecycle.EventsEvery, c.Lifecycle.SweepEvery = 0, 0, 0
	}
	worker := start(b, apptest.Options{Config: quiet})
	c := worker.NewClient(b)
	c.SignUp("hooks@example.com")
	_, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)
	s := worker
	if webOnly {
		s = start(b, apptest.Options{Role: app.RoleWeb, Config: quiet, Host: worker.Host, DatabaseURL: worker.DatabaseURL})
		worker.Stop(b)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: hookSenders}}
	base := time.Now()
	total := testkit.BenchSize(4000, 200) * b.N
	bodies := make([][]byte, total)
	ids := make([]string, total)
	for i := range bodies {
		typ := lifecycle.EventPaused
		if i%2 == 1 {
			typ = lifecycle.EventResumed
		}
		ids[i] = uuid.NewString()
		bodies[i] = hookBody(ids[i], typ, sb.ProviderID, base.Add(time.Duration(i)*time.Millisecond), nil)
	}
	var next, accepted, failed atomic.Int64
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	for range hookSenders {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				sends := 1
				if i%10 == 0 {
					sends = 2
				}
				for range sends {
					res, err := client.Do(webhookRequest(s.URL(), bodies[i], sign(apptest.WebhookSecret, bodies[i]), uuid.NewString()))
					if err != nil || res.StatusCode != http.StatusOK {
						failed.Add(1)
						if res != nil {
							res.Body.Close()
						}
						continue
					}
					res.Body.Close()
					accepted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(began)
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d deliveries refused", failed.Load())
	}
	rate := float64(accepted.Load()) / took.Seconds()
	b.ReportMetric(rate, "deliveries/s")

	// None lost: every event stored once and processed; none applied twice.
	applyFrom := began
	if webOnly {
		applyFrom = time.Now()
		start(b, apptest.Options{Config: quiet, Host: worker.Host, DatabaseURL: worker.DatabaseURL})
	}
	testkit.Until(b, 2*time.Minute, "every delivery processed", func() bool {
		return s.count(b, "SELECT count(*) FROM webhook_deliveries WHERE processed_at IS NULL") == 0
	})
	applied := float64(total) / time.Since(applyFrom).Seconds()
	b.ReportMetric(applied, "applied-events/s")
	if n := s.count(b, "SELECT count(DISTINCT event_id) FROM webhook_deliveries"); n != total {
		b.Fatalf("%d of %d events stored", n, total)
	}
	if n := s.count(b, "SELECT count(*) FROM webhook_deliveries"); n != total {
		b.Fatalf("%d delivery rows for %d events", n, total)
	}
	if n := s.count(b, `SELECT count(*) FROM (SELECT provider_event_id FROM sandbox_events
		WHERE provider_event_id IS NOT NULL GROUP BY 1 HAVING count(*) > 1) twice`); n != 0 {
		b.Fatalf("%d events applied twice", n)
	}
	// The newest event is a resume: whatever the arrival order, the sandbox ends running.
	var status string
	if err := s.Pool().QueryRow(context.Background(), "SELECT status FROM sandboxes WHERE id = $1", sandboxID).Scan(&status); err != nil {
		b.Fatal(err)
	}
	if want := "running"; status != want {
		b.Fatalf("sandbox ended %s, want %s", status, want)
	}
	if !webOnly {
		// The floor: the same rows by a bare pgx INSERT loop, from as many senders, now.
		floor := floorInserts(b, s.Pool(), hookSenders, bodies, ids)
		b.ReportMetric(floor, "floor-inserts/s")
		b.ReportMetric(applied/floor, "applied/floor")
	}
}
