// Package live is a hub of server-sent event streams by topic (docs/architecture.md, "Live
// updates"). A stream follows topics; a publisher (package feed) publishes messages to a topic,
// each the newest state of a key. Each connection has a mailbox that holds the newest message of
// each key, and one writer that empties it into the connection's own r3labs stream, so a
// stalled client can only stall itself. The hub knows nothing of what its messages say, nor of
// who follows what: topics, keys and events are opaque strings.
package live

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/maphash"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/r3labs/sse/v2"
)

// A Message is one state of something a stream shows, for the streams that follow its topic:
// state, not a delta, so a lost message is healed by the next one, and a stream only ever needs
// the newest message of each key. The hub knows nothing of what it carries: topics and keys are
// opaque strings chosen by its publishers (package feed), the parts are the stream's events.
type Message struct {
	// Topic names the streams that get it: those that follow it (Stream.Topics).
	Topic string
	// Key is what the message is the state of: a stream's mailbox keeps the newest per key.
	Key string
	// ID orders a key's states (the SSE id): an older one never follows a newer one.
	ID int64
	// Parts are its events, sent together, in order, under one id.
	Parts []Part
	// Final makes it the last message of every stream that follows Topic: they follow nothing
	// more, and end once their clients had StallTimeout to read it.
	Final bool
}

// Part is one event of a message: its name (an element's sse-swap) and its data.
type Part struct {
	Event string
	Data  []byte
}

