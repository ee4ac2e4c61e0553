package live_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/internal/testkit"
	"sandman/views"
)

// A visitor's stream of a share link carries its project's visitor's page and nothing else: not
// the founder's cards and panes, not the founder's other projects, not another founder's; and
// the same state drawn again (a moved idle deadline) is not sent twice.
func TestVisitorStreamCarriesOnlyItsProject(t *testing.T) {
	t.Parallel()
	h := newHubServer(t, 50, nil)
	founder, stranger := uuid.New(), uuid.New()
	shared, other, strangers := uuid.New(), uuid.New(), uuid.New() // sandboxes, and their projects' ids
	h.state.set(founder, projectOf(shared), 1)
	h.state.set(founder, projectOf(other), 1)
	h.state.set(stranger, projectOf(strangers), 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	visitor := h.visitorStream(t, ctx, founder, uuid.New(), shared, "192.0.2.1")
	founderEvents := h.stream(t, ctx, founder)
	isShare := func(id string) func(testkit.SSEEvent) bool {
		return func(ev testkit.SSEEvent) bool {
			// Nothing but its project's next page: not another project's, not the same one again.
			if ev.Event != views.ShareStateID || !strings.HasPrefix(ev.Data, "share "+projectOf(shared)+"@") || ev.ID != id {
				t.Fatalf("the visitor received %s %s %q, want its project's page %s", ev.Event, ev.ID, ev.Data, id)
			}
			return true
		}
	}
	testkit.NextSSE(t, visitor, 10*time.Second, "the visitor's first page", isShare("1"))
	testkit.NextSSE(t, founderEvents, 10*time.Second, "the founder's snapshot", func(ev testkit.SSEEvent) bool { return true })

	// The founder's other project, another founder's, the same state again; then its own.
	for id, change := range []struct {
		owner, sandbox uuid.UUID
	}{{founder, other}, {stranger, strangers}, {founder, shared}, {founder, other}, {founder, shared}} {
		eventID := int64(id + 2)
		if change.sandbox == shared && id == 2 {
			eventID = 1 // drawn again with the event it shows: nothing new for the visitor
		} else {
			h.state.set(change.owner, projectOf(change.sandbox), eventID)
		}
		h.deliver(change.owner, change.sandbox, eventID)
	}
	testkit.NextSSE(t, visitor, 10*time.Second, "the visitor's next page", isShare("6"))
	testkit.NextSSE(t, founderEvents, 10*time.Second, "the founder's pane of the shared project",
		func(ev testkit.SSEEvent) bool {
			return ev.Event == views.DOMID(views.Pane, projectOf(shared)) && ev.ID == "6"
		})
}

// A stream sends a project's state again under the event it last sent only when it draws
// something else (a visitor's page of an app that went down or is starting: no event of its
// own), and never the same drawing twice, on a visitor's stream as on a founder's. Each repeat
// is followed by another drawing, which must be the next message.
func TestTheSameEventIsSentAgainOnlyWhenItDrawsSomethingElse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		event func(project string) string // the stream's event that carries the project's state
		open  func(h *hubServer, ctx context.Context, owner, sandbox uuid.UUID) <-chan testkit.SSEEvent
	}{
		{"visitor", func(string) string { return views.ShareStateID },
			func(h *hubServer, ctx context.Context, owner, sandbox uuid.UUID) <-chan testkit.SSEEvent {
				return h.visitorStream(t, ctx, owner, uuid.New(), sandbox, "192.0.2.1")
			}},
		{"founder", func(p string) string { return views.DOMID(views.Pane, p) },
			func(h *hubServer, ctx context.Context, owner, _ uuid.UUID) <-chan testkit.SSEEvent {
				return h.stream(t, ctx, owner)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHubServer(t, 50, nil)
			owner, sandbox := uuid.New(), uuid.New()
			project := projectOf(sandbox)
			h.state.draw(owner, project, 1, "up")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			events := tc.open(h, ctx, owner, sandbox)
			next := func(look string) {
				t.Helper()
				testkit.NextSSE(t, events, 10*time.Second, "the state drawn "+look, func(ev testkit.SSEEvent) bool {
					if ev.Event != tc.event(project) {
						return false // the founder's card, before its pane
					}
					if !strings.Contains(ev.Data, "@1"+look+" ") || ev.ID != "1" {
						t.Fatalf("the stream sent %s %q, want event 1 drawn %s", ev.ID, ev.Data, look)
					}
					return true
				})
			}
			next("up")
			for _, look := range []string{"up", "starting", "starting", "up", "up", "down"} {
				h.state.draw(owner, project, 1, look)
				h.deliver(owner, sandbox, 1)
			}
			next("starting")
			next("up")
			next("down")
		})
	}
}

