package live_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/internal/testkit"
	"sandman/views"
)

// BENCHMARKS.md, issue 19: "SSE fan-out of one change per founder to 10,000 streams, p99 ≤ 100
// ms", beside its floor, the same bytes written to the same 10,000 sockets by a bare loop, in
// the same run. 1,000 founders with ten tabs each hold 10,000 streams; the clients live in child
// processes (TestSSEClientProcess), so the RSS measured is the server's alone and neither side
// runs out of file descriptors. Then every founder's sandbox changes at once and the time until
// each of the 10,000 streams has the new state is the fan-out: every stream must have it, once,
// within a minute. Under -short (make test) 50 founders hold 4 streams each.
func BenchmarkSSE10k(b *testing.B) {
	founders, tabs := testkit.BenchSize(1000, 50), testkit.BenchSize(10, 4)
	testkit.Needs(b, testkit.RaiseFileLimit(uint64(founders*tabs+1000)), "%d open files", founders*tabs+1000)
	h := newHubServer(b, 2<<10, nil)
	owners := make([]uuid.UUID, founders)
	sandboxes := make([]uuid.UUID, founders)
	for i := range owners {
		owners[i], sandboxes[i] = uuid.New(), uuid.New()
		h.state.set(owners[i], projectOf(sandboxes[i]), 1)
	}
	reqs := streamRequests(owners, tabs)
	// A state's receipt is its pane's, its last event: the stream has the whole state then.
	wait := testkit.SSEWait{ReadyID: "1", Receipt: views.DOMID(views.Pane, "")}
	clients := testkit.StartSSEClients(b, h.srv.Listener.Addr().String(), reqs, wait)
	if n := h.hub.Clients(); n != len(reqs) {
		b.Fatalf("%d streams open, want %d", n, len(reqs))
	}
	idle := testkit.SettledMemory()

	var latencies []time.Duration
	cpu := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		id := int64(i + 2)
		start := time.Now()
		for j, o := range owners {
			h.state.set(o, projectOf(sandboxes[j]), id)
			h.deliver(o, sandboxes[j], id)
		}
		latencies = append(latencies, everyStreamGets(b, clients, len(reqs), id, start)...)
	}
	b.StopTimer()
	cpu = cpuTime() - cpu
	after := testkit.SettledMemory()
	clients.Stop()
	testkit.Until(b, time.Minute, "every stream of the hub gone", func() bool { return h.hub.Clients() == 0 })

	// The floor: the same client processes' streams held by a bare loop over hijacked
	// connections, which writes each founder's same two events to its sockets.
	floor := newLoopServer(b)
	clients = testkit.StartSSEClients(b, floor.addr(), reqs, wait)
	var floorLatencies []time.Duration
	floorCPU := cpuTime()
	for i := range b.N {
		id := int64(i + 2)
		start := time.Now()
		for j, o := range owners {
			f := h.state.set(o, projectOf(sandboxes[j]), id)
			floor.write(o, sseChunk(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\nid: %d\nevent: %s\ndata: %s\n\n",
				id, views.DOMID(views.Card, f.ProjectID), f.Card, id, views.DOMID(views.Pane, f.ProjectID), f.Pane)))
		}
		floorLatencies = append(floorLatencies, everyStreamGets(b, clients, len(reqs), id, start)...)
	}
	floorCPU = cpuTime() - floorCPU
	clients.Stop()
	floor.close()

	p50, p99 := quantile(latencies, 0.50), quantile(latencies, 0.99)
	floorP99 := quantile(floorLatencies, 0.99)
	b.ReportMetric(p50, "fanout-p50-ms")
	b.ReportMetric(p99, "fanout-p99-ms")
	b.ReportMetric(quantile(floorLatencies, 0.50), "floor-p50-ms")
	b.ReportMetric(floorP99, "floor-p99-ms")
	b.ReportMetric(p99/max(floorP99, 0.001), "p99/floor-p99")
	// The server's CPU per fan-out (the client processes' not included): less moved by the
	// other work on the machine than the latencies are.
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/fanout")
	b.ReportMetric(float64(floorCPU.Milliseconds())/float64(b.N), "floor-cpu-ms/fanout")
	b.ReportMetric(idle.RSS, "server-rss-MiB")
	b.ReportMetric(after.RSS, "server-rss-after-MiB")
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// everyStreamGets waits until each of n streams has received state id, once, and returns how
// long after start each did.
func everyStreamGets(b *testing.B, clients *testkit.SSEClients, n int, id int64, start time.Time) []time.Duration {
	b.Helper()
	want := strconv.FormatInt(id, 10)
	got := make([]bool, n)
	out := make([]time.Duration, 0, n)
	for len(out) < n {
		r := clients.Next(fmt.Sprintf("state %d on every stream (%d of %d have it)", id, len(out), n))
		if r.ID != want {
			continue
		}
		if r.Stream < 0 || r.Stream >= n {
			b.Fatalf("a receipt from no stream: %+v", r)
		}
		if got[r.Stream] {
			b.Fatalf("stream %d got state %d twice", r.Stream, id)
		}
		got[r.Stream] = true
		out = append(out, r.At.Sub(start))
	}
	return out
}

