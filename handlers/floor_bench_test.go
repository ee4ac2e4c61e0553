package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The floors the issue reports beside the figures (BENCHMARKS.md), measured in the same run on
// the same database, so that a ratio, not an absolute figure moved by whatever else shares the
// two cores, says how close Sandman comes to what the machine can do.

// floorTable makes an empty table shaped like webhook_deliveries for a floor to write to.
func floorTable(b *testing.B, pool *pgxpool.Pool) string {
	b.Helper()
	name := fmt.Sprintf("floor_%d", time.Now().UnixNano())
	if _, err := pool.Exec(context.Background(), "CREATE TABLE "+name+" (LIKE webhook_deliveries INCLUDING ALL)"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP TABLE "+name) })
	return name
}

// floorInserts is the webhook ingest's floor: the same rows INSERTed by a bare pgx loop, one
// transaction each, by as many concurrent senders. It returns rows per second.
func floorInserts(b *testing.B, pool *pgxpool.Pool, senders int, bodies [][]byte, ids []string) float64 {
	b.Helper()
	table := floorTable(b, pool)
	var next atomic.Int64
	var failed atomic.Value
	began := time.Now()
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(bodies) {
					return
				}
				if _, err := pool.Exec(context.Background(), "INSERT INTO "+table+` (event_id, delivery_id, event_type, headers, body)
					VALUES ($1, $2, 'floor', '{}', $3) ON CONFLICT (event_id) DO NOTHING`, ids[i], ids[i], bodies[i]); err != nil {
					failed.Store(err)
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return float64(len(bodies)) / time.Since(began).Seconds()
}

// floorRoundTrip is the webhook → SSE floor: a loopback HTTP round trip whose handler commits
// one INSERT, n times in a row. It returns the samples.
func floorRoundTrip(b *testing.B, pool *pgxpool.Pool, n int) []time.Duration {
	b.Helper()
	table := floorTable(b, pool)
	var seq atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := fmt.Sprint(seq.Add(1))
		if _, err := pool.Exec(r.Context(), "INSERT INTO "+table+" (event_id, headers, body) VALUES ($1, '{}', '')", id); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	samples := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		res, err := http.Post(srv.URL, "application/json", nil)
		if err != nil {
			b.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Fatalf("floor answered %d", res.StatusCode)
		}
		samples = append(samples, time.Since(start))
	}
	return samples
}

// floorPointRead is the status read's floor: a loopback HTTP request whose handler reads one
// sandbox's status with a bare pgx point read, arriving open-loop at rate per second for n
// requests. It returns the samples.
func floorPointRead(b *testing.B, pool *pgxpool.Pool, rate, n int, sandboxID string) []time.Duration {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var status string
		if err := pool.QueryRow(r.Context(), "SELECT status FROM sandboxes WHERE id = $1", sandboxID).Scan(&status); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"status":"` + status + `"}`))
	}))
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 512}}
	return openLoop(b, client, rate, n, func(int) string { return srv.URL })
}
