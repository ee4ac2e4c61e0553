package outbox_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/internal/testkit"
	"sandman/outbox"
)

// quantile is the q-th quantile of ds (sorted in place).
func quantile(ds []time.Duration, q float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*q))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// arrivals is a receiver that tells each arrival's webhook-id on a channel.
func arrivals(b *testing.B) (*httptest.Server, <-chan string) {
	ch := make(chan string, 100_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ch <- r.Header.Get("webhook-id")
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	return srv, ch
}

func benchHarness(b *testing.B, run bool) (*harness, *outbox.Service) {
	h := newHarness(b)
	s, _ := h.service(b, testConfig(), run)
	return h, s
}

// A change's commit → the first attempt's arrival at the endpoint, beside its floor: a NOTIFY's
// commit → a LISTEN connection's receipt of it, the announcement the sender is woken by.
func BenchmarkChangeToFirstAttempt(b *testing.B) {
	samples := testkit.BenchSize(300, 20)
	for range b.N {
		h, s := benchHarness(b, true)
		srv, got := arrivals(b)
		create(b, s, h.owner, srv.URL)
		lat := arrivals1by1(b, h, got, samples, "a delivery")
		floor := notifyFloor(b, h, samples)
		b.ReportMetric(ms(quantile(lat, 0.5)), "p50-ms")
		b.ReportMetric(ms(quantile(lat, 0.99)), "p99-ms")
		b.ReportMetric(ms(quantile(floor, 0.5)), "floor-p50-ms")
		b.ReportMetric(ms(quantile(floor, 0.99)), "floor-p99-ms")
	}
}

// notifyFloor is the commit → receipt of a bare NOTIFY on a LISTEN connection.
func notifyFloor(b *testing.B, h *harness, samples int) []time.Duration {
	ctx := context.Background()
	pc, err := h.pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	conn := pc.Hijack()
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "LISTEN bench_floor"); err != nil {
		b.Fatal(err)
	}
	out := make([]time.Duration, 0, samples)
	for range samples {
		start := time.Now()
		if err := db.InTx(ctx, h.pool, func(tx db.Tx) error {
			return tx.Notify(ctx, db.NotifyParams{Channel: "bench_floor"})
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.WaitForNotification(ctx); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return out
}

// Deliveries per second from one instance to a fast receiver, none lost and none sent twice,
// beside its floor: the same receiver POSTed to by plain clients, as many at once as the sender
// sends, with no database.
func BenchmarkDeliveriesPerSecond(b *testing.B) {
	n := testkit.BenchSize(5000, 200)
	for range b.N {
		h, s := benchHarness(b, false)
		srv, got := arrivals(b)
		create(b, s, h.owner, srv.URL)
		ctx := context.Background()
		if err := db.InTx(ctx, h.pool, func(tx db.Tx) error {
			for range n {
				sb := uuid.New() // each its own sandbox: none waits for another's order
				if err := outbox.Record(ctx, tx, outbox.Event{Owner: h.owner, Type: outbox.PreviewPaused, SandboxID: &sb}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		h.service(b, testConfig(), true)
		ids := map[string]int{}
		for len(ids) < n {
			select {
			case id := <-got:
				ids[id]++
			case <-time.After(within):
				b.Fatalf("%d of %d deliveries arrived", len(ids), n)
			}
		}
		elapsed := time.Since(start)
		// Anything sent twice would arrive within a moment of the last.
		time.Sleep(200 * time.Millisecond)
		for len(got) > 0 {
			ids[<-got]++
		}
		for id, c := range ids {
			if c != 1 {
				b.Fatalf("%s arrived %d times", id, c)
			}
		}
		b.ReportMetric(float64(n)/elapsed.Seconds(), "deliveries/s")
		b.ReportMetric(postFloor(b, srv.URL, got, n), "floor-posts/s")
	}
}

func postFloor(b *testing.B, url string, got <-chan string, n int) float64 {
	const clients = 16
	var wg sync.WaitGroup
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range work {
				resp, err := http.Post(url, "application/json", nil)
				if err != nil {
					b.Error(err)
					return
				}
				resp.Body.Close()
				<-got
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

// A live endpoint's change → arrival p99 while another endpoint of the same founder times out
// on every attempt, beside the same p99 with no dead endpoint.
func BenchmarkLiveEndpointBesideADeadOne(b *testing.B) {
	samples := testkit.BenchSize(200, 20)
	measure := func(withDead bool) time.Duration {
		h := newHarness(b)
		cfg := testConfig()
		cfg.Timeout = time.Second
		s, _ := h.service(b, cfg, true)
		live, got := arrivals(b)
		if withDead {
			dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body) // else the server never sees the client give up
				<-r.Context().Done()
			}))
			b.Cleanup(dead.Close)
			create(b, s, h.owner, dead.URL)
		}
		create(b, s, h.owner, live.URL)
		lat := arrivals1by1(b, h, got, samples, "a live delivery")
		return quantile(lat, 0.99)
	}
	for range b.N {
		alone := measure(false)
		beside := measure(true)
		b.ReportMetric(ms(beside), "p99-beside-dead-ms")
		b.ReportMetric(ms(alone), "floor-p99-alone-ms")
	}
}

// arrivals1by1 commits n changes one at a time, each waited for at the endpoint (got) before
// the next, and returns each one's commit → arrival.
func arrivals1by1(b *testing.B, h *harness, got <-chan string, n int, what string) []time.Duration {
	b.Helper()
	lat := make([]time.Duration, 0, n)
	for range n {
		sb := uuid.New()
		start := time.Now()
		h.emit(b, outbox.Event{Type: outbox.PreviewRunning, SandboxID: &sb})
		select {
		case <-got:
		case <-time.After(within):
			b.Fatal(what + " never arrived")
		}
		lat = append(lat, time.Since(start))
	}
	return lat
}
