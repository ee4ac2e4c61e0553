package feed_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/applog"
	"sandman/db"
	"sandman/db/dbtest"
	"sandman/feed"
	"sandman/internal/testkit"
	"sandman/views"
)

// heard records what the feed told the sessions' copies and the log streams.
type heard struct {
	mu     sync.Mutex
	things map[string]bool
}

func (h *heard) note(s string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.things[s] = true
}

func (h *heard) has(s string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.things[s]
}

func (h *heard) Forget(session string) { h.note("forget " + session) }
func (h *heard) Heard(session string)  { h.note("heard " + session) }
func (h *heard) Feed(up bool) {
	if up {
		h.note("up")
	}
}
func (h *heard) Wake(payload string) { h.note("wake " + payload) }
func (h *heard) WakeAll()            { h.note("wake all") }

// One connection carries every announcement an instance follows: a sandbox's change reaches its
// founder's stream, a session's change and end reach the sessions' copies (and the end its
// streams), a batch of the app log wakes its streams, each through the feed's one LISTEN.
func TestOneConnectionCarriesEveryAnnouncement(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	pool, err := db.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	h := &heard{things: map[string]bool{}}
	s := newFeedServer(t, 50, func(o *feed.Options) { o.Sessions, o.Logs = h, h })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up := make(chan struct{})
	go s.feed.Listen(ctx, dbURL, func() { close(up) })
	select {
	case <-up:
	case <-time.After(10 * time.Second):
		t.Fatal("the feed is not listening after 10s")
	}
	owner, sandbox := uuid.New(), uuid.New()
	s.state.set(owner, sandbox.String(), 1)
	events := s.stream(t, ctx, owner)
	testkit.NextSSE(t, events, 10*time.Second, "the snapshot", func(ev testkit.SSEEvent) bool { return ev.ID == "1" })

	notify := func(channel, payload string) {
		t.Helper()
		if err := db.New(pool).Notify(ctx, db.NotifyParams{Channel: channel, Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	s.state.set(owner, sandbox.String(), 2)
	notify(db.SandboxChannel, db.SandboxPayload(sandbox, owner))
	testkit.NextSSE(t, events, 10*time.Second, "the change announced", func(ev testkit.SSEEvent) bool {
		return ev.ID == "2" && ev.Event == views.DOMID(views.Pane, sandbox.String())
	})
	project := uuid.NewString()
	notify(applog.Channel, project)
	notify(db.SessionChangeChannel, "changed")
	notify(db.SessionEndChannel, "ended")
	for _, want := range []string{"wake " + project, "forget changed", "forget ended", "heard changed"} {
		testkit.Until(t, 10*time.Second, want, func() bool { return h.has(want) })
	}
}
