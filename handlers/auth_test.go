package handlers_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/versions"
)

func TestSignUpLogInLogOutPages(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	c := b.NewClient(t)

	r := c.Get("/")
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); loc != "/login" {
		t.Fatalf("anonymous dashboard redirects to %q", loc)
	}

	c.Get("/signup")
	r = c.PostForm("/signup", url.Values{"email": {"Ada@Example.com"}, "password": {"short"}})
	apptest.RequireStatus(t, r, http.StatusUnprocessableEntity)
	apptest.RequireContains(t, r.Body, `data-testid="err-password"`)
	apptest.RequireContains(t, r.Body, "Use at least 8 characters.")
	apptest.RequireContains(t, r.Body, `value="Ada@Example.com"`)

	r = c.PostForm("/signup", url.Values{"email": {"Ada@Example.com"}, "password": {"correct horse"}})
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	r = c.Get("/")
	apptest.RequireStatus(t, r, http.StatusOK)
	apptest.RequireContains(t, r.Body, "ada@example.com")
	if b := apptest.ByTestID(t, r.Body, "credits"); b.Text != "10 credits" {
		t.Fatalf("the header's balance %q, want 10 credits", b.Text)
	}

	// Signing up twice with the same address (any case) is refused next to the field.
	c2 := b.NewClient(t)
	c2.Get("/signup")
	r = c2.PostForm("/signup", url.Values{"email": {"ADA@example.com"}, "password": {"another pass"}})
	apptest.RequireStatus(t, r, http.StatusUnprocessableEntity)
	apptest.RequireContains(t, r.Body, "An account with this email already exists")

	r = c.PostForm("/logout", url.Values{})
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	apptest.RequireStatus(t, c.Get("/"), http.StatusSeeOther)

	c.Get("/login")
	r = c.PostForm("/login", url.Values{"email": {"ada@example.com"}, "password": {"wrong password"}})
	apptest.RequireStatus(t, r, http.StatusUnauthorized)
	apptest.RequireContains(t, r.Body, "Email or password is incorrect.")
	r = c.PostForm("/login", url.Values{"email": {"ada@example.com"}, "password": {"correct horse"}})
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	apptest.RequireStatus(t, c.Get("/"), http.StatusOK)
}

func TestSessionTokenRenewedOnLogInAndLogOut(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	c := b.NewClient(t)
	c.Get("/login")
	if tok := sessionCookie(t, c); tok != "" {
		t.Fatalf("the log-in page set a session cookie %q", tok)
	}
	// A session token planted before the log-in (session fixation) is never the founder's.
	const before = "planted-by-someone-else-0123456789abcdef"
	u, _ := url.Parse(c.URL("/"))
	c.HTTP().Jar.SetCookies(u, []*http.Cookie{{Name: "sandman_session", Value: before, Path: "/"}})
	c.SignUp("renew@example.com")
	afterLogin := sessionCookie(t, c)
	if afterLogin == "" || before == afterLogin {
		t.Fatalf("session token not renewed at login: %q → %q", before, afterLogin)
	}
	r := c.API(http.MethodDelete, "/api/session", nil, nil)
	apptest.RequireStatus(t, r, http.StatusNoContent)
	if after := sessionCookie(t, c); after == afterLogin {
		t.Fatal("session token kept after logout")
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/me", nil, nil), http.StatusUnauthorized)
}

func sessionCookie(t *testing.T, c *apptest.Client) string {
	t.Helper()
	u, _ := url.Parse(c.URL("/"))
	for _, ck := range c.HTTP().Jar.Cookies(u) {
		if ck.Name == "sandman_session" {
			return ck.Value
		}
	}
	return ""
}

// The session cookie is production's (package app assembles the session manager for tests
// too): HttpOnly, SameSite=Lax, and Secure exactly when SANDMAN_COOKIE_SECURE says so; every
// answer then also tells browsers to use HTTPS only (HSTS).
func TestSessionCookieAttributes(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprintf("secure=%v", secure), func(t *testing.T) {
			t.Parallel()
			b := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.CookieSecure = secure }})
			for _, path := range []string{"/login", "/healthz", "/static/css/app.css", "/no/such/page"} {
				hsts := b.NewClient(t).Do(http.MethodGet, path, nil, nil).Header.Get("Strict-Transport-Security")
				if (hsts != "") != secure || secure && !strings.HasPrefix(hsts, "max-age=") {
					t.Fatalf("%s: Strict-Transport-Security %q with secure cookies %v", path, hsts, secure)
				}
			}
			// The log-in page sets only the pre-login CSRF cookie (no session yet); signing up
			// sets the session's.
			c := b.NewClient(t)
			preLogin := "sandman_csrf="
			if secure {
				preLogin = "__Host-sandman_csrf="
			}
			r := c.Get("/login")
			requireOneCookie(t, r, preLogin, secure)
			r = c.Do(http.MethodPost, "/signup", strings.NewReader(url.Values{"email": {"cookie@example.com"}, "password": {"correct horse"},
				"_csrf": {c.CSRF()}}.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded",
				"Cookie": strings.TrimSuffix(preLogin, "=") + "=" + c.CSRF()})
			apptest.RequireStatus(t, r, http.StatusSeeOther)
			requireOneCookie(t, r, "sandman_session=", secure)
		})
	}
	testkit.Record(t, testkit.Scenario{ID: "session-cookie", Times: 2,
		Injected: "the production assembly with SANDMAN_COOKIE_SECURE false, then true",
		Result:   "sandman_session and the pre-login CSRF cookie are HttpOnly and SameSite=Lax, Secure exactly when configured (the latter __Host- then); HSTS on every answer exactly then"})
}

