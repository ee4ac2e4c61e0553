package handlers_test

import (
	"bytes"
	"context"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// route is one entry of the production route table.
type route struct{ method, pattern string }

func (r route) String() string { return r.method + " " + r.pattern }

// stateChanging reports whether the route's method may change something (and needs a token).
func (r route) stateChanging() bool {
	switch r.method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// routes walks the instance's own route table (echo's, as package app assembled it), so a route
// added to handlers/routes.go is swept without editing these tests.
func (s *stack) routes(t testing.TB) []route {
	t.Helper()
	var out []route
	for _, r := range s.Handler().(*echo.Echo).Routes() {
		switch r.Method {
		case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			continue // echo's own not-found entries
		}
		if r.Path == "/static/*" {
			continue // files; swept through one of them below
		}
		out = append(out, route{r.Method, r.Path})
	}
	if len(out) < 30 {
		t.Fatalf("only %d routes found: the walker lost the route table", len(out))
	}
	return out
}

// ids are what a route's parameters are filled with (token: a share link's).
type ids struct{ project, sandbox, build, token string }

// path fills the route's parameters, each by the collection it follows ("/projects/:id" takes a
// project id). A parameter after anything else fails the test, naming what to teach it.
func (r route) path(t testing.TB, in ids) string {
	t.Helper()
	parts := strings.Split(r.pattern, "/")
	for i, p := range parts {
		if !strings.HasPrefix(p, ":") && !strings.Contains(p, "*") {
			continue
		}
		var v string
		if i > 0 {
			switch parts[i-1] {
			case "projects":
				v = in.project
			case "sandboxes":
				v = in.sandbox
			case "builds":
				v = in.build
			case "s":
				v = in.token
			}
		}
		if v == "" {
			t.Fatalf("%s: the sweep cannot fill %q; teach route.path which id it takes", r, p)
		}
		parts[i] = v
	}
	return strings.Join(parts, "/")
}

// public are the routes anyone may call without a session (each refuses what it must itself:
// the webhook checks its signature, log-in and sign-up their limits, a share link's routes its
// token).
var public = map[string]bool{
	"GET /login": true, "POST /login": true, "GET /signup": true, "POST /signup": true,
	"POST /api/users": true, "POST /api/session": true, "GET /healthz": true, "GET /readyz": true,
	"POST /webhooks/e2b": true, "GET /metrics": true,
}

// opsRoute reports whether the route is the operator's console's (or its JSON).
func opsRoute(r route) bool {
	return strings.HasPrefix(r.pattern, "/ops") || strings.HasPrefix(r.pattern, "/api/ops/")
}

// visitorRoutes are a share link's routes, for its visitors, who have no account and no session
// (handlers/routes.go). They are public, and their POSTs carry no CSRF token, by design: there is
// no session whose token a cross-site page could ride on (they read and set no cookie), and the
// link's token in the path is their only authority. That token reaches one project's preview,
// which they may only see, wake (a free resume: never a build, never a credit) and keep awake,
// within the visitors' limits; the browsers' own cross-origin signal still refuses cross-site
// POSTs. The sweep checks each: a token that was replaced, one nobody has and a malformed one are
// 404s that change nothing; a good one sets no cookie; all answers carry the security headers and
// ask not to be indexed. TestShareLinkReachesOnlyItsPreview checks what a good token can do.
var visitorRoutes = map[string]bool{
	"GET /s/:token": true, "POST /s/:token": true, "POST /s/:token/activity": true, "GET /s/:token/events": true,
}

func init() {
	for r := range visitorRoutes {
		public[r] = true
	}
}

// fingerprint sums up everything a request could change (sessions apart), to show a refused
// request changed nothing.
func (s *stack) fingerprint(t testing.TB) string {
	t.Helper()
	var fp string
	err := s.Pool().QueryRow(context.Background(), `SELECT concat_ws(' ',
		(SELECT count(*) FROM users), (SELECT coalesce(sum(credits), 0) FROM users),
		(SELECT count(*) FROM projects), (SELECT count(*) FROM project_files),
		(SELECT count(*) FROM builds), (SELECT string_agg(status::text || stage, ',' ORDER BY id) FROM builds),
		(SELECT count(*) FROM sandboxes), (SELECT string_agg(status::text || version, ',' ORDER BY id) FROM sandboxes),
		(SELECT count(*) FROM sandbox_events), (SELECT count(*) FROM credit_ledger),
		(SELECT count(*) FROM webhook_deliveries), (SELECT count(*) FROM river_job),
		(SELECT count(*) FROM login_failures), (SELECT count(*) FROM signups))`).Scan(&fp)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// sweepFixture is an instance with a founder who owns a project, its build and sandbox, and
// another founder; both clients hold a page's CSRF token.
type sweepFixture struct {
	s            *stack
	owner, other *apptest.Client
	ids          ids
	// replacedToken is the project's first share link's, since replaced by a new link.
	replacedToken string
}

func newSweepFixture(t *testing.T, opts apptest.Options) *sweepFixture {
	t.Helper()
	if opts.Role == "" {
		opts.Role = app.RoleWeb // nothing needs to run: refused requests must change nothing
	}
	s := start(t, opts)
	owner, other := s.NewClient(t), s.NewClient(t)
	owner.SignUp("owner-sweep@example.com")
	other.SignUp("other-sweep@example.com")
	// The owner runs the console too, so its routes are swept with a session that may use them.
	s.makeOperator(t, "owner-sweep@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	var built struct {
		Build   struct{ ID string }
		Sandbox struct{ ID string }
	}
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "k"}, &built), http.StatusAccepted)
	// Its share link, made twice: the first one was replaced (it must not work any more).
	replaced := shareToken(t, owner, p.ID)
	apptest.RequireStatus(t, owner.PostForm("/projects/"+p.ID+"/share/new", url.Values{}), http.StatusSeeOther)
	f := &sweepFixture{s: s, owner: owner, other: other, ids: ids{project: p.ID, sandbox: built.Sandbox.ID, build: built.Build.ID,
		token: shareToken(t, owner, p.ID)}, replacedToken: replaced}
	if f.ids.token == replaced {
		t.Fatal("New link kept the token")
	}
	return f
}

