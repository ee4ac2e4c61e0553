package feed_test

import (
	"context"
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
	"sandman/feed"
	"sandman/internal/testkit"
	"sandman/live"
	"sandman/views"
)

// The database is started only by the tests that follow LISTEN/NOTIFY.
func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// fakeState stands in for the rendered states: one card and pane per project, the project's id
// being its sandbox's in these tests.
type fakeState struct {
	mu    sync.Mutex
	byOwn map[uuid.UUID]map[string]int64 // project → its event
	size  int                            // bytes of each card and pane
}

func (s *fakeState) set(owner uuid.UUID, project string, eventID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byOwn[owner] == nil {
		s.byOwn[owner] = map[string]int64{}
	}
	s.byOwn[owner][project] = eventID
}

func (s *fakeState) message(owner uuid.UUID, project string, eventID int64) live.Message {
	body := fmt.Sprintf("%s@%d ", project, eventID)
	if pad := s.size - len(body); pad > 0 {
		body += strings.Repeat("x", pad)
	}
	return live.Message{Topic: feed.Founder(owner), Key: project, ID: eventID, Parts: []live.Part{
		{Event: views.DOMID(views.Card, project), Data: []byte("card " + body)},
		{Event: views.DOMID(views.Pane, project), Data: []byte("pane " + body)}}}
}

func (s *fakeState) renderers() feed.Renderers {
	return feed.Renderers{
		Sandbox: func(_ context.Context, owner, sandbox uuid.UUID) (live.Message, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			id, ok := s.byOwn[owner][sandbox.String()]
			if !ok {
				return live.Message{}, fmt.Errorf("no sandbox %s for %s", sandbox, owner)
			}
			return s.message(owner, sandbox.String(), id), nil
		},
		Founder: func(_ context.Context, owner uuid.UUID) ([]live.Message, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			var out []live.Message
			for p, id := range s.byOwn[owner] {
				out = append(out, s.message(owner, p, id))
			}
			return out, nil
		},
	}
}

// feedServer serves a hub, fed by a feed, at /events: the founder named by the owner query
// parameter, an operator's stream with operator=1.
type feedServer struct {
	hub   *live.Hub
	feed  *feed.Feed
	state *fakeState
	srv   *httptest.Server
}

func newFeedServer(t testing.TB, size int, tweak func(*feed.Options)) *feedServer {
	t.Helper()
	st := &fakeState{byOwn: map[uuid.UUID]map[string]int64{}, size: size}
	hub := live.New(live.Options{Registerer: prometheus.NewRegistry()})
	opts := feed.Options{Hub: hub, Render: st.renderers(), Registerer: prometheus.NewRegistry()}
	if tweak != nil {
		tweak(&opts)
	}
	f := feed.New(opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner := uuid.MustParse(r.URL.Query().Get("owner"))
		s := live.Stream{Topics: []string{feed.Founder(owner)}, Snapshot: f.Snapshot(feed.Founder(owner))}
		if r.URL.Query().Get("operator") == "1" {
			s.Grant = &live.Grant{Revoke: feed.Operator(owner), Topics: []string{feed.Ops, feed.Operator(owner)}}
			s.Snapshot = f.Snapshot(feed.Founder(owner), feed.Ops)
		}
		if err := hub.Serve(w, r, s); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(hub.Close)
	return &feedServer{hub: hub, feed: f, state: st, srv: srv}
}

// stream opens owner's stream and returns its events as they arrive.
func (s *feedServer) stream(t testing.TB, ctx context.Context, owner uuid.UUID) <-chan testkit.SSEEvent {
	t.Helper()
	return testkit.OpenSSE(t, ctx, s.srv.Client(), s.srv.URL+"/events?owner="+owner.String())
}
