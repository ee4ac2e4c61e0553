package handlers_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// A log-out on one instance refuses the session on another at once, though the other answered
// it from memory until then (docs/architecture.md, "Sessions"); the founder's other session on
// that instance goes on.
func TestLogOutOnOneInstanceRefusesTheSessionOnAnotherAtOnce(t *testing.T) {
	t.Parallel()
	a := webOnly(t)
	b := start(t, apptest.Options{Role: app.RoleWeb, Host: a.Host, DatabaseURL: a.DatabaseURL})
	laptop := a.NewClient(t)
	laptop.SignUp("logout-cache@example.com")
	phone := b.NewClient(t)
	apptest.RequireStatus(t, phone.API(http.MethodPost, "/api/session",
		map[string]string{"email": "logout-cache@example.com", "password": apptest.Password}, nil), http.StatusOK)
	cookie := sessionCookie(t, laptop)
	if cookie == "" {
		t.Fatal("the laptop has no session cookie")
	}

	memory := func() float64 {
		return testkit.MetricValue(t, b.Registry(), "sandman_session_reads_total", map[string]string{"from": "memory"})
	}
	before := memory()
	for range 3 {
		if got := meWithCookie(t, b, cookie); got != http.StatusOK {
			t.Fatalf("the laptop's session on instance B before the log-out: %d, want 200", got)
		}
	}
	if memory()-before < 2 {
		t.Fatalf("instance B read the session from memory %v times in 3 requests: want it cached (else this test proves nothing)", memory()-before)
	}

	apptest.RequireStatus(t, laptop.API(http.MethodDelete, "/api/session", nil, nil), http.StatusNoContent)
	if got := meWithCookie(t, b, cookie); got != http.StatusUnauthorized {
		t.Fatalf("the logged-out session on instance B right after the log-out on A: %d, want 401", got)
	}
	if got := meWithCookie(t, a, cookie); got != http.StatusUnauthorized {
		t.Fatalf("the logged-out session on instance A: %d, want 401", got)
	}
	apptest.RequireStatus(t, phone.API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)
}

// meWithCookie is the status of GET /api/me on s with the session cookie alone (no jar: a
// log-out's answer does not take the cookie away from it).
func meWithCookie(t *testing.T, s *stack, cookie string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL()+"/api/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: "sandman_session", Value: cookie})
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// A change the feed cannot have heard (the session's row deleted behind Sandman's back, as one
// announced while the feed was down would be) stops being answered from memory once the feed
// drops: an instance whose feed was down forgets every copy.
func TestAFeedThatDroppedForgetsEverySession(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("feed-drop@example.com")
	cookie := sessionCookie(t, c)
	for range 2 {
		apptest.RequireStatus(t, c.API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)
	}
	if _, err := s.Pool().Exec(context.Background(), "DELETE FROM sessions"); err != nil {
		t.Fatal(err)
	}
	if got := meWithCookie(t, s, cookie); got != http.StatusOK {
		t.Fatalf("a session deleted without an announcement: %d, want 200 from memory (else this test proves nothing)", got)
	}

	old := s.listenerPID(t)
	if _, err := s.Pool().Exec(context.Background(), "SELECT pg_terminate_backend($1)", old); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pid := old; pid == old || pid == 0; pid = s.listenerPID(t) {
		if time.Now().After(deadline) {
			t.Fatal("the feed did not reconnect within 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := meWithCookie(t, s, cookie); got != http.StatusUnauthorized {
		t.Fatalf("the deleted session after the feed dropped and came back: %d, want 401", got)
	}
}
