package handlers_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/labstack/echo/v4"

	"sandman/accounts"
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
	// echo keeps its routes in a map: sorted, every run walks (and seeds) them in one order.
	slices.SortFunc(out, func(a, b route) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// ids are what a route's parameters are filled with (token: a share link's; apiToken: an API
// token's id; webhook and delivery: an outgoing webhook endpoint's and one of its deliveries').
type ids struct{ project, sandbox, build, token, apiToken, webhook, delivery string }

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
			case "tokens":
				v = in.apiToken
			case "webhooks":
				v = in.webhook
			case "deliveries":
				v = in.delivery
			case "versions":
				v = "1" // every project has its version 1
			case "files":
				v = "package.json" // a file of the counter starter's version 1
			case "env":
				v = "SWEEP_VARIABLE" // a variable's name
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
	"POST /s/:token/reports": true,
}

func init() {
	for r := range visitorRoutes {
		public[r] = true
	}
}

// fingerprint sums up everything a request could change (sessions apart), to show a refused
// request changed nothing.
// Of the outgoing webhooks' events only the tests count: the others follow the build that runs
// meanwhile (a problem its install opens), not the requests.
func (s *stack) fingerprint(t testing.TB) string {
	t.Helper()
	var fp string
	err := s.Pool().QueryRow(context.Background(), `SELECT concat_ws(' ',
		(SELECT count(*) FROM users), (SELECT coalesce(sum(credits), 0) FROM users),
		(SELECT count(*) FROM projects), (SELECT count(*) FROM versions), (SELECT count(*) FROM blobs),
		(SELECT count(*) FROM builds), (SELECT string_agg(status::text || stage, ',' ORDER BY id) FROM builds),
		(SELECT count(*) FROM sandboxes), (SELECT string_agg(status::text || version, ',' ORDER BY id) FROM sandboxes),
		(SELECT count(*) FROM sandbox_events), (SELECT count(*) FROM credit_ledger),
		(SELECT count(*) FROM webhook_deliveries), (SELECT count(*) FROM river_job),
		(SELECT count(*) FROM login_failures), (SELECT count(*) FROM signups),
		(SELECT string_agg(id::text || coalesce(revoked_at::text, 'live'), ',' ORDER BY id) FROM api_tokens),
		(SELECT count(*) FROM share_links), (SELECT string_agg(id::text || encode(token_hash, 'hex'), ',' ORDER BY project_id) FROM share_links),
		(SELECT string_agg(id::text || url || enabled::text || encode(secret_sealed, 'hex'), ',' ORDER BY id) FROM webhook_endpoints),
		(SELECT count(*) FROM outbox_events WHERE type = 'webhook.test'))`).Scan(&fp)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

// sweepFixture is an instance with a founder who owns a project, its build and sandbox, and
// another founder; both clients hold a page's CSRF token, and each has an API token.
type sweepFixture struct {
	s            *stack
	owner, other *apptest.Client
	ids          ids
	// replacedToken is the project's first share link's, since replaced by a new link.
	replacedToken string
	// ownerAPI and otherAPI are the founders' backends: their API tokens, no cookie; revokedAPI
	// sends the owner's token that was revoked.
	ownerAPI, otherAPI, revokedAPI *apptest.Client
}

func newSweepFixture(t *testing.T, opts apptest.Options) *sweepFixture {
	t.Helper()
	if opts.Role == "" {
		opts.Role = app.RoleWeb // nothing needs to run: refused requests must change nothing
	}
	edit := opts.Config
	opts.Config = func(c *app.Config) {
		// The revoked token is sent to every route: its failures must not reach the address's
		// limit, which would refuse the good tokens too (TestBearerFailuresLimitedPerAddress).
		c.BearerFailureLimit = accounts.Limit{N: 1000, Window: time.Minute}
		if edit != nil {
			edit(c)
		}
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
		token: shareToken(t, owner, p.ID)}, replacedToken: replaced,
		ownerAPI: owner.WithToken(owner.MakeToken("sweep")), otherAPI: other.WithToken(other.MakeToken("sweep"))}
	if f.ids.token == replaced {
		t.Fatal("New link kept the token")
	}
	// A token of the owner's, revoked: its id fills the token routes' parameter.
	var revoked struct{ ID, Token string }
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/tokens", map[string]string{"name": "revoked"}, &revoked), http.StatusCreated)
	apptest.RequireStatus(t, owner.API(http.MethodDelete, "/api/tokens/"+revoked.ID, nil, nil), http.StatusNoContent)
	f.revokedAPI, f.ids.apiToken = owner.WithToken(revoked.Token), revoked.ID
	f.ids.webhook, f.ids.delivery = endpointWithDelivery(t, owner)
	return f
}

