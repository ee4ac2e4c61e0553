package live_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/internal/testkit"
	"sandman/live"
	"sandman/views"
)

// tinyReceiveBuffer dials with a 1 KiB socket receive buffer, so a client that stops reading
// backs up to the server after a few messages.
var tinyReceiveBuffer = net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
	var err error
	if cerr := rc.Control(func(fd uintptr) {
		err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
	}); cerr != nil {
		return cerr
	}
	return err
}}

// stalledClient opens /events over a raw connection with a tiny receive buffer and never
// reads from it, like a browser tab frozen by the OS or a client behind a dead link.
func stalledClient(t *testing.T, h *hubServer, owner uuid.UUID) net.Conn {
	t.Helper()
	addr := h.srv.Listener.Addr().String()
	conn, err := tinyReceiveBuffer.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET /events?owner=%s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", owner, addr); err != nil {
		t.Fatal(err)
	}
	return conn
}

// strandedGoroutines counts goroutines left blocked in r3labs' subscriber shutdown, which only
// finishes while the subscriber's stream still runs.
func strandedGoroutines() int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	return bytes.Count(buf.Bytes(), []byte("sse.(*Subscriber).close"))
}

// requireServerClosed reads the raw connection to its end: the server must have closed it.
func requireServerClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server never closed the stalled connection")
	}
}

// Not parallel: the goroutine count must not see other tests' streams closing.
func TestStalledClientIsDroppedWithoutHoldingBackOthers(t *testing.T) {
	// Large fragments fill the stalled client's socket and buffers after a few dozen changes;
	// its writer then waits half a second for it, and drops it.
	h := newHubServer(t, 32<<10, func(o *hubConfig) { o.StallTimeout = 500 * time.Millisecond })
	owner := uuid.New()
	sandbox := uuid.New()
	project := projectOf(sandbox)
	h.state.set(owner, project, 1)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	healthy := h.stream(t, ctx, owner)
	stalled := stalledClient(t, h, owner)
	testkit.Until(t, 10*time.Second, "both clients connected", func() bool { return h.hub.Clients() == 2 })

	// Lockstep: each change must reach the healthy client before the next is made, so a hub
	// that waited on the stalled one would stop here (and fail) instead of racing ahead.
	id := int64(1)
	for h.hub.Clients() == 2 {
		if id > 100_000 {
			t.Fatal("the stalled client was never dropped")
		}
		id++
		h.state.set(owner, project, id)
		h.deliver(owner, sandbox, id)
		want := strconv.FormatInt(id, 10)
		testkit.NextSSE(t, healthy, 10*time.Second, "change "+want+" on the healthy client", func(ev testkit.SSEEvent) bool {
			return ev.Event == views.DOMID(views.Pane, project) && ev.ID == want
		})
	}
	t.Logf("stalled client dropped after %d changes", id)
	if got := h.counter(t, "sandman_sse_dropped_total"); got != 1 {
		t.Fatalf("dropped counter %v, want 1", got)
	}
	if got := h.counter(t, "sandman_sse_clients"); got != 1 {
		t.Fatalf("clients gauge %v, want 1", got)
	}
	requireServerClosed(t, stalled)

	for range 3 {
		id++
		h.state.set(owner, project, id)
		h.deliver(owner, sandbox, id)
		want := strconv.FormatInt(id, 10)
		testkit.NextSSE(t, healthy, 10*time.Second, "change "+want+" after the drop", func(ev testkit.SSEEvent) bool {
			return ev.Event == views.DOMID(views.Pane, project) && ev.ID == want
		})
	}
	testkit.Until(t, 10*time.Second, "no goroutine stranded by the drop", func() bool { return strandedGoroutines() == 0 })
}

// Not parallel, for the goroutine count.
func TestCloseEndsEveryStream(t *testing.T) {
	h := newHubServer(t, 32<<10, nil)
	quick, slow := uuid.New(), uuid.New()
	quickSandbox, slowSandbox := uuid.New(), uuid.New()
	h.state.set(quick, projectOf(quickSandbox), 1)
	h.state.set(slow, projectOf(slowSandbox), 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	healthy := h.stream(t, ctx, quick)
	stalled := stalledClient(t, h, slow)
	testkit.Until(t, 10*time.Second, "both clients connected", func() bool { return h.hub.Clients() == 2 })
	// More than the sockets hold but less than gets it dropped: its handler is blocked
	// writing when Close comes.
	for id := int64(2); id < 30; id++ {
		h.state.set(slow, projectOf(slowSandbox), id)
		h.deliver(slow, slowSandbox, id)
	}
	dropped := h.counter(t, "sandman_sse_dropped_total")

	h.hub.Close()
	testkit.Until(t, 10*time.Second, "every stream ended", func() bool { return h.hub.Clients() == 0 })
	timeout := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-healthy:
		case <-timeout:
			t.Fatal("the healthy client's stream did not end")
		}
	}
	requireServerClosed(t, stalled)
	if got := h.counter(t, "sandman_sse_dropped_total"); got != dropped {
		t.Fatalf("shutdown counted %v clients as dropped", got-dropped)
	}
	testkit.Until(t, 10*time.Second, "no goroutine stranded by Close", func() bool { return strandedGoroutines() == 0 })

	res, err := http.Get(h.srv.URL + "/events?owner=" + quick.String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a connection after Close: %d, want 503", res.StatusCode)
	}
}