// EndShare (the link turned off or replaced) sends its visitors the last page and the event that
// closes the stream, then ends their streams; another link's visitors go on.
func TestEndShareEndsOnlyItsVisitorsStreams(t *testing.T) {
	t.Parallel()
	h := newHubServer(t, 50, func(o *hubConfig) { o.StallTimeout = 200 * time.Millisecond })
	founder, sandbox := uuid.New(), uuid.New()
	h.state.set(founder, projectOf(sandbox), 1)
	ended, kept := uuid.New(), uuid.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gone := h.visitorStream(t, ctx, founder, ended, sandbox, "192.0.2.1")
	stays := h.visitorStream(t, ctx, founder, kept, sandbox, "192.0.2.2")
	for _, s := range []<-chan testkit.SSEEvent{gone, stays} {
		testkit.NextSSE(t, s, 10*time.Second, "the first page", func(ev testkit.SSEEvent) bool { return ev.Event == views.ShareStateID })
	}
	h.endShare(ended)
	testkit.NextSSE(t, gone, 10*time.Second, "the last page", func(ev testkit.SSEEvent) bool {
		return ev.Event == views.ShareStateID && ev.Data == "this link doesn't work anymore"
	})
	testkit.NextSSE(t, gone, 10*time.Second, "the event that closes the stream", func(ev testkit.SSEEvent) bool { return ev.Event == views.ShareClosedEvent })
	testkit.SSEEnds(t, gone, 10*time.Second)

	h.state.set(founder, projectOf(sandbox), 2)
	h.deliver(founder, sandbox, 2)
	testkit.NextSSE(t, stays, 10*time.Second, "the other link's next page", func(ev testkit.SSEEvent) bool {
		return ev.Event == views.ShareStateID && ev.ID == "2"
	})
	testkit.Until(t, 10*time.Second, "one stream left", func() bool { return h.hub.Clients() == 1 })
}

// A link holds at most MaxPerLink visitors' streams and an address MaxPerAddress on an instance;
// neither counts against the founder's own MaxPerFounder.
func TestVisitorStreamsAreCapped(t *testing.T) {
	t.Parallel()
	h := newHubServer(t, 50, func(o *hubConfig) { o.MaxPerLink, o.MaxPerAddress, o.MaxPerFounder = 2, 3, 1 })
	founder, sandbox := uuid.New(), uuid.New()
	h.state.set(founder, projectOf(sandbox), 1)
	link, other := uuid.New(), uuid.New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	refused := func(link uuid.UUID, addr string) bool {
		res, err := h.srv.Client().Get(h.srv.URL + "/events?owner=" + founder.String() + "&link=" + link.String() + "&project=" + sandbox.String() + "&addr=" + addr)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode == http.StatusTooManyRequests
	}
	h.visitorStream(t, ctx, founder, link, sandbox, "192.0.2.1")
	h.visitorStream(t, ctx, founder, link, sandbox, "192.0.2.2")
	testkit.Until(t, 10*time.Second, "two visitors", func() bool { return h.hub.Clients() == 2 })
	if !refused(link, "192.0.2.3") {
		t.Fatal("a third visitor's stream of one link was not refused")
	}
	h.visitorStream(t, ctx, founder, other, sandbox, "192.0.2.1")
	another := uuid.New()
	h.state.set(founder, projectOf(another), 1)
	h.visitorStream(t, ctx, founder, uuid.New(), another, "192.0.2.1") // another project's link, same address
	testkit.Until(t, 10*time.Second, "four visitors", func() bool { return h.hub.Clients() == 4 })
	if !refused(uuid.New(), "192.0.2.1") {
		t.Fatal("a fourth stream from one address was not refused")
	}
	h.stream(t, ctx, founder) // the founder's own stream is not a visitor's
	testkit.Until(t, 10*time.Second, "the founder's stream too", func() bool { return h.hub.Clients() == 5 })
}
