package live_test

import (
	"context"
	"errors"
	"fmt"
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
)

// The database is started only by the tests that follow LISTEN/NOTIFY.
func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// fakeState stands in for the rendered sandbox states: one fragment per project.
type fakeState struct {
	mu    sync.Mutex
	byOwn map[uuid.UUID]map[string]live.Fragments
	size  int // bytes of each card and pane
}

func newFakeState(size int) *fakeState {
	return &fakeState{byOwn: map[uuid.UUID]map[string]live.Fragments{}, size: size}
}

// set makes eventID the project's current state and returns it as fragments.
func (s *fakeState) set(owner uuid.UUID, project string, eventID int64) live.Fragments {
	return s.draw(owner, project, eventID, "")
}

// draw is set with a state drawn as look: the same event drawn another way.
func (s *fakeState) draw(owner uuid.UUID, project string, eventID int64, look string) live.Fragments {
	body := fmt.Sprintf("%s@%d%s ", project, eventID, look)
	if pad := s.size - len(body); pad > 0 {
		body += strings.Repeat("x", pad)
	}
	f := live.Fragments{EventID: eventID, ProjectID: project, Card: []byte("card " + body), Pane: []byte("pane " + body),
		Share: []byte("share " + body)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byOwn[owner] == nil {
		s.byOwn[owner] = map[string]live.Fragments{}
	}
	s.byOwn[owner][project] = f
	return f
}

// projectOf maps a sandbox to its project in these tests: they share the uuid text.
func projectOf(sandboxID uuid.UUID) string { return sandboxID.String() }

func (s *fakeState) render(_ context.Context, owner, sandboxID uuid.UUID) (live.Fragments, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.byOwn[owner][projectOf(sandboxID)]
	if !ok {
		return f, fmt.Errorf("no sandbox %s for %s", sandboxID, owner)
	}
	return f, nil
}

// shareSnapshot is a project's visitor's page (Fragments.Share) as it is now.
func (s *fakeState) shareSnapshot(_ context.Context, project uuid.UUID) (live.Fragments, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.byOwn {
		if f, ok := m[project.String()]; ok {
			return f, nil
		}
	}
	return live.Fragments{}, fmt.Errorf("no project %s", project)
}

func (s *fakeState) snapshot(_ context.Context, owner uuid.UUID) ([]live.Fragments, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []live.Fragments
	for _, f := range s.byOwn[owner] {
		out = append(out, f)
	}
	return out, nil
}

// hubServer serves hub at /events, the founder named by the owner query parameter.
type hubServer struct {
	hub   *live.Hub
	state *fakeState
	srv   *httptest.Server
	reg   *prometheus.Registry
}

func newHubServer(t testing.TB, size int, tweak func(*live.Options)) *hubServer {
	t.Helper()
	st := newFakeState(size)
	reg := prometheus.NewRegistry()
	opts := live.Options{Render: st.render, Snapshot: st.snapshot, RenderShare: st.render, ShareSnapshot: st.shareSnapshot,
		ShareEnded: []byte("this link doesn't work anymore"), Registerer: reg}
	if tweak != nil {
		tweak(&opts)
	}
	hub := live.New(opts)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		s := live.Stream{Owner: uuid.MustParse(q.Get("owner")), Session: q.Get("session"), Operator: q.Get("operator") == "1"}
		if link := q.Get("link"); link != "" {
			s.Share = &live.Share{Link: uuid.MustParse(link), Project: uuid.MustParse(q.Get("project")), Addr: q.Get("addr")}
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