// securityHeaders fails t unless the answer carries the headers and policy every page has.
func securityHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	for k, want := range map[string]string{"X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY", "Referrer-Policy": "same-origin"} {
		if got := h.Get(k); got != want {
			t.Errorf("%s: %s = %q, want %q", what, k, got, want)
		}
	}
	csp := h.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "object-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: Content-Security-Policy %q lacks %q", what, csp, want)
		}
	}
}

// send makes one request with a body of the route's usual kind (a form, JSON for the API) and
// the given CSRF token in the header ("" for none); it never waits for an event stream's end.
func send(t *testing.T, c *apptest.Client, method, path, token string) apptest.Response {
	t.Helper()
	h := map[string]string{}
	var body io.Reader
	if method != http.MethodGet {
		if strings.HasPrefix(path, "/api/") {
			body, h["Content-Type"] = strings.NewReader(`{"idempotencyKey":"sweep"}`), "application/json"
		} else {
			// A multipart form, which every form route takes (the upload takes nothing else).
			b, ct := multipartBody(t, "", map[string]string{"idempotencyKey": "sweep", "starter": "counter"}, []upFile{{"a.js", "x"}})
			body, h["Content-Type"] = b, ct
		}
	}
	if token != "" {
		h["X-CSRF-Token"] = token
	}
	if strings.HasSuffix(path, "/events") {
		return peek(t, c, method, path, h)
	}
	return c.Do(method, path, body, h)
}

// peek sends a request and reads only the answer's status and headers (an event stream's body
// never ends).
func peek(t *testing.T, c *apptest.Client, method, path string, h map[string]string) apptest.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, c.URL(path), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
	res, err := c.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return apptest.Response{Status: res.StatusCode, Header: res.Header}
}

