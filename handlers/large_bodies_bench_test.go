package handlers_test

import (
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sandman/internal/testkit"
)

// BenchmarkAnonymousLargeBodies sends 16 anonymous bodies of 28 MiB at once (as fast as the
// loopback takes them) to the versions route, as issue 27's review did, and reports the
// process's peak resident memory over its baseline while they are answered (the instance runs
// in this process; the senders hold no body). RELIABILITY.md, "Large bodies from anyone".
func BenchmarkAnonymousLargeBodies(b *testing.B) {
	s := webOnly(b)
	owner := s.NewClient(b)
	owner.SignUp("rss-owner@example.com")
	pid := newCounter(b, owner)
	senders, size := testkit.BenchSize(16, 2), int64(28<<20)
	url := owner.URL("/api/projects/" + pid + "/versions")
	var peak, base float64
	statuses := map[int]int{}
	for b.Loop() {
		for range 4 {
			runtime.GC()
		}
		debug.FreeOSMemory()
		base = rssMiB(b)
		done := make(chan struct{})
		sampled := make(chan float64)
		go func() {
			top := 0.0
			for {
				select {
				case <-done:
					sampled <- top
					return
				case <-time.After(2 * time.Millisecond):
					top = max(top, rssMiB(b))
				}
			}
		}()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range senders {
			wg.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, url, io.LimitReader(xs{}, size))
				req.ContentLength = size
				req.Header.Set("Content-Type", "application/json")
				res, err := (&http.Client{Timeout: 5 * time.Minute}).Do(req)
				status := 0
				if err == nil {
					_, _ = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					status = res.StatusCode
				}
				mu.Lock()
				statuses[status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		close(done)
		peak = max(peak, <-sampled-base)
	}
	for status := range statuses {
		if status < 400 || status >= 500 {
			b.Fatalf("an anonymous body was not refused (a 4xx): %v", statuses)
		}
	}
	b.ReportMetric(base, "baseline-rss-MiB")
	b.ReportMetric(peak, "peak-rss-over-baseline-MiB")
	b.Logf("answers by status: %v", statuses)
}

// xs is an endless body of x.
type xs struct{}

func (xs) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// rssMiB is the process's resident memory.
func rssMiB(t testing.TB) float64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
