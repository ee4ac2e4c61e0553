package handlers_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/views"
)

// Logging out ends the session's event streams on every instance, not only the one that served
// the log-out; the browser's reconnection is refused. The founder's other sessions keep theirs.
func TestLogOutEndsTheSessionsStreamsOnEveryInstance(t *testing.T) {
	t.Parallel()
	a := webOnly(t)
	b := start(t, apptest.Options{Role: app.RoleWeb, Host: a.Host, DatabaseURL: a.DatabaseURL})
	laptop := a.NewClient(t)
	laptop.SignUp("logout-streams@example.com")
	phone := a.NewClient(t)
	apptest.RequireStatus(t, phone.API(http.MethodPost, "/api/session",
		map[string]string{"email": "logout-streams@example.com", "password": apptest.Password}, nil), http.StatusOK)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	onA, onB := laptop.Stream(ctx), laptop.On(b.Instance).Stream(ctx)
	phoneStream := phone.On(b.Instance).Stream(ctx)
	a.waitClients(t, 1)
	b.waitClients(t, 2)

	apptest.RequireStatus(t, laptop.API(http.MethodDelete, "/api/session", nil, nil), http.StatusNoContent)
	testkit.SSEEnds(t, onA, 10*time.Second)
	testkit.SSEEnds(t, onB, 10*time.Second)
	b.waitClients(t, 1) // the phone's
	apptest.RequireStatus(t, laptop.On(b.Instance).Do(http.MethodGet, "/events", nil, nil), http.StatusUnauthorized)
	// The phone's stream still carries what happens after the log-out: its own new build's card
	// (a stream ended by the log-out would end before it, and fail here).
	phone.Get("/") // its page's CSRF token
	var p struct{ ID string }
	apptest.RequireStatus(t, phone.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	apptest.RequireStatus(t, phone.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "after"}, nil), http.StatusAccepted)
	testkit.NextSSE(t, phoneStream, 10*time.Second, "the phone's stream to carry its new card after the laptop's log-out",
		func(ev testkit.SSEEvent) bool { return ev.Event == views.DOMID(views.Card, p.ID) })
	testkit.Record(t, testkit.Scenario{ID: "logout-ends-streams", Times: 1,
		Injected: "a log-out on instance A while the session has streams open on A and B (and the founder another session's on B)",
		Result:   "both of the session's streams end, its reconnection is refused (401); the other session's stream stays"})
}

// A session's stream ends when the session expires, though nobody logged out.
func TestAnExpiredSessionsStreamEnds(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.SessionLifetime = 3 * time.Second }})
	c := s.NewClient(t)
	c.SignUp("expiring@example.com")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.Stream(ctx)
	s.waitClients(t, 1)
	testkit.SSEEnds(t, events, 8*time.Second)
	apptest.RequireStatus(t, c.Do(http.MethodGet, "/events", nil, nil), http.StatusUnauthorized)
	testkit.Record(t, testkit.Scenario{ID: "session-expiry-ends-streams", Times: 1,
		Injected: "a session expiring (3 s lifetime in the test) while its stream is open",
		Result:   "the stream ends at the expiry; its reconnection is refused (401)"})
}

// At most 20 streams per founder per instance: the 21st is refused with 429, a Retry-After and a
// sentence that says what to do; another instance, or another founder, still takes streams.
func TestAFounderHoldsAtMostTwentyStreamsPerInstance(t *testing.T) {
	t.Parallel()
	a := webOnly(t)
	b := start(t, apptest.Options{Role: app.RoleWeb, Host: a.Host, DatabaseURL: a.DatabaseURL})
	c := a.NewClient(t)
	c.SignUp("many-tabs@example.com")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 20 {
		c.Stream(ctx)
	}
	a.waitClients(t, 20)
	r := c.Do(http.MethodGet, "/events", nil, nil)
	apptest.RequireStatus(t, r, http.StatusTooManyRequests)
	apptest.RequireContains(t, r.Body, "Too many browsers are showing live updates for this account")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	c.On(b.Instance).Stream(ctx)
	b.waitClients(t, 1)
	other := a.NewClient(t)
	other.SignUp("one-tab@example.com")
	other.Stream(ctx)
	a.waitClients(t, 21)
	testkit.Record(t, testkit.Scenario{ID: "stream-cap", Times: 21,
		Injected: "21 event streams of one founder on one instance",
		Result:   "20 open; the 21st refused with 429, Retry-After and a sentence; another instance and another founder still take streams"})
}

// The server's ReadTimeout bounds how long a request may take to arrive, and never cuts an
// event stream, which reads nothing after its request.
func TestReadTimeoutLeavesStreamsOpen(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.ReadTimeout = time.Second }})
	c := s.NewClient(t)
	c.SignUp("read-timeout@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	var built struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "k"}, &built), http.StatusAccepted)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.Stream(ctx)
	isCard := func(ev testkit.SSEEvent) bool { return ev.Event == views.DOMID(views.Card, p.ID) }
	testkit.NextSSE(t, events, 10*time.Second, "the snapshot's card", isCard)
	time.Sleep(3 * time.Second) // three read timeouts: the stream must outlive them
	// A change announced now still arrives on the open stream: the card drawn otherwise (now
	// shared; the same drawing is not sent again).
	apptest.RequireStatus(t, c.PostForm("/projects/"+p.ID+"/share", url.Values{}), http.StatusSeeOther)
	testkit.NextSSE(t, events, 10*time.Second, "the project's card again", isCard)
}
