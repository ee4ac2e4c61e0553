package handlers_test

import (
	"net/http"
	"testing"

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