// TestSecuritySweep walks the production route table: every state-changing route refuses a
// missing or wrong CSRF token, every route that takes an id answers 404 for another founder's
// (and for ids that do not exist), every route but the public ones refuses an anonymous
// client, and every answer, refusals included, carries the security headers and the policy.
// Nothing any refused request sent changes anything.
func TestSecuritySweep(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t, apptest.Options{})
	s := f.s
	f.owner.Get("/")
	f.other.Get("/")
	routes := s.routes(t)
	before := s.fingerprint(t)

	for _, r := range routes {
		path := r.path(t, f.ids)
		// Anonymous: only the public routes answer; every other one sends to the log-in page,
		// answers 401, or (state-changing, with no session token to match) 403.
		if !public[r.String()] {
			anon := send(t, s.NewClient(t), r.method, path, "")
			securityHeaders(t, "anonymous "+r.String(), anon.Header)
			ok := anon.Status == http.StatusUnauthorized || anon.Status == http.StatusForbidden ||
				anon.Status == http.StatusSeeOther && anon.Header.Get("Location") == "/login"
			if opsRoute(r) {
				// The console is a page that does not exist for anyone but operators.
				ok = anon.Status == http.StatusNotFound
			}
			if !ok {
				t.Errorf("anonymous %s answered %d: a route that is not public must need a session", r, anon.Status)
			}
		}
		if visitorRoutes[r.String()] {
			// No session, no token to check: a good link's token sets no cookie, and nothing
			// else opens the link (below).
			res := send(t, s.NewClient(t), r.method, path, "")
			if res.Status >= 400 || res.Header.Get("Set-Cookie") != "" || res.Header.Get("X-Robots-Tag") != "noindex, nofollow" {
				t.Errorf("a visitor's %s: %d, Set-Cookie %q, X-Robots-Tag %q: want an answer that sets no cookie and asks not to be indexed",
					r, res.Status, res.Header.Get("Set-Cookie"), res.Header.Get("X-Robots-Tag"))
			}
			securityHeaders(t, "a visitor's "+r.String(), res.Header)
		} else if r.stateChanging() {
			switch r.String() {
			case "POST /webhooks/e2b":
				// Signed by the provider instead: unsigned or mis-signed, it is refused.
				for _, sig := range []string{"", "forged"} {
					res := f.owner.Do(r.method, path, strings.NewReader(`{"id":"e1","type":"sandbox.lifecycle.killed","sandbox_id":"i1"}`),
						map[string]string{"Content-Type": "application/json", "e2b-signature": sig})
					apptest.RequireStatus(t, res, http.StatusUnauthorized)
					securityHeaders(t, "unsigned webhook", res.Header)
				}
			case "POST /api/users", "POST /api/session":
				// Exempt as JSON (before any session); any other body needs a token.
				res := s.NewClient(t).Do(r.method, path, strings.NewReader("email=a%40b.c&password=long+enough"),
					map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
				apptest.RequireStatus(t, res, http.StatusForbidden)
			default:
				for _, token := range []string{"", "forged-token"} {
					res := send(t, f.owner, r.method, path, token)
					if res.Status != http.StatusForbidden || !strings.Contains(res.Body, "Reload the page and try again") {
						t.Errorf("%s with token %q: %d %.200s, want 403 asking to reload", r, token, res.Status, res.Body)
					}
					securityHeaders(t, r.String()+" without its token", res.Header)
				}
				// A streamed form carries its token as its first field: a forged one is refused too.
				if r.String() == "POST /projects/upload" {
					body, ct := multipartBody(t, "forged-token", map[string]string{"name": "x"}, []upFile{{"a.js", "x"}})
					res := f.owner.Do(r.method, path, body, map[string]string{"Content-Type": ct})
					apptest.RequireStatus(t, res, http.StatusForbidden)
				}
			}
		}
		// A share link that was replaced, one nobody has and a malformed one are not found,
		// whoever asks.
		if visitorRoutes[r.String()] {
			for _, token := range []string{f.replacedToken, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "not-a-token", f.ids.token + "x"} {
				res := send(t, f.other, r.method, r.path(t, ids{token: token}), f.other.CSRF())
				if res.Status != http.StatusNotFound || res.Header.Get("X-Robots-Tag") != "noindex, nofollow" {
					t.Errorf("%s with the token %q: %d %.200s, want 404 not to be indexed", r, token, res.Status, res.Body)
				}
				securityHeaders(t, r.String()+" with a bad token", res.Header)
			}
			continue
		}
		// Another founder's ids, and ids nobody has, are not found, whatever the method.
		if strings.Contains(r.pattern, ":") {
			for _, in := range []ids{f.ids, {project: "00000000-0000-0000-0000-000000000000", sandbox: "00000000-0000-0000-0000-000000000000",
				build: "00000000-0000-0000-0000-000000000000"}, {project: "not-an-id", sandbox: "not-an-id", build: "not-an-id"}} {
				res := send(t, f.other, r.method, r.path(t, in), f.other.CSRF())
				if res.Status != http.StatusNotFound {
					t.Errorf("another founder's %s %s: %d %.200s, want 404", r.method, r.path(t, in), res.Status, res.Body)
				}
				securityHeaders(t, "another founder's "+r.String(), res.Header)
			}
		}
	}
	// The owner's own pages carry them too (and a file, and an unknown page).
	for _, r := range routes {
		if r.method == http.MethodGet && !strings.Contains(r.pattern, "/api/") {
			securityHeaders(t, "the owner's "+r.String(), send(t, f.owner, r.method, r.path(t, f.ids), "").Header)
		}
	}
	securityHeaders(t, "a static file", f.owner.Do(http.MethodGet, "/static/css/app.css", nil, nil).Header)
	securityHeaders(t, "an unknown page", f.owner.Get("/no/such/page").Header)

	if after := s.fingerprint(t); after != before {
		t.Fatalf("refused requests changed the database:\n before %s\n after  %s", before, after)
	}
	if got := f.owner.Credits(); got != 9 {
		t.Fatalf("the owner's credits are %d, want 9", got)
	}
	// And the sessions still work, with their tokens.
	apptest.RequireStatus(t, f.owner.API(http.MethodPost, "/api/projects", map[string]string{"starter": "static"}, nil), http.StatusCreated)
	apptest.RequireStatus(t, f.owner.Get("/projects/"+f.ids.project), http.StatusOK)
	testkit.Record(t, testkit.Scenario{ID: "sweep-csrf", Times: 2,
		Injected: "per state-changing route of the route table: no CSRF token, then a forged one (for the webhook: no signature, a forged one; for the JSON log-in and sign-up: a form body)",
		Result:   "403 asking to reload the page (401 for the webhook) on every route; nothing changed"})
	testkit.Record(t, testkit.Scenario{ID: "sweep-foreign-ids", Times: 3,
		Injected: "per route that takes an id: another founder's id, an id nobody has, a malformed id",
		Result:   "404 on every route; nothing changed"})
	testkit.Record(t, testkit.Scenario{ID: "sweep-anonymous", Times: 1,
		Injected: "per route that is not public: a request without a session",
		Result:   "303 to /login, 401 or 403 on every route (404 on the operator's console's); nothing changed"})
	testkit.Record(t, testkit.Scenario{ID: "sweep-headers", Times: 1,
		Injected: "per answer of this sweep (refusals, the owner's pages, a static file, an unknown page)",
		Result:   "X-Content-Type-Options, X-Frame-Options DENY, Referrer-Policy and the Content-Security-Policy on every answer"})
}

