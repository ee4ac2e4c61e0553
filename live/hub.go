// Package live pushes sandbox state to browsers over server-sent events. Each connection (one
// per browser, shared by its tabs) gets its own r3labs stream, so a stalled client can only
// stall itself; fan-out comes from PostgreSQL LISTEN/NOTIFY, so a change applied on any
// instance reaches clients on every instance.
package live

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/r3labs/sse/v2"

	"sandman/views"
)

// Fragments are the rendered card and pane of one project's current sandbox: state, not a
// delta, so a lost message is healed by the next one.
type Fragments struct {
	EventID   int64
	ProjectID string
	Card      []byte
	Pane      []byte
}

// Options configure a Hub.
type Options struct {
	// Render renders one sandbox's fragments for its owner.
	Render func(ctx context.Context, owner, sandboxID uuid.UUID) (Fragments, error)
	// Snapshot renders every current fragment of a founder: what a (re)connection starts with.
	Snapshot func(ctx context.Context, owner uuid.UUID) ([]Fragments, error)
	// Heartbeat is the interval of keep-alive comments (default 20 s).
	Heartbeat time.Duration
	// Buffer is how many messages a connection may fall behind before it is dropped (it
	// reconnects and resyncs). Default 32.
	Buffer     int
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Hub holds the live connections of one instance.
type Hub struct {
	opts Options
	srv  *sse.Server

	mu      sync.Mutex
	byOwner map[uuid.UUID]map[string]*conn
	closed  bool

	metrics *metrics
}

type conn struct {
	id    string
	owner uuid.UUID
	rc    *http.ResponseController
	once  sync.Once
	hub   *Hub
	// ctx is the stream's request context; cancel ends the stream (see end).
	ctx    context.Context
	cancel context.CancelFunc

	mu   sync.Mutex
	sent map[string]int64 // project → newest event id sent, so an older render never follows a newer one
	// syncing is set while the founder's whole state is being sent (see sync); held keeps the
	// changes that arrive meanwhile and again asks for another round.
	syncing bool
	held    map[string]Fragments
	again   bool
}

// New returns a Hub; call Run to start its heartbeat and Listen for the database feed.
func New(opts Options) *Hub {
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 20 * time.Second
	}
	if opts.Buffer == 0 {
		opts.Buffer = 32
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	srv := sse.New()
	// r3labs' defaults keep every event forever and replay it to each subscriber.
	srv.AutoReplay = false
	srv.AutoStream = false
	srv.SplitData = true // rendered HTML has newlines
	srv.BufferSize = opts.Buffer
	srv.Headers = map[string]string{"X-Accel-Buffering": "no"}
	h := &Hub{opts: opts, srv: srv, byOwner: map[uuid.UUID]map[string]*conn{}, metrics: newMetrics(opts.Registerer)}
	srv.OnSubscribe = h.onSubscribe
	return h
}

// ServeHTTP streams the owner's sandbox states until the client goes away or is dropped.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request, owner uuid.UUID) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	c := &conn{id: newID(), owner: owner, rc: http.NewResponseController(w), hub: h, sent: map[string]int64{},
		ctx: ctx, cancel: cancel}
	// The server's write timeout would cut the stream: this response has none.
	_ = c.rc.SetWriteDeadline(time.Time{})
	if !h.add(c) {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer h.remove(c)
	q := r.URL.Query()
	q.Set("stream", c.id)
	r2 := r.Clone(ctx)
	r2.URL.RawQuery = q.Encode()
	// Our ids restart the state, not a replay: a stale Last-Event-ID means nothing here.
	r2.Header.Del("Last-Event-ID")
	h.srv.ServeHTTP(w, r2)
}

func (h *Hub) add(c *conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	h.srv.CreateStream(c.id)
	m := h.byOwner[c.owner]
	if m == nil {
		m = map[string]*conn{}
		h.byOwner[c.owner] = m
	}
	m[c.id] = c
	h.metrics.clients.Inc()
	return true
}