// BENCHMARKS.md, issue 19: "SSE memory per idle founder stream ≤ 16 KiB", the hub's part, as a
// curve at 1,000, 10,000 and 50,000 streams, beside two floors holding the same streams in the
// same run: a bare net/http SSE server (a handler parked per stream, as the standard library
// serves one), and a prototype with no goroutine and no buffer per stream (hijacked connections
// in a list: what the hub would cost without r3labs' goroutines). Each figure is the growth of
// the process's memory, after a collection, divided by the streams. Under -short the curve is
// 100, 200 and 400 streams.
func BenchmarkSSEMemory(b *testing.B) {
	for _, n := range []int{testkit.BenchSize(1000, 100), testkit.BenchSize(10000, 200), testkit.BenchSize(50000, 400)} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) {
			// The server holds a descriptor per stream; past 20,000 or so that needs a hard limit
			// above this machine's (RLIMIT_NOFILE is not raised without CAP_SYS_RESOURCE).
			testkit.Needs(b, testkit.RaiseFileLimit(uint64(n+1000)), "%d open files for %d streams", n+1000, n)
			owners := make([]uuid.UUID, n/10)
			for i := range owners {
				owners[i] = uuid.New()
			}
			reqs := streamRequests(owners, 10)
			for range b.N {
				hub := testkit.MeasureStreams(b, reqs, "1", func() testkit.StreamServer {
					h := newHubServer(b, 2<<10, nil)
					for _, o := range owners {
						h.state.set(o, projectOf(o), 1)
					}
					return testkit.StreamServer{Addr: h.srv.Listener.Addr().String(), Stop: func() {
						testkit.Until(b, time.Minute, "every stream of the hub gone", func() bool { return h.hub.Clients() == 0 })
						h.srv.Close()
					}}
				})
				bare := testkit.MeasureStreams(b, reqs, "1", func() testkit.StreamServer {
					srv := testkit.NewBareSSEServer("1")
					return testkit.StreamServer{Addr: srv.Listener.Addr().String(), Stop: srv.Close}
				})
				loop := testkit.MeasureStreams(b, reqs, "1", func() testkit.StreamServer {
					l := newLoopServer(b)
					return testkit.StreamServer{Addr: l.addr(), Stop: l.close}
				})
				b.ReportMetric(hub.KiB, "hub-KiB/stream")
				b.ReportMetric(hub.RSS, "hub-rss-MiB")
				b.ReportMetric(hub.Goroutines, "hub-goroutines/stream")
				b.ReportMetric(hub.StackKiB, "hub-stack-KiB/stream")
				b.ReportMetric(hub.HeapKiB, "hub-heap-KiB/stream")
				b.ReportMetric(hub.HeapFreeKiB, "hub-heap-free-KiB/stream")
				b.ReportMetric(bare.KiB, "floor-KiB/stream")
				b.ReportMetric(bare.Goroutines, "floor-goroutines/stream")
				b.ReportMetric(bare.StackKiB, "floor-stack-KiB/stream")
				b.ReportMetric(bare.HeapKiB, "floor-heap-KiB/stream")
				b.ReportMetric(hub.KiB/bare.KiB, "hub/floor")
				b.ReportMetric(loop.KiB, "nogoroutine-KiB/stream")
			}
		})
	}
}

// streamRequests are tabs streams per owner, in order.
func streamRequests(owners []uuid.UUID, tabs int) []testkit.SSERequest {
	reqs := make([]testkit.SSERequest, 0, len(owners)*tabs)
	for _, o := range owners {
		for range tabs {
			reqs = append(reqs, testkit.SSERequest{Path: "/events?owner=" + o.String()})
		}
	}
	return reqs
}

// loopServer is the floor with no goroutine and no buffer per stream: it hijacks each
// connection, answers with a first event, and keeps the connection in a list by owner; write
// sends bytes to an owner's connections in a bare loop.
type loopServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	conns map[string][]net.Conn
}

func newLoopServer(b *testing.B) *loopServer {
	l := &loopServer{conns: map[string][]net.Conn{}}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		nc, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// The first event and the listing under one lock: a client that has its first event may
		// be written to at once, and write waits for the lock, so it never misses this one.
		l.mu.Lock()
		defer l.mu.Unlock()
		_, _ = nc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n" +
			"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"))
		_, _ = nc.Write(sseChunk("id: 1\nevent: ready\ndata: ready\n\n"))
		owner := r.URL.Query().Get("owner")
		l.conns[owner] = append(l.conns[owner], nc)
	}))
	b.Cleanup(l.close)
	return l
}

func (l *loopServer) addr() string { return l.srv.Listener.Addr().String() }

// write writes p to each of owner's connections, one write each.
func (l *loopServer) write(owner uuid.UUID, p []byte) {
	l.mu.Lock()
	conns := l.conns[owner.String()]
	l.mu.Unlock()
	for _, nc := range conns {
		_, _ = nc.Write(p)
	}
}

func (l *loopServer) close() {
	l.mu.Lock()
	for _, conns := range l.conns {
		for _, nc := range conns {
			_ = nc.Close()
		}
	}
	l.conns = map[string][]net.Conn{}
	l.mu.Unlock()
	l.srv.Close()
}

// sseChunk is s as one chunk of a chunked HTTP body.
func sseChunk(s string) []byte {
	return []byte(fmt.Sprintf("%x\r\n%s\r\n", len(s), s))
}

// quantile of latencies, in milliseconds.
func quantile(latencies []time.Duration, q float64) float64 {
	if len(latencies) == 0 {
		return 0
	}
	s := slices.Clone(latencies)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))].Microseconds()) / 1000
}

// TestSSEClientProcess is the client side of the SSE benchmarks (testkit.StartSSEClients); it
// does nothing in a normal run.
func TestSSEClientProcess(t *testing.T) { testkit.RunSSEClientProcess(t) }
