// Package live pushes sandbox state to browsers over server-sent events (docs/architecture.md,
// "Live updates"). Each connection (one per browser, shared by its tabs) has a mailbox that
// holds the newest fragments of each of its founder's projects, and one writer that empties it
// into the connection's own r3labs stream, so a stalled client can only stall itself. Fan-out
// comes from PostgreSQL LISTEN/NOTIFY, so a change applied on any instance reaches clients on
// every instance. A visitor of a share link has a stream too, scoped to that link: it carries
// the visitor's page of that one project and nothing else.
package live

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"hash/maphash"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/r3labs/sse/v2"

	"sandman/views"
)

// Fragments are the rendered card and pane of one project's current sandbox: state, not a
// delta, so a lost message is healed by the next one, and only the newest needs sending.
type Fragments struct {
	EventID   int64
	ProjectID string
	Card      []byte
	Pane      []byte
	// Credits is the founder's balance as the header says it, sent as its own event
	// (CreditsEvent) so that every page's header follows it, whether or not the page shows
	// this project.
	Credits []byte
	// Share is the visitor's page of a shared project (the only thing a visitor's stream
	// carries); Final marks the last message of a visitor's stream (its link stopped working).
	Share []byte
	Final bool
	// Ops is the operator's console (views.OpsConsoleView), the only thing of its message: an
	// operator's stream carries it beside the founder's own states.
	Ops []byte
}

// CreditsEvent names the stream's event that carries the founder's balance.
const CreditsEvent = "credits"