func (h *Hub) remove(c *conn) {
	h.mu.Lock()
	if m := h.byOwner[c.owner]; m != nil {
		if _, ok := m[c.id]; ok {
			delete(m, c.id)
			h.metrics.clients.Dec()
		}
		if len(m) == 0 {
			delete(h.byOwner, c.owner)
		}
	}
	h.mu.Unlock()
	h.srv.RemoveStream(c.id)
}

// drop disconnects a client that fell behind; the browser reconnects and resyncs.
func (c *conn) drop() {
	c.once.Do(func() {
		if c.ctx.Err() == nil { // not merely a client that already left
			c.hub.metrics.dropped.Inc()
		}
		c.end()
	})
}

// end finishes the stream. Its writes are made to fail at once, so a handler blocked writing to
// a stalled client gets going again. The stream is ended through the request's context, not by
// removing it: r3labs deregisters the subscriber when that context ends and blocks forever
// doing so if the stream has already stopped, so the stream goes only after ServeHTTP returns.
func (c *conn) end() {
	_ = c.rc.SetWriteDeadline(time.Now())
	c.cancel()
}

// onSubscribe sends a new connection the founder's current state.
func (h *Hub) onSubscribe(streamID string, _ *sse.Subscriber) {
	h.mu.Lock()
	var c *conn
	for _, m := range h.byOwner {
		if x, ok := m[streamID]; ok {
			c = x
			break
		}
	}
	h.mu.Unlock()
	if c == nil {
		return
	}
	h.sync(c, nil)
}

// syncPatience is how long a connection may take to accept its whole state (a burst of two
// messages per project, far more than Buffer for a founder with many projects) before it
// counts as stalled.
const syncPatience = 10 * time.Second

