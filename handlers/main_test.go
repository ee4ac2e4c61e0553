package handlers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alexedwards/scs/pgxstore"
	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"sandman/accounts"
	"sandman/db/dbtest"
	"sandman/handlers"
	"sandman/lifecycle"
	"sandman/live"
	"sandman/projects"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

type testBundle struct {
	srv  *httptest.Server
	pool *pgxpool.Pool
}

func setup(t testing.TB) *testBundle {
	t.Helper()
	pool := dbtest.NewPool(t)
	life, err := lifecycle.New(lifecycle.Options{Pool: pool, Config: lifecycle.DefaultConfig(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, pool, life, nil)
}

// serve runs the handlers over pool, life and (when not nil) the live hub on an httptest server.
func serve(t testing.TB, pool *pgxpool.Pool, life *lifecycle.Service, hub *live.Hub) *testBundle {
	t.Helper()
	sessions := scs.New()
	sessions.Store = pgxstore.NewWithCleanupInterval(pool, 0)
	sessions.Cookie.Name = "sandman_session"
	sessions.Cookie.SameSite = http.SameSiteLaxMode
	e := handlers.New(handlers.Deps{
		Pool: pool, Sessions: sessions,
		Accounts:  accounts.New(pool, accounts.Options{StartCredits: 10, BcryptCost: bcrypt.MinCost}),
		Projects:  projects.New(pool),
		Lifecycle: life,
		Live:      hub,
		Logger:    testLogger(),
		Registry:  prometheus.NewRegistry(),
	})
	srv := httptest.NewServer(e)
	if hub != nil {
		srv.Config.RegisterOnShutdown(hub.Close)
	}
	t.Cleanup(srv.Close)
	return &testBundle{srv: srv, pool: pool}
}

// testLogger discards logs unless SANDMAN_TEST_LOG names a level (debug, info, warn).
func testLogger() *slog.Logger {
	level := os.Getenv("SANDMAN_TEST_LOG")
	if level == "" {
		return slog.New(slog.DiscardHandler)
	}
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// client is a browser-like HTTP client with its own cookies that does not follow redirects.
type client struct {
	t    testing.TB
	base string
	hc   *http.Client
	csrf string
}

func (b *testBundle) newClient(t testing.TB) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: b.srv.URL, hc: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type response struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(method, path string, body io.Reader, header map[string]string) response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, header: res.Header, body: string(b)}
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// get fetches a page and remembers its CSRF token.
func (c *client) get(path string) response {
	c.t.Helper()
	r := c.do(http.MethodGet, path, nil, nil)
	if m := csrfRe.FindStringSubmatch(r.body); m != nil {
		c.csrf = m[1]
	}
	return r
}

// postForm submits a form with the remembered CSRF token.
func (c *client) postForm(path string, v url.Values) response {
	c.t.Helper()
	if _, ok := v["_csrf"]; !ok {
		v.Set("_csrf", c.csrf)
	}
	return c.do(http.MethodPost, path, strings.NewReader(v.Encode()), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
}

// api sends a JSON request with the remembered CSRF token and decodes the answer into out.
func (c *client) api(method, path string, in, out any) response {
	c.t.Helper()
	var body io.Reader
	h := map[string]string{"X-CSRF-Token": c.csrf}
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
		h["Content-Type"] = "application/json"
	}
	r := c.do(method, path, body, h)
	if out != nil && r.status < 300 {
		if err := json.Unmarshal([]byte(r.body), out); err != nil {
			c.t.Fatalf("decode %s %s: %v (%s)", method, path, err, r.body)
		}
	}
	return r
}

// signUp creates a founder through the JSON API and keeps the session.
func (c *client) signUp(email string) {
	c.t.Helper()
	var out struct{ CSRFToken string }
	r := c.api(http.MethodPost, "/api/users", map[string]string{"email": email, "password": "correct horse"}, &out)
	if r.status != http.StatusCreated {
		c.t.Fatalf("sign up %s: %d %s", email, r.status, r.body)
	}
	c.csrf = out.CSRFToken
}

func requireStatus(t testing.TB, r response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body: %.600s", r.status, want, r.body)
	}
}

func requireContains(t testing.TB, body, want string) {
	t.Helper()
	if !strings.Contains(body, want) {
		t.Fatalf("body does not contain %q:\n%.1500s", want, body)
	}
}