// Options configure a Hub.
type Options struct {
	// Heartbeat is the interval of keep-alive comments (default 20 s).
	Heartbeat time.Duration
	// StallTimeout is how long a connection's writer waits for its client to take a message
	// before dropping the client, which reconnects and starts again from a snapshot (default
	// 10 s).
	StallTimeout time.Duration
	// Buffer is how many messages r3labs queues between a writer and its client (default 32).
	Buffer int
	// SnapshotWorkers is how many connections' snapshots are made at once (default 8); the
	// rest wait their turn in a queue.
	SnapshotWorkers int

	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Hub holds the live connections of one instance.
type Hub struct {
	opts Options
	srv  *sse.Server

	mu      sync.Mutex
	byID    map[string]*conn
	byTopic map[string]map[string]*conn // the streams that follow each topic
	counts  map[string]int              // the streams held under each cap's key (Stream.Caps)
	closed  bool
	// ends counts the topics ended (End); ended is the count at each one's end, so a stream
	// whose grant was checked before it follows none of the granted topics (Stream.Grant).
	ends  uint64
	ended map[string]uint64

	// The connections waiting for their snapshot, and the goroutines making them (onSubscribe).
	snapMu      sync.Mutex
	snapQueue   []*conn
	snapWorkers int

	metrics *metrics
}

// conn is one client's stream: a mailbox that Publish and the heartbeat fill, and one
// writer at a time that empties it into the stream: the poster itself while the stream has
// room, else a writer goroutine that runs while there is mail.
type conn struct {
	id     string
	topics []string // what it follows (Stream.Topics, and Stream.Grant's unless revoked)
	caps   []string // the caps' keys it counts under (Stream.Caps)
	// snapshot is its first state (Stream.Snapshot).
	snapshot func(context.Context) ([]Message, error)
	hub      *Hub
	// ctx is the stream's own context; cancel ends the stream (see end).
	ctx      context.Context
	cancel   context.CancelFunc
	dropOnce sync.Once
	// published counts the events given to the stream (send), so that its writer knows a
	// state's events still on their way and writes them out together (streamWriter.Flush).
	published atomic.Int64

	// rmu guards what end cuts: the hijacked connection (nc), or the response (rc) against a
	// late end (a failed snapshot, a stall's timer) once Serve has returned, when the server
	// may reuse it for another request (echo pools them).
	rmu      sync.Mutex
	nc       net.Conn
	rc       *http.ResponseController
	returned bool

	mu         sync.Mutex
	latest     map[string]*message // the mailbox: per key, the newest state not yet written
	ping       bool                // a heartbeat is due
	subscribed bool                // the stream has its subscriber: until then, mail waits
	writing    bool                // a writer runs (or ended with the connection)

	// sent is the newest state written per key: its id, so an older state never follows
	// a newer one, and its drawing, so the same state drawn the same is not sent twice. Only the
	// current writer touches it: a poster holding mu while writing is false, or the writer
	// goroutine while it is true.
	sent map[string]sentState
}

// sentState is the last state a connection wrote of one key.
type sentState struct {
	eventID int64
	drawing uint64
}

// message is one key's state as its streams send it: its event made once and shared by every
// connection that gets it (stateEvent).
type message struct {
	eventID int64
	key     string // the Message's key
	event   *sse.Event
	// drawing is a hash of the event's bytes: a state of the same event that draws something
	// else is sent again (a visitor's page whose app went down or is starting: no event of its
	// own), the same drawing never twice.
	drawing uint64
}

// drawings seeds the hashes of the messages' drawings (message.drawing); a hash is compared
// only with another of the same process.
var drawings = maphash.MakeSeed()

// New returns a Hub; call Run to start its heartbeat.
func New(opts Options) *Hub {
	if opts.Heartbeat == 0 {
		opts.Heartbeat = 20 * time.Second
	}
	if opts.StallTimeout == 0 {
		opts.StallTimeout = 10 * time.Second
	}
	if opts.Buffer == 0 {
		opts.Buffer = 32
	}
	if opts.SnapshotWorkers == 0 {
		opts.SnapshotWorkers = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	srv := sse.New()
	// r3labs' defaults keep every event forever and replay it to each subscriber.
	srv.AutoReplay = false
	srv.AutoStream = false
	// Each state's data is split into lines once (stateEvent), not by r3labs on every connection.
	srv.SplitData = false
	srv.BufferSize = opts.Buffer
	srv.Headers = map[string]string{"X-Accel-Buffering": "no"}
	h := &Hub{opts: opts, srv: srv, byID: map[string]*conn{}, byTopic: map[string]map[string]*conn{}, counts: map[string]int{},
		ended: map[string]uint64{}, metrics: newMetrics(opts.Registerer)}
	srv.OnSubscribe = h.onSubscribe
	return h
}

// Stream says what a stream follows.
type Stream struct {
	// Topics are what it follows: every message published to one of them.
	Topics []string
	// Grant, if set, adds topics the stream follows by a right that can be revoked (End of its
	// Revoke topic), unless it was revoked after Grant.Seen.
	Grant *Grant
	// Snapshot is the stream's first state, asked for once the stream has its subscriber: what
	// its topics show now.
	Snapshot func(context.Context) ([]Message, error)
	// Caps are the counts the stream is held under: Serve refuses it when one is full.
	Caps []Cap
	// Ends is when the stream ends (its session's expiry). Zero: never.
	Ends time.Time
}

// Grant is a set of topics a stream follows by a right checked before Serve: Seen is the hub's
// Ends read before the check, so that a revocation (End(Revoke)) the check may have missed still
// takes the topics away.
type Grant struct {
	Revoke string
	Topics []string
	Seen   uint64
}

// Cap bounds the streams held under one key on this instance (a founder's, a link's, a client
// address's).
type Cap struct {
	Key string
	Max int
}

// Errors Serve answers with before streaming anything.
var (
	// ErrTooManyStreams: one of the stream's caps (Stream.Caps) is full on this instance.
	ErrTooManyStreams = errors.New("live: too many streams")
	// ErrClosed: the hub is shutting down.
	ErrClosed = errors.New("live: shutting down")
)

// Serve streams what s follows until the client goes away, is dropped, or the stream ends
// (Ends, End, a Final message). It answers ErrTooManyStreams or ErrClosed at once, having written nothing.
//
// Over HTTP/1.1 it takes the connection from the server (a hijack) and returns: the stream is
// served from a goroutine of its own, shallow, instead of the request's, parked under every
// middleware for the stream's life, and the server's per-connection read and write buffers go
// with the request (streamWriter holds a buffer only while it writes). Where the connection
// cannot be taken (HTTP/2), the stream is served here, through the response, until it ends.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, s Stream) error {
	// The request's context ends when its handler returns, and it holds the whole request (the
	// session's values included): the stream's is its own.
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{id: newID(), snapshot: s.Snapshot, hub: h, ctx: ctx, cancel: cancel, sent: map[string]sentState{}}
	if err := h.add(c, s); err != nil {
		cancel()
		return err
	}
	header := w.Header().Clone() // what the middleware set (security headers): the stream's too
	nc, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		stop := context.AfterFunc(r.Context(), c.end) // the client left
		defer stop()
		c.setResponse(http.NewResponseController(w))
		defer c.handlerReturns()
		// The server's write timeout would cut the stream: this response has none. (Its
		// ReadTimeout does not reach it: net/http lifts the read deadline once a body-less
		// request is read.)
		_ = c.rc.SetWriteDeadline(time.Time{})
		h.stream(c, w, s.Ends)
		return nil
	}
	// A hijacked connection keeps the server's deadlines: the stream has none.
	_ = nc.SetDeadline(time.Time{})
	sw := &streamWriter{c: c, nc: nc, header: header, chunked: r.ProtoAtLeast(1, 1), flushed: -1}
	c.setConn(nc)
	// Nothing reads a hijacked connection, so nothing else would notice its client leave before a
	// write to it failed (two heartbeats later): its hang-up ends the stream at once.
	unwatch := watchHangup(nc, c.end)
	go func() {
		h.stream(c, sw, s.Ends)
		unwatch()
		sw.close()
	}()
	return nil
}

