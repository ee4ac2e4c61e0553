package live_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/internal/testkit"
)

// BENCHMARKS.md target: "SSE connections on one instance: 10,000 at ≤ 512 MiB RSS, fan-out p99 ≤ 1 s".
// 1,000 founders with ten tabs each hold 10,000 streams; the clients live in a child process
// (TestSSEClientProcess), so the RSS measured is the server's alone and neither side runs out
// of file descriptors. Then every founder's sandbox changes at once and the time until each of
// the 10,000 streams has the new state is the fan-out: every stream must have it, once, within
// a minute. Under -short (make test) 50 founders hold 4 streams each.
func BenchmarkSSE10k(b *testing.B) {
	founders, tabs := testkit.BenchSize(1000, 50), testkit.BenchSize(10, 4)
	h := newHubServer(b, 2<<10, nil)
	owners := make([]uuid.UUID, founders)
	sandboxes := make([]uuid.UUID, founders)
	for i := range owners {
		owners[i], sandboxes[i] = uuid.New(), uuid.New()
		h.state.set(owners[i], projectOf(sandboxes[i]), 1)
	}
	var list bytes.Buffer
	for _, o := range owners {
		fmt.Fprintln(&list, o)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSSEClientProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "SANDMAN_SSE_CLIENTS="+h.srv.URL, "SANDMAN_SSE_TABS="+strconv.Itoa(tabs))
	cmd.Stdin = &list
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1024)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	const within = time.Minute
	next := func(what string) string {
		select {
		case line, ok := <-lines:
			if !ok {
				b.Fatalf("the client process ended while waiting for %s", what)
			}
			return line
		case <-time.After(within):
			b.Fatalf("nothing from the client process for %s while waiting for %s", within, what)
			return ""
		}
	}
	for line := next("every stream's first state"); line != "ready"; line = next("every stream's first state") {
	}
	if n := h.hub.Clients(); n != founders*tabs {
		b.Fatalf("%d streams open, want %d", n, founders*tabs)
	}
	idleRSS := rssMiB(b)

	var latencies []time.Duration
	b.ResetTimer()
	for i := range b.N {
		id := int64(i + 2)
		start := time.Now()
		for j, o := range owners {
			h.state.set(o, projectOf(sandboxes[j]), id)
			h.hub.Deliver(context.Background(), o, sandboxes[j], id)
		}
		// Each stream's receipt of this state, once: a stream that got it twice, or a count of
		// lines that some streams never sent, is not a fan-out to every stream.
		got := make([]bool, founders*tabs)
		for n := 0; n < len(got); {
			line := next(fmt.Sprintf("state %d on every stream (%d of %d have it)", id, n, len(got)))
			fields := strings.Fields(line)
			if len(fields) != 4 || fields[0] != "got" || fields[2] != strconv.FormatInt(id, 10) {
				continue
			}
			stream, err := strconv.Atoi(fields[1])
			if err != nil || stream < 0 || stream >= len(got) {
				b.Fatalf("a receipt from no stream: %q", line)
			}
			if got[stream] {
				b.Fatalf("stream %d got state %d twice", stream, id)
			}
			got[stream] = true
			n++
			ns, _ := strconv.ParseInt(fields[3], 10, 64)
			latencies = append(latencies, time.Unix(0, ns).Sub(start))
		}
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Milliseconds()), "fanout-p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Milliseconds()), "fanout-p99-ms")
	b.ReportMetric(idleRSS, "server-rss-MiB")
	b.ReportMetric(rssMiB(b), "server-rss-after-MiB")
}

// TestSSEClientProcess is BenchmarkSSE10k's client side; it does nothing in a normal run.
// It opens SANDMAN_SSE_TABS streams for every founder id on stdin, prints "ready" when each has
// its first state, then "got <stream> <event id> <unix ns>" for every later state each stream
// (numbered from 0 in the order opened) receives, when its first event arrives.
func TestSSEClientProcess(t *testing.T) {
	base := os.Getenv("SANDMAN_SSE_CLIENTS")
	if base == "" {
		t.Skip("the client side of BenchmarkSSE10k")
	}
	tabs, _ := strconv.Atoi(os.Getenv("SANDMAN_SSE_TABS"))
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		owners = append(owners, in.Text())
	}
	var ready sync.WaitGroup
	var out sync.Mutex
	w := bufio.NewWriterSize(os.Stdout, 1<<16)
	stream := 0
	for _, owner := range owners {
		for range tabs {
			stream++
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "GET /events?owner=%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", owner, u.Host)
			ready.Add(1)
			go func(stream int) {
				// The raw response's status line, headers and chunk sizes read as unknown
				// fields: only whole events (one chunk each) reach the callback.
				// A state comes as several events (the card and the pane) with one id: its
				// receipt is the first of them.
				first, last := true, ""
				_ = testkit.ReadSSE(bufio.NewReaderSize(conn, 4096), func(ev testkit.SSEEvent) bool {
					switch {
					case ev.ID == "1":
						if first {
							first = false
							ready.Done()
						}
					case ev.ID != "" && ev.ID != last:
						last = ev.ID
						at := time.Now().UnixNano()
						out.Lock()
						fmt.Fprintf(w, "got %d %s %d\n", stream, ev.ID, at)
						out.Unlock()
					}
					return true
				})
			}(stream - 1)
		}
	}
	ready.Wait()
	out.Lock()
	fmt.Fprintln(w, "ready")
	w.Flush()
	out.Unlock()
	// Flush receipts as they come, until the benchmark ends this process.
	for {
		time.Sleep(5 * time.Millisecond)
		out.Lock()
		w.Flush()
		out.Unlock()
	}
}

// rssMiB is this process's resident memory.
func rssMiB(b *testing.B) float64 {
	b.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}