// tempSpills lists the multipart spill files in the temporary directory.
func tempSpills(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(os.TempDir(), "multipart-*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestHostileBodiesOnEveryRoute sends every route of the table a body over any limit (declared,
// and streamed without a length) and malformed bodies of each kind, with a valid session and
// token: each is a 4xx and nothing changes. No multipart form is ever spilled to disk.
func TestHostileBodiesOnEveryRoute(t *testing.T) {
	t.Parallel()
	f := newSweepFixture(t, apptest.Options{})
	s := f.s
	f.owner.Get("/")
	before := s.fingerprint(t)
	spills := len(tempSpills(t))
	const over = 22 << 20 // past every limit (the upload's, 21 MiB, is the largest)
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("_csrf", f.owner.CSRF())
	fw, _ := mw.CreateFormFile("files", "a.js")
	fw.Write(bytes.Repeat([]byte("x"), 60<<10))
	// No closing boundary: a multipart body cut short.
	malformed := []struct{ contentType, body string }{
		{"application/json", `{"idempotencyKey": "x", `},
		{"application/x-www-form-urlencoded", "idempotencyKey=%zz&_csrf=" + url.QueryEscape(f.owner.CSRF())},
		{mw.FormDataContentType(), mp.String()},
	}
	for _, r := range s.routes(t) {
		path := r.path(t, f.ids)
		h := func(ct string) map[string]string {
			return map[string]string{"Content-Type": ct, "X-CSRF-Token": f.owner.CSRF()}
		}
		for _, kind := range []struct{ contentType, prefix string }{
			{"application/json", `{"idempotencyKey": "`},
			{"application/x-www-form-urlencoded", "idempotencyKey="},
			// A well-formed form whose file never ends.
			{"multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"_csrf\"\r\n\r\n" + f.owner.CSRF() +
				"\r\n--x\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.bin\"\r\n\r\n"},
		} {
			ct := kind.contentType
			body := func() io.Reader { return io.MultiReader(strings.NewReader(kind.prefix), io.LimitReader(zeros{}, over)) }
			// A route refuses a kind of body it does not take (415) as soon as it sees it;
			// otherwise too large is 413.
			tooLarge := func(res apptest.Response) bool {
				return res.Status == http.StatusRequestEntityTooLarge ||
					res.Status == http.StatusUnsupportedMediaType && strings.Contains(res.Body, "multipart/form-data")
			}
			// Declared too large: refused before a byte of it is read.
			declared, _ := io.ReadAll(body())
			res := f.owner.Do(r.method, path, bytes.NewReader(declared), h(ct))
			if !tooLarge(res) {
				t.Errorf("%s with %d bytes of %s: %d %.200s, want 413", r, over, ct, res.Status, res.Body)
			}
			// Too large, streamed with no length: refused at the limit.
			res = f.owner.Do(r.method, path, body(), h(ct))
			if !tooLarge(res) {
				t.Errorf("%s with %d streamed bytes of %s: %d %.200s, want 413", r, over, ct, res.Status, res.Body)
			}
		}
		for _, m := range malformed {
			res := f.owner.Do(r.method, path, strings.NewReader(m.body), h(m.contentType))
			if res.Status < 400 || res.Status >= 500 {
				t.Errorf("%s with a malformed %s body: %d %.200s, want a 4xx", r, m.contentType, res.Status, res.Body)
			}
		}
	}
	if after := s.fingerprint(t); after != before {
		t.Fatalf("hostile bodies changed the database:\n before %s\n after  %s", before, after)
	}
	if got := len(tempSpills(t)); got > spills {
		t.Fatalf("%d multipart forms were spilled to disk", got-spills)
	}
	testkit.Record(t, testkit.Scenario{ID: "hostile-bodies", Times: 9,
		Injected: "per route of the route table, with a valid session and token: 22 MiB of JSON, of a form and of a multipart form, each declared and streamed without a length; a malformed JSON, form and multipart body",
		Result:   "413 for every oversized body (415 where the route takes no such body), a 4xx for every malformed one; nothing changed; no multipart form spilled to disk"})
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