// stream serves c's r3labs stream to w until it ends.
func (h *Hub) stream(c *conn, w http.ResponseWriter, ends time.Time) {
	defer h.remove(c)
	defer c.cancel()
	if !ends.IsZero() {
		expiry := time.AfterFunc(time.Until(ends), c.end)
		defer expiry.Stop()
	}
	// r3labs reads the stream's id from the query, and its context: nothing else of the request.
	// (No Last-Event-ID either: our ids restart the state, not a replay.)
	r, _ := http.NewRequestWithContext(c.ctx, http.MethodGet, "/?stream="+c.id, nil)
	h.srv.ServeHTTP(w, r)
}

func (h *Hub) add(c *conn, s Stream) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	for _, cp := range s.Caps {
		if h.counts[cp.Key] >= cp.Max {
			h.metrics.refused.Inc()
			return ErrTooManyStreams
		}
	}
	for _, cp := range s.Caps {
		h.counts[cp.Key]++
		c.caps = append(c.caps, cp.Key)
	}
	c.topics = append(c.topics, s.Topics...)
	if g := s.Grant; g != nil && h.ended[g.Revoke] <= g.Seen {
		c.topics = append(c.topics, g.Topics...)
	}
	h.srv.CreateStream(c.id)
	for _, t := range c.topics {
		m := h.byTopic[t]
		if m == nil {
			m = map[string]*conn{}
			h.byTopic[t] = m
		}
		m[c.id] = c
	}
	h.byID[c.id] = c
	h.metrics.clients.Inc()
	return nil
}

// End ends this instance's streams that follow topic (a session that logged out, an operator
// removed, on any instance), and revokes the grants of topic (Grant.Revoke) checked before now.
func (h *Hub) End(topic string) {
	h.mu.Lock()
	h.ends++
	h.ended[topic] = h.ends
	ended := make([]*conn, 0, len(h.byTopic[topic]))
	for _, c := range h.byTopic[topic] {
		ended = append(ended, c)
	}
	h.mu.Unlock()
	for _, c := range ended {
		c.end()
	}
}

// Ends is the number of topics this hub has ended: read it before checking a right, and give
// it as Grant.Seen.
func (h *Hub) Ends() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ends
}

// remove forgets a connection whose stream has ended. The stream goes only now: r3labs
// deregisters the subscriber when the request's context ends and blocks forever doing so if
// the stream has already stopped.
func (h *Hub) remove(c *conn) {
	h.mu.Lock()
	if _, ok := h.byID[c.id]; ok {
		delete(h.byID, c.id)
		h.metrics.clients.Dec()
		for _, k := range c.caps {
			if h.counts[k]--; h.counts[k] == 0 {
				delete(h.counts, k)
			}
		}
	}
	h.unindex(c)
	h.mu.Unlock()
	h.srv.RemoveStream(c.id)
}