// Options configure a Hub.
type Options struct {
	// Render renders one sandbox's fragments for its owner.
	Render func(ctx context.Context, owner, sandboxID uuid.UUID) (Fragments, error)
	// Snapshot renders every current fragment of a founder: what a (re)connection starts with.
	Snapshot func(ctx context.Context, owner uuid.UUID) ([]Fragments, error)
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
	// MaxPerFounder is how many streams one founder may hold open on this instance (default
	// 20). One browser shares one stream between its tabs, so this is about 20 browsers.
	MaxPerFounder int

	// RenderShare renders the visitor's page of the project one of the owner's sandboxes
	// belongs to (Fragments.ProjectID and Share set), for the visitors' streams of that project.
	RenderShare func(ctx context.Context, owner, sandboxID uuid.UUID) (Fragments, error)
	// ShareSnapshot renders the visitor's page of a project: what a visitor's (re)connection
	// starts with.
	ShareSnapshot func(ctx context.Context, projectID uuid.UUID) (Fragments, error)
	// ShareEnded is the last fragment a visitor's stream carries when its link stops working.
	ShareEnded []byte
	// RenderOps renders the operator's console, for the operators' streams: once per change (at
	// most once per OpsEvery), shared by every operator's stream on this instance.
	RenderOps func(ctx context.Context) ([]byte, error)
	// OpsEvery is the least time between two renders of the console (default 1 s): a burst of
	// changes across the fleet costs one render per interval, the last change always included.
	OpsEvery time.Duration
	// MaxPerLink is how many visitors' streams one share link may have open on this instance
	// (default 200); MaxPerAddress how many one client address may (default 20).
	MaxPerLink, MaxPerAddress int
	// Sessions, if set, is told of sessions that ended or changed on any instance, and of the
	// feed's ups and downs (Listen).
	Sessions SessionCache

	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Hub holds the live connections of one instance.
type Hub struct {
	opts Options
	srv  *sse.Server

	mu      sync.Mutex
	byID    map[string]*conn
	byOwner map[uuid.UUID]map[string]*conn
	// visitors are the visitors' streams, by the owner of the project they show (a change
	// arrives as the owner's), and counted per link and per client address.
	visitors map[uuid.UUID]map[string]*conn
	perLink  map[uuid.UUID]int
	perAddr  map[string]int
	closed   bool

	// The console's renders: one pending at most, never closer than OpsEvery; operators counts
	// the operators' streams, so a change costs nothing more while there are none.
	opsPending bool
	opsLast    time.Time
	operators  int
	// opsEnds counts the operators removed (EndOperator); opsEnded is the count at each one's
	// removal, so a stream whose operator check came before it carries no console (add).
	opsEnds  uint64
	opsEnded map[uuid.UUID]uint64

	// The connections waiting for their snapshot, and the goroutines making them (onSubscribe).
	snapMu      sync.Mutex
	snapQueue   []*conn
	snapWorkers int

	metrics *metrics
	// dispatch delivers what LISTEN notices, off its loop (dispatch.go).
	dispatch *dispatcher
}

// conn is one client's stream: a mailbox that Deliver, Resync and the heartbeat fill, and one
// writer at a time that empties it into the stream: the poster itself while the stream has
// room, else a writer goroutine that runs while there is mail.
type conn struct {
	id      string
	owner   uuid.UUID
	session string // Stream.Session
	share   *Share // a visitor's stream: the link it follows; nil for a founder's
	// operator: the founder is an operator: the stream carries the console too.
	operator bool
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
	latest     map[string]*message // the mailbox: per project, the newest state not yet written
	ping       bool                // a heartbeat is due
	subscribed bool                // the stream has its subscriber: until then, mail waits
	writing    bool                // a writer runs (or ended with the connection)

	// sent is the newest state written per project: its event, so an older state never follows
	// a newer one, and its drawing, so the same state drawn the same is not sent twice. Only the
	// current writer touches it: a poster holding mu while writing is false, or the writer
	// goroutine while it is true.
	sent map[string]sentState
}

// sentState is the last state a connection wrote of one project.
type sentState struct {
	eventID int64
	drawing uint64
}

// message is one project's state as its streams send it: its event made once and shared by
// every connection that gets it (stateEvent).
type message struct {
	eventID int64
	project string
	event   *sse.Event
	// drawing is a hash of the event's bytes: a state of the same event that draws something
	// else is sent again (a visitor's page whose app went down or is starting: no event of its
	// own), the same drawing never twice.
	drawing uint64
}

// drawings seeds the hashes of the messages' drawings (message.drawing); a hash is compared
// only with another of the same process.
var drawings = maphash.MakeSeed()

// New returns a Hub; call Run to start its heartbeat and Listen for the database feed.
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
	if opts.MaxPerFounder == 0 {
		opts.MaxPerFounder = 20
	}
	if opts.SnapshotWorkers == 0 {
		opts.SnapshotWorkers = 8
	}
	if opts.OpsEvery == 0 {
		opts.OpsEvery = time.Second
	}
	if opts.MaxPerLink == 0 {
		opts.MaxPerLink = 200
	}
	if opts.MaxPerAddress == 0 {
		opts.MaxPerAddress = 20
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
	h := &Hub{opts: opts, srv: srv, byID: map[string]*conn{}, byOwner: map[uuid.UUID]map[string]*conn{},
		visitors: map[uuid.UUID]map[string]*conn{}, perLink: map[uuid.UUID]int{}, perAddr: map[string]int{},
		opsEnded: map[uuid.UUID]uint64{}, metrics: newMetrics(opts.Registerer)}
	h.dispatch = newDispatcher(h.Deliver, func(d time.Duration) { h.metrics.notify.Observe(d.Seconds()) })
	srv.OnSubscribe = h.onSubscribe
	return h
}

// Stream says whose a stream is.
type Stream struct {
	Owner uuid.UUID
	// Session is an opaque key of the session the stream was opened with (never the session
	// token itself): EndSession ends its streams on every instance.
	Session string
	// Ends is when that session expires; the stream ends then. Zero: never.
	Ends time.Time
	// Share makes it a visitor's stream of a share link, with no session: it carries only the
	// visitor's page of the link's project (Owner is the project's owner), and ends when the
	// link stops working (EndShare).
	Share *Share
	// Operator makes the founder's stream carry the operator's console as well.
	Operator bool
	// OperatorSeen is the hub's OperatorEnds read before the operator check that set Operator: a
	// removal of this founder announced since then, which the check may have missed, makes it
	// a founder's stream.
	OperatorSeen uint64
}

// Share is the link a visitor's stream follows.
type Share struct {
	Link    uuid.UUID
	Project uuid.UUID
	// Addr is the visitor's client address (MaxPerAddress).
	Addr string
}

// Errors Serve answers with before streaming anything.
var (
	// ErrTooManyStreams: the founder already holds MaxPerFounder streams on this instance (for a
	// visitor's stream: the link MaxPerLink, or the address MaxPerAddress).
	ErrTooManyStreams = errors.New("live: too many streams for one founder")
	// ErrClosed: the hub is shutting down.
	ErrClosed = errors.New("live: shutting down")
)

// Serve streams the owner's sandbox states until the client goes away, is dropped, or its
// session ends. It answers ErrTooManyStreams or ErrClosed at once, having written nothing.
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
	c := &conn{id: newID(), owner: s.Owner, session: s.Session, share: s.Share, operator: s.Operator && s.Share == nil, hub: h,
		ctx: ctx, cancel: cancel, sent: map[string]sentState{}}
	if err := h.add(c, s.OperatorSeen); err != nil {
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

func (h *Hub) add(c *conn, operatorSeen uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	if c.operator && h.opsEnded[c.owner] > operatorSeen {
		c.operator = false
	}
	index := h.byOwner
	if c.share != nil {
		index = h.visitors
		if h.perLink[c.share.Link] >= h.opts.MaxPerLink || h.perAddr[c.share.Addr] >= h.opts.MaxPerAddress {
			h.metrics.refused.Inc()
			return ErrTooManyStreams
		}
		h.perLink[c.share.Link]++
		h.perAddr[c.share.Addr]++
	} else if len(h.byOwner[c.owner]) >= h.opts.MaxPerFounder {
		h.metrics.refused.Inc()
		return ErrTooManyStreams
	}
	h.srv.CreateStream(c.id)
	m := index[c.owner]
	if m == nil {
		m = map[string]*conn{}
		index[c.owner] = m
	}
	m[c.id] = c
	h.byID[c.id] = c
	if c.operator {
		h.operators++
	}
	h.metrics.clients.Inc()
	return nil
}

// EndSession ends this instance's streams of a session that ended (a log-out, on any instance:
// announced by accounts.SessionStore). The browser's reconnection is then refused until it logs in again.
func (h *Hub) EndSession(session string) {
	if session == "" {
		return
	}
	for _, c := range h.all() {
		if c.session == session {
			c.end()
		}
	}
}

// OperatorEnds is the number of operators' removals this hub has heard of: read it before
// checking whether a founder is an operator, and give it as Stream.OperatorSeen.
func (h *Hub) OperatorEnds() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.opsEnds
}

// EndOperator ends this instance's streams that carry the console to a founder who is no longer
// an operator (`sandman operator remove`, announced to every instance), as a log-out ends a
// session's: the browser's reconnection is a founder's stream, without the console.
func (h *Hub) EndOperator(owner uuid.UUID) {
	var ended []*conn
	h.mu.Lock()
	h.opsEnds++
	h.opsEnded[owner] = h.opsEnds
	for _, c := range h.byOwner[owner] {
		if c.operator {
			ended = append(ended, c)
		}
	}
	h.mu.Unlock()
	for _, c := range ended {
		c.end()
	}
}

// remove forgets a connection whose stream has ended. The stream goes only now: r3labs
// deregisters the subscriber when the request's context ends and blocks forever doing so if
// the stream has already stopped.
func (h *Hub) remove(c *conn) {
	h.mu.Lock()
	if _, ok := h.byID[c.id]; ok {
		delete(h.byID, c.id)
		if c.operator {
			h.operators--
		}
		h.metrics.clients.Dec()
		if c.share != nil {
			if h.perLink[c.share.Link]--; h.perLink[c.share.Link] == 0 {
				delete(h.perLink, c.share.Link)
			}
			if h.perAddr[c.share.Addr]--; h.perAddr[c.share.Addr] == 0 {
				delete(h.perAddr, c.share.Addr)
			}
		}
	}
	unindex(h.byOwner, c)
	unindex(h.visitors, c)
	h.mu.Unlock()
	h.srv.RemoveStream(c.id)
}

// unindex removes c from one of the hub's indexes by owner.
func unindex(index map[uuid.UUID]map[string]*conn, c *conn) {
	if m := index[c.owner]; m != nil {
		delete(m, c.id)
		if len(m) == 0 {
			delete(index, c.owner)
		}
	}
}

// onSubscribe runs once a connection's stream has its subscriber (on a goroutine r3labs starts
// for it): the connection starts with its founder's whole state (a visitor's: its link's page),
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
	ctx, cancel := context.WithTimeout(c.ctx, 10*time.Second)
	frags, err := h.snapshot(ctx, c)
	cancel()
	if err != nil {
		if c.ctx.Err() == nil {
			h.opts.Logger.Warn("live: snapshot failed", "err", err)
		}
		c.drop()
		return
	}
	c.post(mail{msgs: c.messages(frags), subscribed: true})
}

