package live_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/internal/testkit"
	"sandman/live"
	"sandman/views"
)

// noHijack is a response whose connection cannot be taken, as over HTTP/2: the hub serves the
// stream through it instead.
type noHijack struct{ http.ResponseWriter }

func (noHijack) Hijack() (net.Conn, *bufio.ReadWriter, error) { return nil, nil, http.ErrNotSupported }
func (w noHijack) Flush()                                     { w.ResponseWriter.(http.Flusher).Flush() }
func (w noHijack) Unwrap() http.ResponseWriter                { return w.ResponseWriter }

// A client that leaves frees its stream and its place under the founder's cap at once, with
// nothing written to it (the heartbeat here is an hour away): over a connection the hub took
// from the server, which no server reads any more, as through a response it could not take.
func TestAClientThatLeavesFreesItsStreamWithoutAWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wrap func(http.ResponseWriter) http.ResponseWriter
	}{
		{"hijacked", func(w http.ResponseWriter) http.ResponseWriter { return w }},
		{"through the response", func(w http.ResponseWriter) http.ResponseWriter { return noHijack{w} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := newFakeState(64)
			hub := live.New(live.Options{Heartbeat: time.Hour, Registerer: prometheus.NewRegistry()})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if err := hub.Serve(tc.wrap(w), r, founderStream(st, uuid.MustParse(r.URL.Query().Get("owner")), 1)); err != nil {
					http.Error(w, err.Error(), http.StatusTooManyRequests)
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(hub.Close)
			owner := uuid.New()
			st.set(owner, projectOf(uuid.New()), 1)
			url := srv.URL + "/events?owner=" + owner.String()
			for i := range 3 { // the one place, taken and freed three times
				ctx, cancel := context.WithCancel(context.Background())
				events := testkit.OpenSSE(t, ctx, srv.Client(), url)
				testkit.NextSSE(t, events, 10*time.Second, fmt.Sprintf("stream %d's first state", i), func(testkit.SSEEvent) bool { return true })
				cancel()
				testkit.Until(t, 5*time.Second, fmt.Sprintf("stream %d gone once its client left", i), func() bool { return hub.Clients() == 0 })
			}
		})
	}
}

// countingListener counts the writes to the connections it accepts.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	return &countingConn{Conn: c, writes: &l.writes}, err
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A state's events (the card, the pane and the balance) leave in one write, and so does a
// snapshot of many projects: a write per event would cost a system call and a packet each.
func TestAStateLeavesInOneWrite(t *testing.T) {
	t.Parallel()
	st := newFakeState(64)
	hub := live.New(live.Options{Heartbeat: time.Hour, Registerer: prometheus.NewRegistry()})
	l := &countingListener{Listener: newLocalListener(t)}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = hub.Serve(w, r, founderStream(st, uuid.MustParse(r.URL.Query().Get("owner")), 20))
	}))
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	t.Cleanup(hub.Close)

	owner, sandbox := uuid.New(), uuid.New()
	const projects = 20
	st.set(owner, projectOf(sandbox), 1)
	for range projects - 1 {
		st.set(owner, projectOf(uuid.New()), 1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := testkit.OpenSSE(t, ctx, srv.Client(), srv.URL+"/events?owner="+owner.String())
	seen := 0
	testkit.NextSSE(t, events, 10*time.Second, "the snapshot", func(testkit.SSEEvent) bool { seen++; return seen == 2*projects })
	// The status line went alone or with the snapshot: two writes at most.
	if n := l.writes.Load(); n > 2 {
		t.Fatalf("the headers and a snapshot of %d projects took %d writes, want at most 2", projects, n)
	}
	for id := int64(2); id < 5; id++ {
		before := l.writes.Load()
		m := founderMessage(owner, st.set(owner, projectOf(sandbox), id))
		m.Parts = append(m.Parts, live.Part{Event: views.CreditsEvent, Data: []byte("7 credits")})
		hub.Publish(m)
		testkit.NextSSE(t, events, 10*time.Second, "the balance of state "+strconv.FormatInt(id, 10), func(ev testkit.SSEEvent) bool {
			return ev.Event == views.CreditsEvent && ev.ID == strconv.FormatInt(id, 10)
		})
		if n := l.writes.Load() - before; n != 1 {
			t.Fatalf("state %d (card, pane and balance) took %d writes, want 1", id, n)
		}
	}
}

func newLocalListener(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}