// unindex makes c follow nothing more; h.mu is held.
func (h *Hub) unindex(c *conn) {
	for _, t := range c.topics {
		if m := h.byTopic[t]; m != nil {
			delete(m, c.id)
			if len(m) == 0 {
				delete(h.byTopic, t)
			}
		}
	}
}

// onSubscribe runs once a connection's stream has its subscriber (on a goroutine r3labs starts
// for it): the connection starts with its snapshot (Stream.Snapshot: what its topics show now),
// and the mail held until now follows (newer states win). The snapshots are made by at most
// SnapshotWorkers goroutines, this one among them while there are fewer: a burst of
// connections (every client reconnecting after a deploy) waits in a queue, not as a goroutine
// per connection parked on the database pool, which would hold the pool from every other
// request and leave the process those goroutines' records and a fragmented heap for as long as
// it runs (docs/architecture.md, "Live updates").
func (h *Hub) onSubscribe(streamID string, _ *sse.Subscriber) {
	h.mu.Lock()
	c := h.byID[streamID]
	h.mu.Unlock()
	if c == nil {
		return
	}
	h.snapMu.Lock()
	h.snapQueue = append(h.snapQueue, c)
	work := h.snapWorkers < h.opts.SnapshotWorkers
	if work {
		h.snapWorkers++
	}
	h.snapMu.Unlock()
	if work {
		h.snapshots()
	}
}

// snapshots sends the queued connections their first state until the queue is empty.
func (h *Hub) snapshots() {
	for {
		h.snapMu.Lock()
		if len(h.snapQueue) == 0 {
			h.snapQueue = nil
			h.snapWorkers--
			h.snapMu.Unlock()
			return
		}
		c := h.snapQueue[0]
		h.snapQueue[0] = nil
		h.snapQueue = h.snapQueue[1:]
		h.snapMu.Unlock()
		if c.ctx.Err() == nil { // its client may have left while it waited
			h.sendSnapshot(c)
		}
	}
}

// sendSnapshot makes c's snapshot and posts it; a connection without one is dropped (it
// reconnects and asks again).
func (h *Hub) sendSnapshot(c *conn) {
	var msgs []Message
	if c.snapshot != nil {
		ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
		var err error
		msgs, err = c.snapshot(ctx)
		cancel()
		if err != nil {
			if c.ctx.Err() == nil {
				h.opts.Logger.Warn("live: snapshot failed", "err", err)
			}
			c.drop()
			return
		}
	}
	// Only what the stream follows: a snapshot asked for a topic its grant lost is not its to show.
	msgs = slices.DeleteFunc(msgs, func(m Message) bool { return !slices.Contains(c.topics, m.Topic) })
	c.post(mail{msgs: newMessages(msgs), subscribed: true})
}

// newMessages makes each message's event once, for every connection that gets it.
func newMessages(msgs []Message) []*message {
	out := make([]*message, len(msgs))
	for i, m := range msgs {
		ev := stateEvent(m)
		out[i] = &message{eventID: m.ID, key: m.Key, event: ev, drawing: maphash.Bytes(drawings, ev.Data)}
	}
	return out
}

// Publish posts each message to the streams here that follow its topic. It never waits for a
// client. A Final message is the last its streams get: they follow nothing from then on, and
// end once their clients had StallTimeout to read it.
func (h *Hub) Publish(msgs ...Message) {
	for _, m := range msgs {
		h.mu.Lock()
		followers := h.byTopic[m.Topic]
		conns := make([]*conn, 0, len(followers))
		for _, c := range followers {
			conns = append(conns, c)
		}
		if m.Final {
			for _, c := range conns {
				h.unindex(c)
			}
		}
		h.mu.Unlock()
		if len(conns) == 0 {
			continue
		}
		ml := mail{msgs: newMessages([]Message{m})}
		for _, c := range conns {
			c.post(ml)
			if m.Final {
				time.AfterFunc(h.opts.StallTimeout, c.end)
			}
		}
	}
}

// Following says whether a stream here follows topic: a publisher renders nothing for none.
func (h *Hub) Following(topic string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byTopic[topic]) > 0
}