// requireOneCookie checks that r sets one cookie (besides an expired one), named by prefix,
// HttpOnly and SameSite=Lax, and Secure exactly when secure.
func requireOneCookie(t *testing.T, r apptest.Response, prefix string, secure bool) {
	t.Helper()
	var sc []string
	for _, v := range r.Header.Values("Set-Cookie") {
		if !strings.Contains(v, "Max-Age=0") {
			sc = append(sc, v)
		}
	}
	if len(sc) != 1 || !strings.HasPrefix(sc[0], prefix) {
		t.Fatalf("want one cookie %s…, got %q", prefix, sc)
	}
	attrs := map[string]bool{}
	for _, a := range strings.Split(sc[0], ";")[1:] {
		attrs[strings.TrimSpace(a)] = true
	}
	if !attrs["HttpOnly"] || !attrs["SameSite=Lax"] || attrs["Secure"] != secure {
		t.Fatalf("cookie %q: want HttpOnly, SameSite=Lax and Secure=%v", sc[0], secure)
	}
}

// Reading the log-in and sign-up pages writes nothing to the database (a crawler's visits
// would otherwise each add a session row), and their forms stay protected: a post needs the
// token of the pre-login cookie it came with, and a forged or missing one is refused.
func TestAnonymousLogInPagesWriteNoSession(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	for i := range 100 {
		c := b.NewClient(t)
		r := c.Get([]string{"/login", "/signup"}[i%2])
		apptest.RequireStatus(t, r, http.StatusOK)
		if c.CSRF() == "" {
			t.Fatal("the page's form carries no CSRF token")
		}
		first := c.CSRF()
		c.Get("/login") // the same visitor again: the same token, from its cookie
		if c.CSRF() != first {
			t.Fatal("a second visit changed the visitor's token")
		}
	}
	if n := b.count(t, "SELECT count(*) FROM sessions"); n != 0 {
		t.Fatalf("100 anonymous views of /login and /signup wrote %d session rows", n)
	}

	form := func(tok string) *strings.Reader {
		return strings.NewReader(url.Values{"email": {"forged@example.com"}, "password": {"correct horse"}, "_csrf": {tok}}.Encode())
	}
	formType := map[string]string{"Content-Type": "application/x-www-form-urlencoded"}
	victim := b.NewClient(t)
	victim.Get("/signup")
	// An attacker's own token (from their own visit) in the victim's post: refused.
	attacker := b.NewClient(t)
	attacker.Get("/signup")
	for name, tok := range map[string]string{"another visitor's token": attacker.CSRF(), "no token": ""} {
		r := victim.Do(http.MethodPost, "/signup", form(tok), formType)
		if r.Status != http.StatusForbidden {
			t.Fatalf("a sign-up with %s: %d, want 403", name, r.Status)
		}
	}
	// A token without its cookie (a fresh browser): refused.
	r := b.NewClient(t).Do(http.MethodPost, "/signup", form(victim.CSRF()), formType)
	apptest.RequireStatus(t, r, http.StatusForbidden)
	if n := b.count(t, "SELECT count(*) FROM users WHERE email = 'forged@example.com'"); n != 0 {
		t.Fatal("a forged sign-up made an account")
	}
	// The visitor's own token with its cookie signs up, and the session's token takes over.
	r = victim.Do(http.MethodPost, "/signup", form(victim.CSRF()), formType)
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	pre := victim.CSRF()
	r = victim.Get("/")
	apptest.RequireStatus(t, r, http.StatusOK)
	if victim.CSRF() == pre {
		t.Fatal("the founder's pages still carry the pre-login token")
	}
	if n := b.count(t, "SELECT count(*) FROM sessions"); n != 1 {
		t.Fatalf("%d session rows after one sign-up, want 1", n)
	}
}

