package feed_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
	"sandman/views"
)

// BenchmarkLiveFanout measures change → SSE delivery: from the NOTIFY of a committed change,
// through LISTEN, render and the per-connection streams, to the client having read the pane.
// Changes go one at a time (the next after every client has the last), so the figures are
// latency, not queueing. Run it with, for example:
//
//	go test -run '^$' -bench BenchmarkLiveFanout -benchtime 200x ./feed
func BenchmarkLiveFanout(b *testing.B) {
	// 20: the most streams one founder may hold on one instance (handlers' maxStreamsPerFounder).
	for _, clients := range []int{1, 20} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchFanout(b, clients) })
	}
}

func benchFanout(b *testing.B, clients int) {
	dbURL := dbtest.NewDatabase(b)
	pool, err := db.Open(context.Background(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	// Fragments the size of a real card and pane.
	h := newFeedServer(b, 2<<10, nil)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	up := make(chan struct{})
	go h.feed.Listen(ctx, dbURL, func() { close(up) })
	select {
	case <-up:
	case <-time.After(10 * time.Second):
		b.Fatal("the feed is not listening after 10s")
	}

	owner, sandbox := uuid.New(), uuid.New()
	project := sandbox.String()
	h.state.set(owner, project, 0)
	type receipt struct {
		id int64
		at time.Time
	}
	receipts := make(chan receipt, clients*4)
	for range clients {
		events := h.stream(b, ctx, owner)
		testkit.NextSSE(b, events, 10*time.Second, "the snapshot", func(ev testkit.SSEEvent) bool { return ev.Event == views.DOMID(views.Pane, project) })
		go func() {
			for ev := range events {
				if ev.Event == views.DOMID(views.Pane, project) {
					id, _ := strconv.ParseInt(ev.ID, 10, 64)
					select {
					case receipts <- receipt{id, time.Now()}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}

	latencies := make([]time.Duration, 0, b.N*clients)
	b.ResetTimer()
	for i := range b.N {
		id := int64(i + 1)
		h.state.set(owner, project, id) // the committed change the render will show
		start := time.Now()
		if err := db.NotifySandbox(ctx, db.New(pool), sandbox, owner); err != nil {
			b.Fatal(err)
		}
		timeout := time.After(10 * time.Second)
		for got := 0; got < clients; {
			select {
			case r := <-receipts:
				if r.id == id {
					latencies = append(latencies, r.at.Sub(start))
					got++
				}
			case <-timeout:
				b.Fatalf("change %d reached %d of %d clients", id, got, clients)
			}
		}
	}
	b.StopTimer()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