// Topics are the topics followed here (after the publisher may have missed changes, it
// publishes each one's state again).
func (h *Hub) Topics() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.byTopic))
	for t := range h.byTopic {
		out = append(out, t)
	}
	return out
}

// Run sends heartbeats until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	t := time.NewTicker(h.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			for _, c := range h.all() {
				c.post(mail{ping: true})
			}
		}
	}
}

// Close ends every stream (server shutdown waits for open streams otherwise).
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	for _, c := range h.all() {
		c.end()
	}
}

func (h *Hub) all() []*conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*conn, 0, len(h.byID))
	for _, c := range h.byID {
		out = append(out, c)
	}
	return out
}

// Clients is the number of live streams on this instance: connections that have their first
// state (their snapshot) and so carry every change from then on. A connection still waiting for
// its snapshot is not counted: a change made then reaches it only as part of the snapshot.
func (h *Hub) Clients() int {
	n := 0
	for _, c := range h.all() {
		c.mu.Lock()
		if c.subscribed {
			n++
		}
		c.mu.Unlock()
	}
	return n
}

// mail is what is posted to a connection.
type mail struct {
	msgs       []*message // keys' new states
	ping       bool       // a heartbeat
	subscribed bool       // the stream has its subscriber now: the writing may start
}

// post hands mail to the connection. When nothing is waiting and the stream has room, the
// poster writes it at once, in its own goroutine, as the writer would (it holds the mailbox,
// so no writer runs meanwhile): the common case costs no goroutine. Anything else goes to the
// mailbox, which keeps the newest state of each key, and the writer is started unless one
// runs. Mail posted before the stream has its subscriber waits for it.
func (c *conn) post(m mail) {
	msgs, ping := m.msgs, m.ping
	c.mu.Lock()
	c.subscribed = c.subscribed || m.subscribed
	if c.subscribed && !c.writing && len(c.latest) == 0 && !c.ping {
		msgs, ping, _ = c.send(msgs, ping, c.tryPublish)
	}
	for _, m := range msgs {
		if old, ok := c.latest[m.key]; !ok || m.eventID >= old.eventID {
			if c.latest == nil {
				c.latest = map[string]*message{}
			}
			c.latest[m.key] = m
		}
	}
	c.ping = c.ping || ping
	start := c.subscribed && !c.writing && (len(c.latest) > 0 || c.ping)
	if start {
		c.writing = true
	}
	c.mu.Unlock()
	if start {
		go c.write()
	}
}