// messages are the connection's messages of frags (a visitor's, or a founder's).
func (c *conn) messages(frags []Fragments) []*message {
	return newMessages(frags, c.share != nil)
}

// newMessages makes each fragment's message once, for every connection that gets it.
func newMessages(frags []Fragments, visitor bool) []*message {
	out := make([]*message, len(frags))
	for i, f := range frags {
		ev := stateEvent(f, visitor)
		out[i] = &message{eventID: f.EventID, project: f.ProjectID, event: ev, drawing: maphash.Bytes(drawings, ev.Data)}
	}
	return out
}

// snapshot is what a connection starts with: its founder's every current state, or a visitor's
// page of its link's project.
func (h *Hub) snapshot(ctx context.Context, c *conn) ([]Fragments, error) {
	if c.share == nil {
		frags, err := h.opts.Snapshot(ctx, c.owner)
		if err != nil || !c.operator || h.opts.RenderOps == nil {
			return frags, err
		}
		f, err := h.renderOps(ctx)
		return append(frags, f), err
	}
	f, err := h.opts.ShareSnapshot(ctx, c.share.Project)
	if err != nil {
		return nil, err
	}
	return []Fragments{f}, nil
}

// Deliver renders one sandbox's change once and posts it to the owner's connections here, and
// once more, as its visitors see it, to the visitors' streams of its project. It never waits for
// a client.
func (h *Hub) Deliver(ctx context.Context, owner, sandboxID uuid.UUID, eventID int64) {
	h.opsChanged()
	if conns := h.conns(h.byOwner, owner); len(conns) > 0 {
		start := time.Now()
		f, err := h.opts.Render(ctx, owner, sandboxID)
		if err != nil {
			h.opts.Logger.Warn("live: render failed", "sandbox_id", sandboxID, "err", err)
		} else {
			f.EventID = max(f.EventID, eventID)
			m := mail{msgs: newMessages([]Fragments{f}, false)}
			for _, c := range conns {
				c.post(m)
			}
			h.metrics.fanout.Observe(time.Since(start).Seconds())
		}
	}
	visitors := h.conns(h.visitors, owner)
	if len(visitors) == 0 {
		return
	}
	f, err := h.opts.RenderShare(ctx, owner, sandboxID)
	if err != nil {
		h.opts.Logger.Warn("live: render of a visitor's page failed", "sandbox_id", sandboxID, "err", err)
		return
	}
	f.EventID = max(f.EventID, eventID)
	m := mail{msgs: newMessages([]Fragments{f}, true)}
	for _, c := range visitors {
		if c.share.Project.String() == f.ProjectID { // only that project's visitors
			c.post(m)
		}
	}
}