// nobodys are ids nobody has.
var nobodys = ids{project: "00000000-0000-0000-0000-000000000000", sandbox: "00000000-0000-0000-0000-000000000000",
	build: "00000000-0000-0000-0000-000000000000", apiToken: "00000000-0000-0000-0000-000000000000",
	webhook: "00000000-0000-0000-0000-000000000000", delivery: "9223372036854775807"}

// apiByToken reports whether an API token may call the route: every JSON API route but the
// token routes and the ones that open and close sessions.
func apiByToken(r route) bool {
	return strings.HasPrefix(r.pattern, "/api/") && !strings.HasPrefix(r.pattern, "/api/tokens") && r.pattern != "/api/session" &&
		r.pattern != "/api/users"
}

// sweepBearer sends the route what a founder's backend sends, an API token and no cookie nor
// CSRF token, and checks what it may do: the owner's token passes every JSON API route but the
// token and session routes (those answer 403), with no CSRF token, and reaches none of its pages
// (the log-in page, or the 403 of a form without its session's token) nor its event stream
// (401); another founder's token finds none of the owner's ids (404); a revoked token is a 401
// with RFC 6750's WWW-Authenticate. No answer of the API sets a cookie. The owner's state-changing requests
// go to ids nobody has, or carry a body the route refuses, so that nothing changes.
func sweepBearer(t *testing.T, f *sweepFixture, r route) {
	t.Helper()
	if public[r.String()] && !strings.HasPrefix(r.pattern, "/api/") {
		return // the webhook's signature, the visitors' link: no founder's identity counts there
	}
	check := func(who string, res apptest.Response, ok bool, want string) {
		t.Helper()
		if !ok {
			t.Errorf("%s on %s: %d %.200s, want %s", who, r, res.Status, res.Body, want)
		}
		// A page is not the token's: the header is not read there, and the request is a browser's
		// with no session, which an error page may start.
		if c := res.Header.Get("Set-Cookie"); c != "" && strings.HasPrefix(r.pattern, "/api/") {
			t.Errorf("%s on %s set a cookie: %s", who, r, c)
		}
		securityHeaders(t, who+" on "+r.String(), res.Header)
	}
	in := f.ids
	if r.stateChanging() {
		in = nobodys
	}
	res := send(t, f.ownerAPI, r.method, r.path(t, in), "")
	switch {
	case apiByToken(r) && !r.stateChanging():
		check("the owner's token", res, res.Status == http.StatusOK, "200")
	case apiByToken(r):
		check("the owner's token", res, res.Status == http.StatusNotFound || res.Status == http.StatusBadRequest,
			"404 (no such id) or 400 (the sweep's body): past the token, with no CSRF token, and nothing changed")
	case strings.HasPrefix(r.pattern, "/api/"):
		check("the owner's token", res, res.Status == http.StatusForbidden && strings.Contains(res.Body, `"session_only"`), "403 session_only")
	case r.pattern == "/events":
		check("the owner's token", res, res.Status == http.StatusUnauthorized, "401: a token never opens the event stream")
	case opsRoute(r):
		// A token never opens a page, and the console is missing to anyone without an operator's session.
		check("the owner's token", res, res.Status == http.StatusNotFound, "404: the console without an operator's session")
	case r.stateChanging():
		check("the owner's token", res, res.Status == http.StatusForbidden, "403: a page's form needs its session's token")
	default:
		check("the owner's token", res, res.Status == http.StatusSeeOther && res.Header.Get("Location") == "/login",
			"303 to /login: a token never opens a page")
	}
	if !apiByToken(r) {
		return
	}
	if strings.Contains(r.pattern, ":") {
		res := send(t, f.otherAPI, r.method, r.path(t, f.ids), "")
		check("another founder's token", res, res.Status == http.StatusNotFound, "404")
	}
	res = send(t, f.revokedAPI, r.method, r.path(t, f.ids), "")
	check("a revoked token", res, res.Status == http.StatusUnauthorized &&
		res.Header.Get("WWW-Authenticate") == `Bearer error="invalid_token"` && strings.Contains(res.Body, `"invalid_token"`),
		`401 invalid_token with WWW-Authenticate: Bearer error="invalid_token"`)
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
		if strings.HasSuffix(path, "/reports") {
			// A browser's report (applog.ParseReport): the one body these routes take.
			body, h["Content-Type"] = strings.NewReader(`{"kind":"error","message":"sweep"}`), "application/json"
		} else if strings.HasPrefix(path, "/api/") {
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
	if strings.HasSuffix(path, "/events") || strings.HasSuffix(path, "/logs/stream") {
		return peek(t, c, method, path, h)
	}
	return c.Do(method, path, body, h)
}

// peek sends a request and reads only the answer's status and headers, and a refusal's body (an
// event stream's body never ends).
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
	if b := c.Bearer(); b != "" {
		req.Header.Set("Authorization", "Bearer "+b)
	}
	res, err := c.HTTP().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body []byte
	if res.StatusCode != http.StatusOK { // a refusal is no stream: its body ends
		body, _ = io.ReadAll(io.LimitReader(res.Body, 64<<10))
	}
	return apptest.Response{Status: res.StatusCode, Header: res.Header, Body: string(body)}
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
		sweepBearer(t, f, r)
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
			for _, in := range []ids{f.ids, nobodys, {project: "not-an-id", sandbox: "not-an-id", build: "not-an-id", apiToken: "not-an-id", webhook: "not-an-id", delivery: "not-an-id"}} {
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
	testkit.Record(t, testkit.Scenario{ID: "sweep-bearer", Times: 3,
		Injected: "per route of the route table: the owner's API token with no cookie nor CSRF token, another founder's token, the owner's revoked token",
		Result:   "the JSON API but its token and session routes passes with the owner's token and no CSRF token; token and session routes 403; pages 303 to /login (forms 403; the operator's console 404), the event stream 401; another founder's token 404; the revoked one 401 invalid_token; no API answer sets a cookie; nothing changed"})
	testkit.Record(t, testkit.Scenario{ID: "sweep-headers", Times: 1,
		Injected: "per answer of this sweep (refusals, the owner's pages, a static file, an unknown page)",
		Result:   "X-Content-Type-Options, X-Frame-Options DENY, Referrer-Policy and the Content-Security-Policy on every answer"})
}

// spillWatch sees every multipart spill file created in the temporary directory while it runs
// (Sandman serves in the test's process, so its spills land in this process's os.TempDir()).
// It watches with inotify: net/http removes a request's spill files once it has answered, so a
// look at the directory afterwards never sees one.
type spillWatch struct {
	f       *os.File
	done    chan struct{}
	mu      sync.Mutex
	created map[string]bool // every name created in the directory
	err     error
}

func watchSpills(t testing.TB) *spillWatch {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatalf("inotify: %v", err)
	}
	if _, err := syscall.InotifyAddWatch(fd, os.TempDir(), syscall.IN_CREATE); err != nil {
		syscall.Close(fd)
		t.Fatalf("watch %s: %v", os.TempDir(), err)
	}
	w := &spillWatch{f: os.NewFile(uintptr(fd), "inotify"), done: make(chan struct{}), created: map[string]bool{}}
	go w.read()
	t.Cleanup(w.stop)
	return w
}