// Pages may frame the provider's previews and nothing else: the policy names the preview
// origin of the configured provider (here sandboxd's *.localhost:PORT).
func TestContentSecurityPolicyFramesThePreviewOrigin(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	csp := b.NewClient(t).Get("/login").Header.Get("Content-Security-Policy")
	want := "frame-src http://*." + b.Host.Domain + ";"
	if !strings.Contains(csp, want) || !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "script-src 'self';") {
		t.Fatalf("Content-Security-Policy %q: want %q, no framing of Sandman and only its own scripts", csp, want)
	}
}

func TestJSONAPIAccount(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	c := b.NewClient(t)
	c.SignUp("api@example.com")
	type storage struct{ UsedBytes, QuotaBytes int64 }
	var me struct {
		Email   string  `json:"email"`
		Credits int     `json:"credits"`
		Storage storage `json:"storage"`
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/me", nil, &me), http.StatusOK)
	if me.Email != "api@example.com" || me.Credits != 10 || me.Storage != (storage{0, versions.DefaultQuota}) {
		t.Fatalf("me = %+v", me)
	}
	newCounter(t, c)
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/me", nil, &me), http.StatusOK)
	if me.Storage.UsedBytes <= 0 || me.Storage.QuotaBytes != versions.DefaultQuota {
		t.Fatalf("after a project, storage = %+v: want the project's bytes used of the default quota", me.Storage)
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
			r := b.NewClient(t).API(http.MethodPost, "/api/users", tt.body, nil)
			apptest.RequireStatus(t, r, tt.status)
			apptest.RequireContains(t, r.Body, tt.code)
		})
	}

	anon := b.NewClient(t)
	r := anon.API(http.MethodPost, "/api/session", map[string]string{"email": "api@example.com", "password": "wrong one!"}, nil)
	apptest.RequireStatus(t, r, http.StatusUnauthorized)
	apptest.RequireContains(t, r.Body, `"code":"bad_credentials"`)
	var s struct{ CSRFToken string }
	apptest.RequireStatus(t, anon.API(http.MethodPost, "/api/session", map[string]string{"email": "API@example.com", "password": "correct horse"}, &s), http.StatusOK)
	if s.CSRFToken == "" {
		t.Fatal("no csrfToken in login answer")
	}
}

func TestLoginRateLimit(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	owner := b.NewClient(t)
	owner.SignUp("limited@example.com")

	attacker := b.NewClient(t)
	for i := range 5 {
		r := attacker.API(http.MethodPost, "/api/session", map[string]string{"email": "limited@example.com", "password": "guess " + string(rune('a'+i))}, nil)
		apptest.RequireStatus(t, r, http.StatusUnauthorized)
	}
	// The sixth try is refused before the password is even checked, right one or not.
	r := attacker.API(http.MethodPost, "/api/session", map[string]string{"email": "limited@example.com", "password": "correct horse"}, nil)
	apptest.RequireStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	apptest.RequireContains(t, r.Body, "Too many failed logins")

	// The form shows the same message.
	page := b.NewClient(t)
	page.Get("/login")
	r = page.PostForm("/login", url.Values{"email": {"limited@example.com"}, "password": {"correct horse"}})
	apptest.RequireStatus(t, r, http.StatusTooManyRequests)
	apptest.RequireContains(t, r.Body, "Too many failed logins")

	// Another email from the same address is still allowed until the per-address limit.
	other := b.NewClient(t)
	other.SignUp("other@example.com")
	apptest.RequireStatus(t, b.NewClient(t).API(http.MethodPost, "/api/session", map[string]string{"email": "other@example.com", "password": "correct horse"}, nil), http.StatusOK)
	for i := range 14 {
		r := attacker.API(http.MethodPost, "/api/session", map[string]string{"email": "nobody" + string(rune('a'+i)) + "@example.com", "password": "whatever1"}, nil)
		apptest.RequireStatus(t, r, http.StatusUnauthorized)
	}
	// 5 + 1 (refused, not counted) + 14 = 19 failures from this address; one more reaches 20.
	apptest.RequireStatus(t, attacker.API(http.MethodPost, "/api/session", map[string]string{"email": "x@example.com", "password": "whatever1"}, nil), http.StatusUnauthorized)
	apptest.RequireStatus(t, b.NewClient(t).API(http.MethodPost, "/api/session", map[string]string{"email": "other@example.com", "password": "correct horse"}, nil), http.StatusTooManyRequests)
}