// sync sends c the founder's whole state: frags, or a fresh snapshot when frags is nil. The
// burst is paced to what the connection takes instead of dropping it when its buffer fills;
// changes arriving meanwhile are held (newest per project) and sent after it, and a second
// sync asked for meanwhile runs again from a fresh snapshot.
func (h *Hub) sync(c *conn, frags []Fragments) {
	c.mu.Lock()
	if c.syncing {
		c.again = true
		c.mu.Unlock()
		return
	}
	c.syncing = true
	c.mu.Unlock()
	for {
		if frags == nil {
			ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
			var err error
			frags, err = h.opts.Snapshot(ctx, c.owner)
			cancel()
			if err != nil {
				if c.ctx.Err() == nil {
					h.opts.Logger.Warn("live: snapshot failed", "err", err)
				}
				c.drop()
				return
			}
		}
		for _, f := range frags {
			if !h.sendPatiently(c, f) {
				return
			}
		}
		c.mu.Lock()
		held, again := c.held, c.again
		c.held, c.again = nil, false
		if len(held) == 0 && !again {
			c.syncing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		frags = nil
		if !again { // a fresh snapshot would include what was held
			for _, f := range held {
				frags = append(frags, f)
			}
		}
	}
}

// sendPatiently is send for a sync: it waits for room (up to syncPatience) instead of
// dropping the connection at once. Only the syncing goroutine publishes to c meanwhile.
func (h *Hub) sendPatiently(c *conn, f Fragments) bool {
	deadline := time.Now().Add(syncPatience)
	evs := fragmentEvents(f)
	for {
		c.mu.Lock()
		if f.EventID < c.sent[f.ProjectID] {
			c.mu.Unlock()
			return true
		}
		for len(evs) > 0 && h.srv.TryPublish(c.id, evs[0]) {
			evs = evs[1:]
		}
		if len(evs) == 0 {
			c.sent[f.ProjectID] = f.EventID
			c.mu.Unlock()
			return true
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			c.drop()
			return false
		}
		select {
		case <-c.ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// fragmentEvents are the two events of one project's state, the card and the pane, named for
// the elements they replace.
func fragmentEvents(f Fragments) []*sse.Event {
	id := []byte(strconv.FormatInt(f.EventID, 10))
	return []*sse.Event{
		{ID: id, Event: []byte(views.DOMID(views.Card, f.ProjectID)), Data: f.Card},
		{ID: id, Event: []byte(views.DOMID(views.Pane, f.ProjectID)), Data: f.Pane},
	}
}

// send publishes one project's fragments to one connection, dropping a connection that has
// fallen Buffer messages behind. During a sync it holds them for the sync to send.
func (h *Hub) send(c *conn, f Fragments) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.syncing {
		if old, ok := c.held[f.ProjectID]; !ok || f.EventID >= old.EventID {
			if c.held == nil {
				c.held = map[string]Fragments{}
			}
			c.held[f.ProjectID] = f
		}
		return true
	}
	if f.EventID < c.sent[f.ProjectID] {
		return true // a newer state of this project already went out
	}
	c.sent[f.ProjectID] = f.EventID
	for _, ev := range fragmentEvents(f) {
		if !h.srv.TryPublish(c.id, ev) {
			c.drop()
			return false
		}
	}
	return true
}

// Deliver renders one sandbox's change once and sends it to the owner's connections here.
func (h *Hub) Deliver(ctx context.Context, owner, sandboxID uuid.UUID, eventID int64) {
	conns := h.conns(owner)
	if len(conns) == 0 {
		return
	}
	start := time.Now()
	f, err := h.opts.Render(ctx, owner, sandboxID)
	if err != nil {
		h.opts.Logger.Warn("live: render failed", "sandbox_id", sandboxID, "err", err)
		return
	}
	if eventID > f.EventID {
		f.EventID = eventID
	}
	for _, c := range conns {
		h.send(c, f)
	}
	h.metrics.fanout.Observe(time.Since(start).Seconds())
}

// Resync sends every connected founder their current state (after the feed was interrupted).
// Each connection takes it at its own pace, so a slow one holds up no other.
func (h *Hub) Resync(ctx context.Context) {
	h.mu.Lock()
	owners := make([]uuid.UUID, 0, len(h.byOwner))
	for o := range h.byOwner {
		owners = append(owners, o)
	}
	h.mu.Unlock()
	for _, o := range owners {
		frags, err := h.opts.Snapshot(ctx, o)
		if err != nil {
			h.opts.Logger.Warn("live: resync failed", "err", err)
			continue
		}
		for _, c := range h.conns(o) {
			go h.sync(c, frags)
		}
	}
}

func (h *Hub) conns(owner uuid.UUID) []*conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.byOwner[owner]
	out := make([]*conn, 0, len(m))
	for _, c := range m {
		out = append(out, c)
	}
	return out
}

// Run sends heartbeats until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	t := time.NewTicker(h.opts.Heartbeat)
	defer t.Stop()
	ping := &sse.Event{Comment: []byte("ping")}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.mu.Lock()
			var all []*conn
			for _, m := range h.byOwner {
				for _, c := range m {
					all = append(all, c)
				}
			}
			h.mu.Unlock()
			for _, c := range all {
				h.ping(c, ping)
			}
		}
	}
}

// ping keeps the connection alive; a sync in progress already does, and may fill its buffer.
func (h *Hub) ping(c *conn, ev *sse.Event) {
	c.mu.Lock()
	ok := c.syncing || h.srv.TryPublish(c.id, ev)
	c.mu.Unlock()
	if !ok {
		c.drop()
	}
}

// Close ends every stream (server shutdown waits for open streams otherwise).
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	var all []*conn
	for _, m := range h.byOwner {
		for _, c := range m {
			all = append(all, c)
		}
	}
	h.mu.Unlock()
	for _, c := range all {
		c.end()
	}
}

// Clients is the number of open connections on this instance.
func (h *Hub) Clients() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.byOwner {
		n += len(m)
	}
	return n
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
