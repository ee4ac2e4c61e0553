package handlers_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestSignUpLogInLogOutPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient(t)

	r := c.get("/")
	requireStatus(t, r, http.StatusSeeOther)
	if loc := r.header.Get("Location"); loc != "/login" {
		t.Fatalf("anonymous dashboard redirects to %q", loc)
	}

	c.get("/signup")
	r = c.postForm("/signup", url.Values{"email": {"Ada@Example.com"}, "password": {"short"}})
	requireStatus(t, r, http.StatusUnprocessableEntity)
	requireContains(t, r.body, `data-testid="err-password"`)
	requireContains(t, r.body, "Use at least 8 characters.")
	requireContains(t, r.body, `value="Ada@Example.com"`)

	r = c.postForm("/signup", url.Values{"email": {"Ada@Example.com"}, "password": {"correct horse"}})
	requireStatus(t, r, http.StatusSeeOther)
	r = c.get("/")
	requireStatus(t, r, http.StatusOK)
	requireContains(t, r.body, "ada@example.com")
	requireContains(t, r.body, `data-testid="credits">10 credits<`)

	// Signing up twice with the same address (any case) is refused next to the field.
	c2 := b.newClient(t)
	c2.get("/signup")
	r = c2.postForm("/signup", url.Values{"email": {"ADA@example.com"}, "password": {"another pass"}})
	requireStatus(t, r, http.StatusUnprocessableEntity)
	requireContains(t, r.body, "An account with this email already exists")

	r = c.postForm("/logout", url.Values{})
	requireStatus(t, r, http.StatusSeeOther)
	requireStatus(t, c.get("/"), http.StatusSeeOther)

	c.get("/login")
	r = c.postForm("/login", url.Values{"email": {"ada@example.com"}, "password": {"wrong password"}})
	requireStatus(t, r, http.StatusUnauthorized)
	requireContains(t, r.body, "Email or password is incorrect.")
	r = c.postForm("/login", url.Values{"email": {"ada@example.com"}, "password": {"correct horse"}})
	requireStatus(t, r, http.StatusSeeOther)
	requireStatus(t, c.get("/"), http.StatusOK)
}

func TestSessionTokenRenewedOnLogInAndLogOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient(t)
	c.get("/login")
	before := sessionCookie(t, c)
	c.signUp("renew@example.com")
	afterLogin := sessionCookie(t, c)
	if before == "" || afterLogin == "" || before == afterLogin {
		t.Fatalf("session token not renewed at login: %q → %q", before, afterLogin)
	}
	r := c.api(http.MethodDelete, "/api/session", nil, nil)
	requireStatus(t, r, http.StatusNoContent)
	if after := sessionCookie(t, c); after == afterLogin {
		t.Fatal("session token kept after logout")
	}
	requireStatus(t, c.api(http.MethodGet, "/api/me", nil, nil), http.StatusUnauthorized)
}

func sessionCookie(t *testing.T, c *client) string {
	t.Helper()
	u, _ := url.Parse(c.base)
	for _, ck := range c.hc.Jar.Cookies(u) {
		if ck.Name == "sandman_session" {
			return ck.Value
		}
	}
	return ""
}

func TestSessionCookieAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient(t)
	r := c.get("/login")
	sc := r.header.Values("Set-Cookie")
	if len(sc) != 1 {
		t.Fatalf("want one Set-Cookie, got %q", sc)
	}
	for _, attr := range []string{"HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(sc[0], attr) {
			t.Fatalf("cookie %q lacks %s", sc[0], attr)
		}
	}
}

func TestJSONAPIAccount(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient(t)
	c.signUp("api@example.com")
	var me struct {
		Email   string `json:"email"`
		Credits int    `json:"credits"`
	}
	requireStatus(t, c.api(http.MethodGet, "/api/me", nil, &me), http.StatusOK)
	if me.Email != "api@example.com" || me.Credits != 10 {
		t.Fatalf("me = %+v", me)
	}

	tests := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"bad email", map[string]string{"email": "nope", "password": "long enough"}, 422, `"code":"invalid"`},
		{"short password", map[string]string{"email": "x@example.com", "password": "1"}, 422, `"password":"Use at least 8 characters."`},
		{"unknown field", map[string]any{"email": "x@example.com", "password": "long enough", "admin": true}, 400, `"code":"bad_request"`},
		{"duplicate", map[string]string{"email": "api@example.com", "password": "long enough"}, 422, "already exists"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := b.newClient(t).api(http.MethodPost, "/api/users", tt.body, nil)
			requireStatus(t, r, tt.status)
			requireContains(t, r.body, tt.code)
		})
	}

	anon := b.newClient(t)
	r := anon.api(http.MethodPost, "/api/session", map[string]string{"email": "api@example.com", "password": "wrong one!"}, nil)
	requireStatus(t, r, http.StatusUnauthorized)
	requireContains(t, r.body, `"code":"bad_credentials"`)
	var s struct{ CSRFToken string }
	requireStatus(t, anon.api(http.MethodPost, "/api/session", map[string]string{"email": "API@example.com", "password": "correct horse"}, &s), http.StatusOK)
	if s.CSRFToken == "" {
		t.Fatal("no csrfToken in login answer")
	}
}

