package live_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/db/dbtest"
	"sandman/internal/testkit"
	"sandman/live"
	"sandman/views"
)

// The database is started only by the tests that follow LISTEN/NOTIFY.
func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// fragments are one project's rendered state in these tests: its card and pane for its founder,
// its page for its visitors.
type fragments struct {
	EventID          int64
	ProjectID        string
	Card, Pane, Page []byte
}

// The topics of these tests' streams, as a publisher names them (the hub takes any string).
func founderTopic(owner uuid.UUID) string  { return "founder:" + owner.String() }
func visitorsTopic(owner uuid.UUID) string { return "visitors:" + owner.String() }
func shareTopic(project string) string     { return "share:" + project }
func linkTopic(link uuid.UUID) string      { return "link:" + link.String() }
func sessionTopic(key string) string       { return "session:" + key }

// founderMessage is a project's state as its founder's streams get it.
func founderMessage(owner uuid.UUID, f fragments) live.Message {
	return live.Message{Topic: founderTopic(owner), Key: f.ProjectID, ID: f.EventID, Parts: []live.Part{
		{Event: views.DOMID(views.Card, f.ProjectID), Data: f.Card}, {Event: views.DOMID(views.Pane, f.ProjectID), Data: f.Pane}}}
}

// visitorMessage is a project's state as its visitors' streams get it.
func visitorMessage(f fragments) live.Message {
	return live.Message{Topic: shareTopic(f.ProjectID), Key: "share", ID: f.EventID, Parts: []live.Part{{Event: views.ShareStateID, Data: f.Page}}}
}

// fakeState stands in for the rendered sandbox states: one fragment per project.
type fakeState struct {
	mu    sync.Mutex
	byOwn map[uuid.UUID]map[string]fragments
	size  int // bytes of each card and pane
}

func newFakeState(size int) *fakeState {
	return &fakeState{byOwn: map[uuid.UUID]map[string]fragments{}, size: size}
}

// set makes eventID the project's current state and returns it as fragments.
func (s *fakeState) set(owner uuid.UUID, project string, eventID int64) fragments {
	return s.draw(owner, project, eventID, "")
}

