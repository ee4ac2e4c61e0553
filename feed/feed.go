// Package feed turns the database's announcements into what the live hub's streams show
// (docs/architecture.md, "Live updates"): it owns the instance's one LISTEN connection, and for
// each announcement reads, renders and publishes to the hub's topics (a founder's, a share
// link's project, the operators'), ends the streams of what ended (a session, a share link, an
// operator's right), keeps the sessions' copies in memory true, and wakes the app log's streams.
// It renders through the functions the assembly gives it (Renderers), so that it imports no
// handler, and the hub it publishes to knows nothing of founders, visitors or operators.
package feed

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/live"
)

// Topics of the hub, as the feed publishes them and streams follow them.
const (
	// Ops is the operators' console's topic.
	Ops = "ops"
	// ShareKey is the key of a visitor's page: a visitor's stream shows one project only.
	ShareKey = "share"
	// OpsKey is the key of the console.
	OpsKey = "ops"
)

// Founder is the topic of a founder's own states: each project's card and pane.
func Founder(id uuid.UUID) string { return "founder:" + id.String() }

// Visitors is followed by every visitor's stream of a founder's projects: a change of one of
// their sandboxes is rendered as a visitor's page only while someone follows it. Nothing is
// published to it.
func Visitors(owner uuid.UUID) string { return "visitors:" + owner.String() }

// Share is the topic of a shared project's visitor's page.
func Share(project uuid.UUID) string { return "share:" + project.String() }

// Link is the topic of a share link's visitors' streams: its end is published there.
func Link(link uuid.UUID) string { return "link:" + link.String() }

// Session is the topic of a session's streams: they end with it.
func Session(key string) string { return "session:" + key }

// Operator is the topic of an operator's streams that carry the console: they end when the
// founder is no longer an operator.
func Operator(founder uuid.UUID) string { return "operator:" + founder.String() }

// Renderers render what the hub's topics show; each message carries its topic. The assembly
// gives the handlers' (views are theirs), so the feed imports none.
type Renderers struct {
	// Sandbox renders a founder's project of one of their sandboxes (topic Founder).
	Sandbox func(ctx context.Context, owner, sandboxID uuid.UUID) (live.Message, error)
	// Founder renders every project of a founder: what their stream starts with.
	Founder func(ctx context.Context, owner uuid.UUID) ([]live.Message, error)
	// ShareOfSandbox renders the visitor's page of the project a sandbox belongs to (topic Share).
	ShareOfSandbox func(ctx context.Context, owner, sandboxID uuid.UUID) (live.Message, error)
	// Share renders the visitor's page of a project.
	Share func(ctx context.Context, project uuid.UUID) (live.Message, error)
	// ShareEnded is the page a visitor's stream ends with, when its link stops working.
	ShareEnded []live.Part
	// Ops renders the operator's console (topic Ops).
	Ops func(ctx context.Context) (live.Message, error)
}

// SessionCache is an instance's copy of the sessions in use (accounts.SessionStore), which the
// feed keeps true: it hears every session that ended or changed, on any instance, and whether
// the feed is up at all (while it is not, announcements may be missed).
type SessionCache interface {
	Forget(session string)
	Feed(up bool)
	Heard(session string) // an instance's answer to a change made here (accounts.SessionStore)
}

// Logs are the app log's streams (applog.Feed): woken by a batch's announcement, and every one
// of them when the feed is back (a batch may have been missed).
type Logs interface {
	Wake(payload string)
	WakeAll()
}