func TestCSRFRefusedWithoutToken(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient(t)
	c.signUp("csrf@example.com")
	good := c.csrf

	tests := []struct {
		name string
		do   func() response
	}{
		{"form without token", func() response {
			return c.do(http.MethodPost, "/projects", strings.NewReader("starter=counter"), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}},
		{"form with wrong token", func() response {
			return c.do(http.MethodPost, "/projects", strings.NewReader("starter=counter&_csrf=forged"), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}},
		{"api without header", func() response {
			return c.do(http.MethodPost, "/api/projects", strings.NewReader(`{"starter":"counter"}`), map[string]string{"Content-Type": "application/json"})
		}},
		{"api logout without header", func() response { return c.do(http.MethodDelete, "/api/session", nil, nil) }},
		{"logout form without token", func() response {
			return c.do(http.MethodPost, "/logout", strings.NewReader(""), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}},
		{"login form without token", func() response {
			return b.newClient(t).do(http.MethodPost, "/login", strings.NewReader("email=a%40b.c&password=xxxxxxxx"), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}},
		{"api login as a form", func() response {
			return b.newClient(t).do(http.MethodPost, "/api/session", strings.NewReader("email=a%40b.c"), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
		}},
		{"upload without token", func() response {
			return c.do(http.MethodPost, "/projects/upload", strings.NewReader(""), map[string]string{"Content-Type": "multipart/form-data; boundary=x"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.do()
			if r.status < 400 || r.status >= 500 {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			requireContains(t, r.body, "Reload the page and try again")
		})
	}
	// Nothing was created, and the session still works with the right token.
	var list []map[string]any
	c.csrf = good
	requireStatus(t, c.api(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	if len(list) != 0 {
		t.Fatalf("a refused request created %d projects", len(list))
	}
	requireStatus(t, c.api(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, nil), http.StatusCreated)
}

func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	owner := b.newClient(t)
	owner.signUp("limited@example.com")

	attacker := b.newClient(t)
	for i := range 5 {
		r := attacker.api(http.MethodPost, "/api/session", map[string]string{"email": "limited@example.com", "password": "guess " + string(rune('a'+i))}, nil)
		requireStatus(t, r, http.StatusUnauthorized)
	}
	// The sixth try is refused before the password is even checked, right one or not.
	r := attacker.api(http.MethodPost, "/api/session", map[string]string{"email": "limited@example.com", "password": "correct horse"}, nil)
	requireStatus(t, r, http.StatusTooManyRequests)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	requireContains(t, r.body, "Too many failed logins")

	// The form shows the same message.
	page := b.newClient(t)
	page.get("/login")
	r = page.postForm("/login", url.Values{"email": {"limited@example.com"}, "password": {"correct horse"}})
	requireStatus(t, r, http.StatusTooManyRequests)
	requireContains(t, r.body, "Too many failed logins")

	// Another email from the same address is still allowed until the per-address limit.
	other := b.newClient(t)
	other.signUp("other@example.com")
	requireStatus(t, b.newClient(t).api(http.MethodPost, "/api/session", map[string]string{"email": "other@example.com", "password": "correct horse"}, nil), http.StatusOK)
	for i := range 14 {
		r := attacker.api(http.MethodPost, "/api/session", map[string]string{"email": "nobody" + string(rune('a'+i)) + "@example.com", "password": "whatever1"}, nil)
		requireStatus(t, r, http.StatusUnauthorized)
	}
	// 5 + 1 (refused, not counted) + 14 = 19 failures from this address; one more reaches 20.
	requireStatus(t, attacker.api(http.MethodPost, "/api/session", map[string]string{"email": "x@example.com", "password": "whatever1"}, nil), http.StatusUnauthorized)
	requireStatus(t, b.newClient(t).api(http.MethodPost, "/api/session", map[string]string{"email": "other@example.com", "password": "correct horse"}, nil), http.StatusTooManyRequests)
}