// draw is set with a state drawn as look: the same event drawn another way.
func (s *fakeState) draw(owner uuid.UUID, project string, eventID int64, look string) fragments {
	body := fmt.Sprintf("%s@%d%s ", project, eventID, look)
	if pad := s.size - len(body); pad > 0 {
		body += strings.Repeat("x", pad)
	}
	f := fragments{EventID: eventID, ProjectID: project, Card: []byte("card " + body), Pane: []byte("pane " + body),
		Page: []byte("share " + body)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byOwn[owner] == nil {
		s.byOwn[owner] = map[string]fragments{}
	}
	s.byOwn[owner][project] = f
	return f
}

// projectOf maps a sandbox to its project in these tests: they share the uuid text.
func projectOf(sandboxID uuid.UUID) string { return sandboxID.String() }

func (s *fakeState) get(owner uuid.UUID, sandboxID uuid.UUID) (fragments, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.byOwn[owner][projectOf(sandboxID)]
	return f, ok
}

// shareSnapshot is a project's visitor's page as it is now.
func (s *fakeState) shareSnapshot(project string) ([]live.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.byOwn {
		if f, ok := m[project]; ok {
			return []live.Message{visitorMessage(f)}, nil
		}
	}
	return nil, fmt.Errorf("no project %s", project)
}

func (s *fakeState) snapshot(_ context.Context, owner uuid.UUID) ([]live.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []live.Message
	for _, f := range s.byOwn[owner] {
		out = append(out, founderMessage(owner, f))
	}
	return out, nil
}

// founderStream is a founder's stream of st's states, under a cap of max streams.
func founderStream(st *fakeState, owner uuid.UUID, max int) live.Stream {
	return live.Stream{Topics: []string{founderTopic(owner)}, Caps: []live.Cap{{Key: founderTopic(owner), Max: max}},
		Snapshot: func(ctx context.Context) ([]live.Message, error) { return st.snapshot(ctx, owner) }}
}

// hubConfig is the hub's options, and what the tests' streams are given.
type hubConfig struct {
	live.Options
	// The caps of a founder's streams, a link's and an address's (defaults 20, 200, 20).
	MaxPerFounder, MaxPerLink, MaxPerAddress int
	// Snapshot is a founder's stream's first state (default: fakeState.snapshot).
	Snapshot func(ctx context.Context, owner uuid.UUID) ([]live.Message, error)
}

// hubServer serves hub at /events, the founder named by the owner query parameter.
type hubServer struct {
	hub   *live.Hub
	state *fakeState
	srv   *httptest.Server
	reg   *prometheus.Registry
}

func newHubServer(t testing.TB, size int, tweak func(*hubConfig)) *hubServer {
	t.Helper()
	st := newFakeState(size)
	reg := prometheus.NewRegistry()
	cfg := hubConfig{Options: live.Options{Registerer: reg}, MaxPerFounder: 20, MaxPerLink: 200, MaxPerAddress: 20, Snapshot: st.snapshot}
	if tweak != nil {
		tweak(&cfg)
	}
	hub := live.New(cfg.Options)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		owner := uuid.MustParse(q.Get("owner"))
		s := live.Stream{Topics: []string{founderTopic(owner), sessionTopic(q.Get("session"))},
			Snapshot: func(ctx context.Context) ([]live.Message, error) { return cfg.Snapshot(ctx, owner) },
			Caps:     []live.Cap{{Key: founderTopic(owner), Max: cfg.MaxPerFounder}}}
		if link := q.Get("link"); link != "" {
			project := q.Get("project")
			s = live.Stream{Topics: []string{shareTopic(project), linkTopic(uuid.MustParse(link)), visitorsTopic(owner)},
				Snapshot: func(context.Context) ([]live.Message, error) { return st.shareSnapshot(project) },
				Caps:     []live.Cap{{Key: linkTopic(uuid.MustParse(link)), Max: cfg.MaxPerLink}, {Key: "addr:" + q.Get("addr"), Max: cfg.MaxPerAddress}}}
		}
		err := hub.Serve(w, r, s)
		switch {
		case errors.Is(err, live.ErrTooManyStreams):
			http.Error(w, err.Error(), http.StatusTooManyRequests)
		case errors.Is(err, live.ErrClosed):
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	srv.Config.RegisterOnShutdown(hub.Close)
	srv.Start()
	t.Cleanup(srv.Close)
	return &hubServer{hub: hub, state: st, srv: srv, reg: reg}
}

// deliver publishes a sandbox's current state, as the feed does: to its founder's streams, and
// as its visitors see it to its project's visitors' streams, each only when followed.
func (h *hubServer) deliver(owner, sandboxID uuid.UUID, eventID int64) {
	f, ok := h.state.get(owner, sandboxID)
	if !ok {
		return
	}
	f.EventID = max(f.EventID, eventID)
	if h.hub.Following(founderTopic(owner)) {
		h.hub.Publish(founderMessage(owner, f))
	}
	if h.hub.Following(visitorsTopic(owner)) {
		h.hub.Publish(visitorMessage(f))
	}
}

// endShare publishes a link's last page, as the feed does when the link stops working.
func (h *hubServer) endShare(link uuid.UUID) {
	h.hub.Publish(live.Message{Topic: linkTopic(link), Key: "share", ID: math.MaxInt64, Final: true,
		Parts: []live.Part{{Event: views.ShareStateID, Data: []byte("this link doesn't work anymore")}, {Event: views.ShareClosedEvent, Data: []byte("closed")}}})
}

// counter reads one of the hub's metrics.
func (h *hubServer) counter(t testing.TB, name string) float64 {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// stream opens /events for owner and returns its messages as they arrive; the channel closes
// when the server ends the stream.
func (h *hubServer) stream(t testing.TB, ctx context.Context, owner uuid.UUID) <-chan testkit.SSEEvent {
	t.Helper()
	return h.sessionStream(t, ctx, owner, "")
}

// visitorStream opens a visitor's stream of the share link for project (a sandbox's uuid in
// these tests), from the client address addr.
func (h *hubServer) visitorStream(t testing.TB, ctx context.Context, owner, link, project uuid.UUID, addr string) <-chan testkit.SSEEvent {
	t.Helper()
	return testkit.OpenSSE(t, ctx, h.srv.Client(), h.srv.URL+"/events?owner="+owner.String()+"&link="+link.String()+
		"&project="+project.String()+"&addr="+addr)
}

// sessionStream is stream opened with a session.
func (h *hubServer) sessionStream(t testing.TB, ctx context.Context, owner uuid.UUID, session string) <-chan testkit.SSEEvent {
	t.Helper()
	return testkit.OpenSSE(t, ctx, h.srv.Client(), h.srv.URL+"/events?owner="+owner.String()+"&session="+session)
}