// write empties the mailbox into the stream until it stays empty. Unlike a poster it may wait
// for its client; a client that makes it wait longer than StallTimeout is dropped, and the
// writer ends with the connection.
func (c *conn) write() {
	for {
		c.mu.Lock()
		mail, ping := c.latest, c.ping
		c.latest, c.ping = nil, false
		if len(mail) == 0 && !ping {
			c.writing = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		msgs := make([]*message, 0, len(mail))
		for _, m := range mail {
			msgs = append(msgs, m)
		}
		if _, _, ok := c.send(msgs, ping, c.publish); !ok {
			return
		}
	}
}

// send writes msgs, then the heartbeat when ping, with publish, skipping any state older than
// one already sent. It stops at the first event publish refuses and returns what is left; ok
// is false when publish gave up on the connection.
func (c *conn) send(msgs []*message, ping bool, publish func(*sse.Event) (taken, ok bool)) (rest []*message, restPing, ok bool) {
	// The events about to go are counted before the first goes, so that the stream's writer
	// waits for them all and writes them at once (streamWriter.Flush); those the stream
	// refuses are taken back, and always follow later (the rest is mail).
	due := 0
	for _, m := range msgs {
		if c.due(m) {
			due++
		}
	}
	if ping {
		due++
	}
	c.published.Add(int64(due))
	for i, m := range msgs {
		if !c.due(m) {
			continue
		}
		if taken, ok := publish(m.event); !taken {
			c.published.Add(-int64(due))
			return msgs[i:], ping, ok
		}
		due--
		c.sent[m.key] = sentState{m.eventID, m.drawing}
	}
	if ping {
		if taken, ok := publish(heartbeat); !taken {
			c.published.Add(-1)
			return nil, true, ok
		}
	}
	return nil, false, true
}

// due says whether m is still to be sent on this connection: it is a newer state than the last
// one sent of its key, or that state drawn differently (docs/architecture.md, "Live
// updates").
func (c *conn) due(m *message) bool {
	last, ok := c.sent[m.key]
	switch {
	case !ok || m.eventID > last.eventID:
		return true
	case m.eventID < last.eventID:
		return false // a newer state of this key already went out
	}
	return m.drawing != last.drawing
}

// heartbeat is the keep-alive comment, the same event for every stream.
var heartbeat = &sse.Event{Comment: []byte("ping")}

// tryPublish queues ev on the connection's stream if it has room now.
func (c *conn) tryPublish(ev *sse.Event) (taken, ok bool) {
	return c.hub.srv.TryPublish(c.id, ev), true
}

// publish queues ev on the connection's stream, waiting for the client at most StallTimeout.
// ok is false when the connection is no longer worth writing to.
func (c *conn) publish(ev *sse.Event) (taken, ok bool) {
	srv := c.hub.srv
	if srv.TryPublish(c.id, ev) {
		return true, true
	}
	if c.ctx.Err() != nil {
		return false, false
	}
	// Publish returns once the stream takes the event, or has stopped; dropping the client
	// makes its writes fail at once, so the stream drains and Publish returns.
	stall := time.AfterFunc(c.hub.opts.StallTimeout, c.drop)
	srv.Publish(c.id, ev)
	ok = stall.Stop() && c.ctx.Err() == nil
	return ok, ok
}

// stateEvent is one message as one r3labs event: r3labs writes an event's fields as they are,
// so the data of a message's first parts carries them whole (their data lines, their names, the
// next one's id), and the last one's name is the event's own. On the wire these are the
// message's events, one after the other, as the browser reads them; for r3labs a message is one
// event: one hop through its stream and one turn of its writer instead of one per part, and a
// state is never split on a stream.
func stateEvent(m Message) *sse.Event {
	id := strconv.FormatInt(m.ID, 10)
	var data bytes.Buffer
	for i, p := range m.Parts {
		if i > 0 {
			data.WriteString("\nevent: " + m.Parts[i-1].Event + "\n\nid: " + id + "\ndata: ")
		}
		data.Write(bytes.ReplaceAll(p.Data, []byte("\n"), []byte("\ndata: ")))
	}
	out := data.Bytes()
	// r3labs writes data that starts with ':' as it is (a comment line): such data starts with an
	// empty comment line instead.
	if bytes.HasPrefix(out, []byte(":")) {
		out = append([]byte(":\ndata: "), out...)
	}
	var name []byte
	if len(m.Parts) > 0 {
		name = []byte(m.Parts[len(m.Parts)-1].Event)
	}
	return &sse.Event{ID: []byte(id), Event: name, Data: out}
}

// drop disconnects a client that stopped taking messages; the browser reconnects and resyncs.
func (c *conn) drop() {
	c.dropOnce.Do(func() {
		if c.ctx.Err() == nil { // not merely a client that already left
			c.hub.metrics.dropped.Inc()
		}
		c.end()
	})
}

// end finishes the stream. Its writes are made to fail at once, so a writer blocked on a
// stalled client gets going again, and its context ends, which ends the stream.
func (c *conn) end() {
	c.rmu.Lock()
	switch {
	case c.nc != nil:
		_ = c.nc.SetWriteDeadline(time.Now())
	case c.rc != nil && !c.returned:
		_ = c.rc.SetWriteDeadline(time.Now())
	}
	c.rmu.Unlock()
	c.cancel()
}

// setConn and setResponse give end what to cut: the hijacked connection, or the response.
func (c *conn) setConn(nc net.Conn) {
	c.rmu.Lock()
	c.nc = nc
	c.rmu.Unlock()
}

func (c *conn) setResponse(rc *http.ResponseController) {
	c.rmu.Lock()
	c.rc = rc
	c.rmu.Unlock()
}

// handlerReturns marks the end of Serve: from then on nothing touches the response.
func (c *conn) handlerReturns() {
	c.rmu.Lock()
	c.returned = true
	c.rmu.Unlock()
}

func newID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