func (w *spillWatch) read() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return // closed by stop
		}
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+syscall.SizeofInotifyEvent:off+syscall.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			w.mu.Lock()
			if ev.Mask&syscall.IN_Q_OVERFLOW != 0 {
				w.err = fmt.Errorf("inotify's queue overflowed: spills may have gone unseen")
			}
			w.created[name] = true
			w.mu.Unlock()
		}
	}
}

func (w *spillWatch) stop() {
	w.f.Close()
	<-w.done
}

// Spills returns the spill files created so far, after giving the watcher time to read what
// the kernel queued.
func (w *spillWatch) Spills(t testing.TB) []string {
	t.Helper()
	// An event is queued before the call that created the file returns, so one file of ours
	// created now and seen proves every earlier event was read.
	marker, err := os.CreateTemp("", "spillwatch-")
	if err != nil {
		t.Fatal(err)
	}
	marker.Close()
	os.Remove(marker.Name())
	testkit.Until(t, 10*time.Second, "the spill watch to read its events", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.created[filepath.Base(marker.Name())]
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		t.Fatal(w.err)
	}
	var spills []string
	for name := range w.created {
		if strings.HasPrefix(name, "multipart-") {
			spills = append(spills, name)
		}
	}
	return spills
}

// The spill watch sees the spill of a form parsed with too little memory (as a ParseMultipartForm
// given less than the form's size in handlers/limits.go would), though net/http removes the file
// at once: so TestHostileBodiesOnEveryRoute fails when a form spills. Not parallel: its own
// spill must not land while that test watches.
func TestSpillWatchSeesASpill(t *testing.T) {
	w := watchSpills(t)
	body, ct := multipartBody(t, "", map[string]string{"name": "x"}, []upFile{{"a.js", strings.Repeat("x", 4<<10)}})
	req := httptest.NewRequest(http.MethodPost, "/", body)
	req.Header.Set("Content-Type", ct)
	if err := req.ParseMultipartForm(1); err != nil {
		t.Fatal(err)
	}
	if err := req.MultipartForm.RemoveAll(); err != nil {
		t.Fatal(err)
	}
	if got := w.Spills(t); len(got) != 1 {
		t.Fatalf("the watch saw %d spills (%v), want the one made", len(got), got)
	}
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
	spills := watchSpills(t)
	const over = 30 << 20 // past every limit (a new version's, 28.7 MiB of base64 and JSON, is the largest)
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
	if got := spills.Spills(t); len(got) > 0 {
		t.Fatalf("%d multipart forms were spilled to disk (%s…): a form must be parsed in memory, within its limit", len(got), got[0])
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