// opsKey is the mailbox key of the console's fragment.
const opsKey = "ops"

// opsChanged schedules the console's render for the operators' streams here, unless one is
// pending: at once when the last was more than OpsEvery ago, else when it will be.
func (h *Hub) opsChanged() {
	if h.opts.RenderOps == nil {
		return
	}
	h.mu.Lock()
	if h.opsPending || h.closed || h.operators == 0 {
		h.mu.Unlock()
		return
	}
	h.opsPending = true
	wait := h.opts.OpsEvery - time.Since(h.opsLast)
	h.mu.Unlock()
	time.AfterFunc(max(wait, 0), h.deliverOps)
}

// deliverOps renders the console once and posts it to every operator's stream here.
func (h *Hub) deliverOps() {
	h.mu.Lock()
	h.opsPending, h.opsLast = false, time.Now()
	var conns []*conn
	for _, c := range h.byID {
		if c.operator {
			conns = append(conns, c)
		}
	}
	h.mu.Unlock()
	if len(conns) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f, err := h.renderOps(ctx)
	if err != nil {
		h.opts.Logger.Warn("live: render of the operator's console failed", "err", err)
		return
	}
	m := mail{msgs: newMessages([]Fragments{f}, false)}
	for _, c := range conns {
		c.post(m)
	}
}

// renderOps renders the console as a message; its version is the render's time, so a newer
// render always replaces an older one.
func (h *Hub) renderOps(ctx context.Context) (Fragments, error) {
	version := time.Now().UnixMilli()
	b, err := h.opts.RenderOps(ctx)
	return Fragments{EventID: version, ProjectID: opsKey, Ops: b}, err
}

// EndShare ends this instance's visitors' streams of a share link that stopped working (turned
// off or replaced, on any instance): each gets the ShareEnded page as its last message, which
// asks the browser to close the stream, and nothing after it. The stream is closed here too
// once the browser had StallTimeout to read it.
func (h *Hub) EndShare(link uuid.UUID) {
	var ended []*conn
	h.mu.Lock()
	for _, m := range h.visitors {
		for _, c := range m {
			if c.share.Link == link {
				ended = append(ended, c)
			}
		}
	}
	for _, c := range ended {
		unindex(h.visitors, c)
	}
	h.mu.Unlock()
	for _, c := range ended {
		c.post(mail{msgs: c.messages([]Fragments{{EventID: math.MaxInt64, ProjectID: c.share.Project.String(), Share: h.opts.ShareEnded, Final: true}})})
		time.AfterFunc(h.opts.StallTimeout, c.end)
	}
}