// A founder's first messages are every project's state; with many projects that burst must
// not count as falling behind, and a change made meanwhile must not be lost behind it.
func TestSnapshotOfManyProjectsArrivesWhole(t *testing.T) {
	t.Parallel()
	h := newHubServer(t, 200, nil)
	owner := uuid.New()
	const projects = 200
	var changed uuid.UUID
	for i := range projects {
		sb := uuid.New()
		if i == 0 {
			changed = sb
		}
		h.state.set(owner, projectOf(sb), 1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := h.stream(t, ctx, owner)
	testkit.Until(t, 10*time.Second, "connected", func() bool { return h.hub.Clients() == 1 })
	h.state.set(owner, projectOf(changed), 2)
	h.deliver(owner, changed, 2)

	panes := map[string]bool{}
	newest := false
	testkit.NextSSE(t, events, 20*time.Second, fmt.Sprintf("the panes of all %d projects and the change", projects), func(ev testkit.SSEEvent) bool {
		if ev.Event == views.DOMID(views.Pane, projectOf(changed)) {
			if newest && ev.ID != "2" {
				t.Fatalf("state %s of the changed project followed state 2", ev.ID)
			}
			newest = newest || ev.ID == "2"
		}
		if strings.HasPrefix(ev.Event, views.DOMID(views.Pane, "")) {
			panes[ev.Event] = true
		}
		return len(panes) == projects && newest
	})
	if got := h.counter(t, "sandman_sse_dropped_total"); got != 0 {
		t.Fatalf("the snapshot dropped %v clients", got)
	}
}

func TestClientsGetOnlyTheirOwnersChanges(t *testing.T) {
	t.Parallel()
	h := newHubServer(t, 50, nil)
	alice, bob := uuid.New(), uuid.New()
	aliceSandbox, bobSandbox := uuid.New(), uuid.New()
	h.state.set(alice, projectOf(aliceSandbox), 1)
	h.state.set(bob, projectOf(bobSandbox), 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	aliceEvents := h.stream(t, ctx, alice)
	bobEvents := h.stream(t, ctx, bob)
	isPane := func(sandbox uuid.UUID, id string) func(testkit.SSEEvent) bool {
		return func(ev testkit.SSEEvent) bool {
			return ev.Event == views.DOMID(views.Pane, projectOf(sandbox)) && ev.ID == id
		}
	}
	testkit.NextSSE(t, aliceEvents, 10*time.Second, "alice's snapshot", isPane(aliceSandbox, "1"))
	testkit.NextSSE(t, bobEvents, 10*time.Second, "bob's snapshot", isPane(bobSandbox, "1"))

	h.state.set(alice, projectOf(aliceSandbox), 2)
	h.deliver(alice, aliceSandbox, 2)
	testkit.NextSSE(t, aliceEvents, 10*time.Second, "alice's change", isPane(aliceSandbox, "2"))
	// Bob's own change comes after alice's on the same path: anything of alice's would
	// arrive before it.
	h.state.set(bob, projectOf(bobSandbox), 3)
	h.deliver(bob, bobSandbox, 3)
	testkit.NextSSE(t, bobEvents, 10*time.Second, "bob's change", func(ev testkit.SSEEvent) bool {
		if ev.Event != views.DOMID(views.Card, projectOf(bobSandbox)) && ev.Event != views.DOMID(views.Pane, projectOf(bobSandbox)) {
			t.Fatalf("bob received %s %q", ev.Event, ev.Data)
		}
		return isPane(bobSandbox, "3")(ev)
	})
}

// A client slower than the changes (here: one that reads nothing for a while) is not dropped
// and does not get a backlog: its mailbox keeps only the newest state of each project, which it
// gets once it reads again.
func TestSlowClientGetsTheNewestStateNotEveryState(t *testing.T) {
	t.Parallel()
	h := newHubServer(t, 32<<10, nil) // StallTimeout: the default, far longer than this test
	owner, sandbox := uuid.New(), uuid.New()
	project := projectOf(sandbox)
	h.state.set(owner, project, 1)
	// A client with a tiny receive buffer that reads nothing until the changes are made.
	client := &http.Client{Transport: &http.Transport{DialContext: tinyReceiveBuffer.DialContext}}
	res, err := client.Get(h.srv.URL + "/events?owner=" + owner.String())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	testkit.Until(t, 10*time.Second, "the client connected", func() bool { return h.hub.Clients() == 1 })
	const changes = 500 // 32 MiB of panes: far more than the socket and the stream's buffers
	for id := int64(2); id <= changes; id++ {
		h.state.set(owner, project, id)
		h.deliver(owner, sandbox, id)
	}
	panes := 0
	err = testkit.ReadSSE(bufio.NewReader(res.Body), func(ev testkit.SSEEvent) bool {
		if ev.Event == views.DOMID(views.Pane, project) {
			panes++
			return ev.ID != strconv.Itoa(changes)
		}
		return true
	})
	if err != nil {
		t.Fatalf("reading the slow client's stream after %d panes: %v", panes, err)
	}
	if panes >= changes/2 {
		t.Fatalf("the slow client read %d panes for %d changes: it was sent a backlog, not the newest state", panes, changes)
	}
	if got := h.counter(t, "sandman_sse_dropped_total"); got != 0 {
		t.Fatalf("a slow client was dropped (%v)", got)
	}
	t.Logf("the slow client got %d panes for %d changes", panes, changes)
}

// One founder holds at most MaxPerFounder streams on an instance; the next is refused before
// anything is streamed, and other founders are not affected.
func TestAFounderHoldsAtMostMaxPerFounderStreams(t *testing.T) {
	t.Parallel()
	h := newHubServer(t, 64, func(o *hubConfig) { o.MaxPerFounder = 3 })
	greedy, other := uuid.New(), uuid.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, firstCancel := context.WithCancel(ctx)
	h.stream(t, first, greedy)
	for range 2 {
		h.stream(t, ctx, greedy)
	}
	testkit.Until(t, 10*time.Second, "three streams", func() bool { return h.hub.Clients() == 3 })
	res, err := h.srv.Client().Get(h.srv.URL + "/events?owner=" + greedy.String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a fourth stream: %d, want 429", res.StatusCode)
	}
	if got := h.counter(t, "sandman_sse_refused_total"); got != 1 {
		t.Fatalf("refused_total = %v", got)
	}
	h.stream(t, ctx, other)
	testkit.Until(t, 10*time.Second, "another founder's stream", func() bool { return h.hub.Clients() == 4 })

	firstCancel() // a browser closes: its place is free again
	testkit.Until(t, 10*time.Second, "the closed stream gone", func() bool { return h.hub.Clients() == 3 })
	h.stream(t, ctx, greedy)
	testkit.Until(t, 10*time.Second, "a new stream in its place", func() bool { return h.hub.Clients() == 4 })
}

// EndSession ends the streams of that session, and no other.
func TestEndSessionEndsOnlyItsStreams(t *testing.T) {
	t.Parallel()
	h := newHubServer(t, 64, nil)
	founder := uuid.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a1, a2 := h.sessionStream(t, ctx, founder, "laptop"), h.sessionStream(t, ctx, founder, "laptop")
	phone := h.sessionStream(t, ctx, founder, "phone")
	testkit.Until(t, 10*time.Second, "three streams", func() bool { return h.hub.Clients() == 3 })
	h.hub.End(sessionTopic("laptop"))
	testkit.SSEEnds(t, a1, 10*time.Second)
	testkit.SSEEnds(t, a2, 10*time.Second)
	testkit.Until(t, 10*time.Second, "the laptop's streams gone", func() bool { return h.hub.Clients() == 1 })
	// The phone's stream carries a change made after: a stream ended with the laptop's would
	// end before it, and fail here.
	sandbox := uuid.New()
	h.state.set(founder, projectOf(sandbox), 7)
	h.deliver(founder, sandbox, 7)
	testkit.NextSSE(t, phone, 10*time.Second, "the phone's stream to carry a change after the laptop's session ended",
		func(ev testkit.SSEEvent) bool { return ev.ID == "7" })
}

// watchedWriter is a stream's response that notes any use of it once its handler returned.
type watchedWriter struct {
	http.ResponseWriter
	returned, late atomic.Bool
}

func (w *watchedWriter) Flush() { w.Unwrap().(http.Flusher).Flush() }

// Hijack refuses, as over HTTP/2: the stream is served through this response (a hijacked one
// never touches it again).
func (w *watchedWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return nil, nil, http.ErrNotSupported
}

// Unwrap is how http.ResponseController reaches the connection (write deadlines, flushes).
func (w *watchedWriter) Unwrap() http.ResponseWriter {
	if w.returned.Load() {
		w.late.Store(true)
	}
	return w.ResponseWriter
}

// A stream never touches its response once its handler returned, when the server may be using
// it for another request (echo pools its responses): here the first state fails only after the
// client left and the handler returned, and dropping that connection leaves the response alone.
func TestStreamLeavesItsResponseOnceItsHandlerReturned(t *testing.T) {
	t.Parallel()
	asked, returned, failed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var subscriber string // the goroutine that asked for the state, and drops the stream
	hub := live.New(live.Options{Registerer: prometheus.NewRegistry()})
	snapshot := func(context.Context) ([]live.Message, error) {
		close(asked)
		<-returned
		subscriber = goroutine()
		defer close(failed)
		return nil, errors.New("the database went away")
	}
	w := &watchedWriter{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.ResponseWriter = rw
		_ = hub.Serve(w, r, live.Stream{Topics: []string{founderTopic(uuid.New())}, Snapshot: snapshot})
		w.returned.Store(true)
		close(returned)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// The client leaves once its first state is asked for, before it is made: a client that
	// leaves sooner is never asked for one.
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's first state was never asked for")
	}
	cancel()
	res.Body.Close()
	select {
	case <-failed:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's first state was never made")
	}
	// The failed state drops the connection right after, in the same goroutine: once that
	// goroutine has left the hub, whatever it did to the response is done.
	testkit.Until(t, 10*time.Second, "the failed state's goroutine to leave the hub", func() bool {
		return !strings.Contains(goroutineStack(subscriber), "sandman/live.")
	})
	if w.late.Load() {
		t.Fatal("the stream used its response after its handler returned")
	}
}

// goroutine is the calling goroutine's header line in a stack dump ("goroutine 42 ").
func goroutine() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	head, _, _ := strings.Cut(string(buf), "[")
	return head
}

// goroutineStack is the stack of the goroutine whose header is head, or "" once it has ended.
func goroutineStack(head string) string {
	buf := make([]byte, 1<<20)
	for n := runtime.Stack(buf, true); ; n = runtime.Stack(buf, true) {
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.HasPrefix(g, head+"[") {
			return g
		}
	}
	return ""
}

// A burst of connections (every client reconnecting after a deploy) is given its snapshots by
// at most SnapshotWorkers at once, so it never holds more of the database pool than that, and
// every one of them gets its snapshot; one whose client left while it waited costs none.
func TestABurstOfStreamsMakesAtMostSnapshotWorkersSnapshotsAtOnce(t *testing.T) {
	t.Parallel()
	const workers, streams = 3, 40
	var running, most, made atomic.Int64
	release := make(chan struct{})
	h := newHubServer(t, 64, func(o *hubConfig) {
		o.SnapshotWorkers = workers
		snapshot := o.Snapshot
		o.Snapshot = func(ctx context.Context, owner uuid.UUID) ([]live.Message, error) {
			n := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			made.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return snapshot(ctx, owner)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first workers' snapshots wait on release, so every other stream queues behind them.
	for range workers {
		h.stream(t, ctx, uuid.New())
	}
	testkit.Until(t, 10*time.Second, "the first snapshots under way", func() bool { return running.Load() == workers })
	left, leave := context.WithCancel(ctx)
	leaver := h.stream(t, left, uuid.New())
	for range streams - workers - 1 {
		h.stream(t, ctx, uuid.New())
	}
	time.Sleep(100 * time.Millisecond) // every stream queued, none past the workers
	leave()
	for range leaver {
	}
	testkit.Until(t, 10*time.Second, "the hub to see the client leave", func() bool {
		return h.counter(t, "sandman_sse_clients") == streams-1
	})
	close(release)
	testkit.Until(t, 10*time.Second, "every stream but the one that left has its snapshot", func() bool {
		return h.hub.Clients() == streams-1
	})
	if got := most.Load(); got > workers {
		t.Fatalf("%d snapshots were made at once, want at most SnapshotWorkers (%d)", got, workers)
	}
	if got := made.Load(); got != streams-1 {
		t.Fatalf("%d snapshots made for %d streams of which one left while queued, want %d", got, streams, streams-1)
	}
}