// Options configure a Feed.
type Options struct {
	Hub    *live.Hub
	Render Renderers
	// Sessions, if set, is told of sessions that ended or changed on any instance, and of the
	// feed's ups and downs.
	Sessions SessionCache
	// Logs, if set, are woken by the app log's announcements.
	Logs Logs
	// OpsEvery is the least time between two renders of the console (default 1 s): a burst of
	// changes across the fleet costs one render per interval, the last change always included.
	OpsEvery time.Duration

	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// Feed publishes the database's changes to one instance's hub.
type Feed struct {
	opts     Options
	hub      *live.Hub
	dispatch *dispatcher
	metrics  *metrics

	// The console's renders: one pending at most, never closer than OpsEvery.
	opsMu      sync.Mutex
	opsPending bool
	opsLast    time.Time
}

// New returns a Feed; Listen follows the database.
func New(opts Options) *Feed {
	if opts.OpsEvery == 0 {
		opts.OpsEvery = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	f := &Feed{opts: opts, hub: opts.Hub, metrics: newMetrics(opts.Registerer)}
	f.dispatch = newDispatcher(f.Deliver, func(d time.Duration) { f.metrics.notify.Observe(d.Seconds()) })
	return f
}

// Deliver renders one sandbox's change once and publishes it to its founder's streams, and once
// more, as its visitors see it, to its project's visitors' streams, when any follow them here.
// Changes announced on the database reach it through Listen's dispatcher; it never waits for a
// client.
func (f *Feed) Deliver(ctx context.Context, owner, sandboxID uuid.UUID, eventID int64) {
	f.opsChanged()
	if f.hub.Following(Founder(owner)) {
		start := time.Now()
		m, err := f.opts.Render.Sandbox(ctx, owner, sandboxID)
		if err != nil {
			f.opts.Logger.Warn("feed: render failed", "sandbox_id", sandboxID, "err", err)
		} else {
			m.ID = max(m.ID, eventID)
			f.hub.Publish(m)
			f.metrics.fanout.Observe(time.Since(start).Seconds())
		}
	}
	if !f.hub.Following(Visitors(owner)) {
		return
	}
	m, err := f.opts.Render.ShareOfSandbox(ctx, owner, sandboxID)
	if err != nil {
		f.opts.Logger.Warn("feed: render of a visitor's page failed", "sandbox_id", sandboxID, "err", err)
		return
	}
	m.ID = max(m.ID, eventID)
	f.hub.Publish(m)
}

// EndShare ends this instance's visitors' streams of a share link that stopped working (turned
// off or replaced, on any instance): each gets the ended page as its last message, which asks
// the browser to close the stream, and nothing after it.
func (f *Feed) EndShare(link uuid.UUID) {
	f.hub.Publish(live.Message{Topic: Link(link), Key: ShareKey, ID: math.MaxInt64, Parts: f.opts.Render.ShareEnded, Final: true})
}

// EndSession ends this instance's streams of a session that ended (a log-out, on any instance).
func (f *Feed) EndSession(session string) {
	if session != "" {
		f.hub.End(Session(session))
	}
}

// EndOperator ends this instance's streams that carry the console to a founder who is no longer
// an operator; their browsers reconnect as a founder's streams.
func (f *Feed) EndOperator(founder uuid.UUID) { f.hub.End(Operator(founder)) }

// State is what a topic shows now: a stream's snapshot is its topics' states.
func (f *Feed) State(ctx context.Context, topic string) ([]live.Message, error) {
	kind, rest, _ := strings.Cut(topic, ":")
	switch kind {
	case "founder":
		id, err := uuid.Parse(rest)
		if err != nil {
			return nil, nil
		}
		return f.opts.Render.Founder(ctx, id)
	case "share":
		id, err := uuid.Parse(rest)
		if err != nil {
			return nil, nil
		}
		m, err := f.opts.Render.Share(ctx, id)
		if err != nil {
			return nil, err
		}
		return []live.Message{m}, nil
	case Ops:
		if f.opts.Render.Ops == nil {
			return nil, nil
		}
		m, err := f.renderOps(ctx)
		if err != nil {
			return nil, err
		}
		return []live.Message{m}, nil
	}
	return nil, nil // a topic that shows nothing of its own (a session's, a link's)
}

// Snapshot is a stream's first state: its topics' states.
func (f *Feed) Snapshot(topics ...string) func(context.Context) ([]live.Message, error) {
	return func(ctx context.Context) ([]live.Message, error) {
		var out []live.Message
		for _, t := range topics {
			msgs, err := f.State(ctx, t)
			if err != nil {
				return nil, err
			}
			out = append(out, msgs...)
		}
		return out, nil
	}
}

// Resync publishes the state of every topic followed here (after the feed was interrupted, when
// changes may have been missed). Each connection takes it at its own pace.
func (f *Feed) Resync(ctx context.Context) {
	f.opsChanged()
	for _, t := range f.hub.Topics() {
		if t == Ops {
			continue // opsChanged
		}
		msgs, err := f.State(ctx, t)
		if err != nil {
			f.opts.Logger.Warn("feed: resync failed", "topic", t, "err", err)
			continue
		}
		f.hub.Publish(msgs...)
	}
}

// opsChanged schedules the console's render for the operators' streams here, unless one is
// pending: at once when the last was more than OpsEvery ago, else when it will be.
func (f *Feed) opsChanged() {
	if f.opts.Render.Ops == nil || !f.hub.Following(Ops) {
		return
	}
	f.opsMu.Lock()
	if f.opsPending {
		f.opsMu.Unlock()
		return
	}
	f.opsPending = true
	wait := f.opts.OpsEvery - time.Since(f.opsLast)
	f.opsMu.Unlock()
	time.AfterFunc(max(wait, 0), f.deliverOps)
}

// deliverOps renders the console once and publishes it to every operator's stream here.
func (f *Feed) deliverOps() {
	f.opsMu.Lock()
	f.opsPending, f.opsLast = false, time.Now()
	f.opsMu.Unlock()
	if !f.hub.Following(Ops) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := f.renderOps(ctx)
	if err != nil {
		f.opts.Logger.Warn("feed: render of the operator's console failed", "err", err)
		return
	}
	f.hub.Publish(m)
}

// renderOps renders the console as a message; its id is the render's time, so a newer render
// always replaces an older one.
func (f *Feed) renderOps(ctx context.Context) (live.Message, error) {
	id := time.Now().UnixMilli()
	m, err := f.opts.Render.Ops(ctx)
	m.Topic, m.Key, m.ID = Ops, OpsKey, id
	return m, err
}