// Resync posts every connected founder's current state (after the feed was interrupted, when
// changes may have been missed). Each connection takes it at its own pace.
func (h *Hub) Resync(ctx context.Context) {
	h.opsChanged()
	h.mu.Lock()
	owners := make([]uuid.UUID, 0, len(h.byOwner))
	for o := range h.byOwner {
		owners = append(owners, o)
	}
	projects := map[uuid.UUID][]*conn{}
	for _, m := range h.visitors {
		for _, c := range m {
			projects[c.share.Project] = append(projects[c.share.Project], c)
		}
	}
	h.mu.Unlock()
	for _, o := range owners {
		frags, err := h.opts.Snapshot(ctx, o)
		if err != nil {
			h.opts.Logger.Warn("live: resync failed", "err", err)
			continue
		}
		m := mail{msgs: newMessages(frags, false)}
		for _, c := range h.conns(h.byOwner, o) {
			c.post(m)
		}
	}
	for p, conns := range projects {
		f, err := h.opts.ShareSnapshot(ctx, p)
		if err != nil {
			h.opts.Logger.Warn("live: resync of a visitor's page failed", "err", err)
			continue
		}
		m := mail{msgs: newMessages([]Fragments{f}, true)}
		for _, c := range conns {
			c.post(m)
		}
	}
}

// conns are the owner's connections in one of the hub's indexes (founders', or visitors').
func (h *Hub) conns(index map[uuid.UUID]map[string]*conn, owner uuid.UUID) []*conn {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := index[owner]
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
	msgs       []*message // projects' new states
	ping       bool       // a heartbeat
	subscribed bool       // the stream has its subscriber now: the writing may start
}

// post hands mail to the connection. When nothing is waiting and the stream has room, the
// poster writes it at once, in its own goroutine, as the writer would (it holds the mailbox,
// so no writer runs meanwhile): the common case costs no goroutine. Anything else goes to the
// mailbox, which keeps the newest state of each project, and the writer is started unless one
// runs. Mail posted before the stream has its subscriber waits for it.
func (c *conn) post(m mail) {
	msgs, ping := m.msgs, m.ping
	c.mu.Lock()
	c.subscribed = c.subscribed || m.subscribed
	if c.subscribed && !c.writing && len(c.latest) == 0 && !c.ping {
		msgs, ping, _ = c.send(msgs, ping, c.tryPublish)
	}
	for _, m := range msgs {
		if old, ok := c.latest[m.project]; !ok || m.eventID >= old.eventID {
			if c.latest == nil {
				c.latest = map[string]*message{}
			}
			c.latest[m.project] = m
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
		c.sent[m.project] = sentState{m.eventID, m.drawing}
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
// one sent of its project, or that state drawn differently (docs/architecture.md, "Live
// updates").
func (c *conn) due(m *message) bool {
	last, ok := c.sent[m.project]
	switch {
	case !ok || m.eventID > last.eventID:
		return true
	case m.eventID < last.eventID:
		return false // a newer state of this project already went out
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

// stateEvent is one project's state as one r3labs event: r3labs writes an event's fields as
// they are, so the data of a state's first events carries them whole (their data lines, their
// names, the next one's id), and the last one's name is the event's own. On the wire these are
// the state's events, one after the other, as the browser reads them; for r3labs a state is one
// event: one hop through its stream and one turn of its writer instead of one per element, and a
// state is never split on a stream.
func stateEvent(f Fragments, visitor bool) *sse.Event {
	type element struct {
		name string
		data []byte
	}
	var els []element
	switch {
	case f.Ops != nil:
		els = []element{{views.OpsConsoleID, f.Ops}}
	case visitor:
		els = []element{{views.ShareStateID, f.Share}}
		if f.Final {
			els = append(els, element{views.ShareClosedEvent, []byte("closed")})
		}
	default:
		els = []element{{views.DOMID(views.Card, f.ProjectID), f.Card}, {views.DOMID(views.Pane, f.ProjectID), f.Pane}}
		if len(f.Credits) > 0 {
			els = append(els, element{CreditsEvent, f.Credits})
		}
	}
	id := strconv.FormatInt(f.EventID, 10)
	var data bytes.Buffer
	for i, el := range els {
		if i > 0 {
			data.WriteString("\nevent: " + els[i-1].name + "\n\nid: " + id + "\ndata: ")
		}
		data.Write(bytes.ReplaceAll(el.data, []byte("\n"), []byte("\ndata: ")))
	}
	out := data.Bytes()
	// r3labs writes data that starts with ':' as it is (a comment line): such data starts with an
	// empty comment line instead.
	if bytes.HasPrefix(out, []byte(":")) {
		out = append([]byte(":\ndata: "), out...)
	}
	return &sse.Event{ID: []byte(id), Event: []byte(els[len(els)-1].name), Data: out}
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
