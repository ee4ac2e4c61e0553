package handlers_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sandman/accounts"
	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// listedToken is a token as GET /api/tokens lists it.
type listedToken struct {
	ID           string
	Name         string
	Prefix       string
	CreatedAt    time.Time
	ExpiresAt    *time.Time
	LastUsedAt   *time.Time
	LastUsedFrom *string
}

func listTokens(t *testing.T, c *apptest.Client) []listedToken {
	t.Helper()
	var out []listedToken
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/tokens", nil, &out), http.StatusOK)
	return out
}

// requireInvalidToken fails t unless the answer is the one refusal of a wrong, revoked or expired
// token, and returns its body (the same for every reason).
func requireInvalidToken(t *testing.T, what string, r apptest.Response) string {
	t.Helper()
	if r.Status != http.StatusUnauthorized || r.Header.Get("WWW-Authenticate") != `Bearer error="invalid_token"` {
		t.Fatalf("%s: %d, WWW-Authenticate %q, %s; want 401 with Bearer error=\"invalid_token\"", what, r.Status, r.Header.Get("WWW-Authenticate"), r.Body)
	}
	return r.Body
}

// A token's life: made once (its secret in that answer only), used by a backend with no cookie
// and no CSRF token, its last use recorded at the first use and moved at most once a minute,
// revoked, and from then on refused at once on every instance, with the same answer as a token
// nobody made.
func TestAPITokenLife(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	other := start(t, apptest.Options{Role: app.RoleWeb, Host: s.Host, DatabaseURL: s.DatabaseURL})
	owner := s.NewClient(t)
	owner.SignUp("token-life@example.com")

	var made struct {
		ID, Name, Token string
		CreatedAt       time.Time
		ExpiresAt       *time.Time
	}
	r := owner.API(http.MethodPost, "/api/tokens", map[string]any{"name": " ci ", "expiresInDays": 30}, &made)
	apptest.RequireStatus(t, r, http.StatusCreated)
	if made.Name != "ci" || accounts.ParseToken(made.Token) != nil || made.ExpiresAt == nil ||
		made.ExpiresAt.Sub(made.CreatedAt).Round(time.Hour) != 30*24*time.Hour || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("the made token: %+v, Cache-Control %q", made, r.Header.Get("Cache-Control"))
	}
	listed := listTokens(t, owner)
	if len(listed) != 1 || listed[0].ID != made.ID || listed[0].Prefix != made.Token[:8] || listed[0].LastUsedAt != nil || listed[0].LastUsedFrom != nil {
		t.Fatalf("the list: %+v, want the token with its prefix %q, never used", listed, made.Token[:8])
	}
	if l := owner.API(http.MethodGet, "/api/tokens", nil, nil); strings.Contains(l.Body, made.Token[8:]) {
		t.Fatal("the list shows the token's secret")
	}

	// The backend: the token, no cookie jar, no CSRF token. What it makes is the founder's.
	backend := owner.WithToken(made.Token)
	var me struct {
		Email     string
		CSRFToken *string
	}
	r = backend.API(http.MethodGet, "/api/me", nil, &me)
	apptest.RequireStatus(t, r, http.StatusOK)
	if me.Email != "token-life@example.com" || me.CSRFToken != nil || r.Header.Get("Set-Cookie") != "" {
		t.Fatalf("/api/me with the token: %s, Set-Cookie %q: want the founder, no CSRF token, no cookie", r.Body, r.Header.Get("Set-Cookie"))
	}
	var p struct{ ID string }
	r = backend.API(http.MethodPost, "/api/projects", map[string]string{"name": "from ci", "starter": "counter"}, &p)
	apptest.RequireStatus(t, r, http.StatusCreated)
	if r.Header.Get("Set-Cookie") != "" {
		t.Fatal("a bearer request got a cookie")
	}
	var projects []struct{ ID string }
	apptest.RequireStatus(t, owner.API(http.MethodGet, "/api/projects", nil, &projects), http.StatusOK)
	if len(projects) != 1 || projects[0].ID != p.ID {
		t.Fatalf("the founder's projects after the backend made one: %+v", projects)
	}
	// Another founder's token finds none of it.
	stranger := s.NewClient(t)
	stranger.SignUp("token-stranger@example.com")
	apptest.RequireStatus(t, stranger.WithToken(stranger.MakeToken("theirs")).API(http.MethodPost, "/api/projects/"+p.ID+"/builds",
		map[string]string{"idempotencyKey": "steal"}, nil), http.StatusNotFound)

	first := listTokens(t, owner)[0]
	if first.LastUsedAt == nil || first.LastUsedFrom == nil || *first.LastUsedFrom != "127.0.0.1" {
		t.Fatalf("after its first use: %+v, want its last use from 127.0.0.1", first)
	}
	apptest.RequireStatus(t, backend.API(http.MethodGet, "/api/projects", nil, nil), http.StatusOK)
	if again := listTokens(t, owner)[0]; !again.LastUsedAt.Equal(*first.LastUsedAt) {
		t.Fatalf("the last use moved from %s to %s within a minute", first.LastUsedAt, again.LastUsedAt)
	}
	// A minute later it moves.
	if _, err := s.Pool().Exec(context.Background(), "UPDATE api_tokens SET last_used_at = last_used_at - interval '61 seconds' WHERE id = $1", made.ID); err != nil {
		t.Fatal(err)
	}
	apptest.RequireStatus(t, backend.API(http.MethodGet, "/api/projects", nil, nil), http.StatusOK)
	if moved := listTokens(t, owner)[0]; !moved.LastUsedAt.After(*first.LastUsedAt) {
		t.Fatalf("the last use stayed at %s after a minute", moved.LastUsedAt)
	}

	// Both instances take it; revoked on one, the next request is refused on both.
	onOther := backend.On(other.Instance)
	apptest.RequireStatus(t, onOther.API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)
	apptest.RequireStatus(t, owner.API(http.MethodDelete, "/api/tokens/"+made.ID, nil, nil), http.StatusNoContent)
	revoked := requireInvalidToken(t, "the revoked token", backend.API(http.MethodGet, "/api/me", nil, nil))
	requireInvalidToken(t, "the revoked token on the other instance", onOther.API(http.MethodGet, "/api/me", nil, nil))
	nobodys := requireInvalidToken(t, "a token nobody made", owner.WithToken(s.wellFormedToken(t, owner)).API(http.MethodGet, "/api/me", nil, nil))
	if revoked != nobodys || !strings.Contains(revoked, `"invalid_token"`) {
		t.Fatalf("a revoked token is told %s, one nobody made %s: want the same answer", revoked, nobodys)
	}
	if l := listTokens(t, owner); len(l) != 0 {
		t.Fatalf("the list after the revoke: %+v", l)
	}
	apptest.RequireStatus(t, owner.API(http.MethodDelete, "/api/tokens/"+made.ID, nil, nil), http.StatusNotFound)
}

// wellFormedToken is a token with a good checksum that the database does not know: one c made
// whose row is gone (as a token of another deployment would be).
func (s *stack) wellFormedToken(t *testing.T, c *apptest.Client) string {
	t.Helper()
	tok := c.MakeToken("unknown")
	if _, err := s.Pool().Exec(context.Background(), "DELETE FROM api_tokens WHERE name = 'unknown'"); err != nil {
		t.Fatal(err)
	}
	return tok
}

// A token past its expiry is refused like a wrong one, and listed as expired until revoked; a
// token that never expires has no expiry.
func TestAPITokenExpires(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	owner := s.NewClient(t)
	owner.SignUp("token-expiry@example.com")
	var never, soon struct {
		ID, Token string
		ExpiresAt *time.Time
	}
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/tokens", map[string]any{"name": "forever"}, &never), http.StatusCreated)
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/tokens", map[string]any{"name": "soon", "expiresInDays": 1}, &soon), http.StatusCreated)
	if never.ExpiresAt != nil || soon.ExpiresAt == nil {
		t.Fatalf("expiries: never %v, in a day %v", never.ExpiresAt, soon.ExpiresAt)
	}
	apptest.RequireStatus(t, owner.WithToken(soon.Token).API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)
	if _, err := s.Pool().Exec(context.Background(), "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", soon.ID); err != nil {
		t.Fatal(err)
	}
	requireInvalidToken(t, "the expired token", owner.WithToken(soon.Token).API(http.MethodGet, "/api/me", nil, nil))
	apptest.RequireStatus(t, owner.WithToken(never.Token).API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)
	page := owner.Get("/settings/tokens")
	if n := strings.Count(page.Body, `data-testid="token-expired"`); n != 1 {
		t.Fatalf("the page marks %d tokens expired, want 1", n)
	}
	for _, tt := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"name": "x", "expiresInDays": 0}, "expiresInDays"},
		{map[string]any{"name": "x", "expiresInDays": 366}, "expiresInDays"},
		{map[string]any{"name": "  "}, "name"},
		{map[string]any{"name": strings.Repeat("n", 101)}, "name"},
		{map[string]any{"name": "a\x00b"}, "name"},
	} {
		r := owner.API(http.MethodPost, "/api/tokens", tt.in, nil)
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.Body, `"`+tt.want+`"`) {
			t.Errorf("POST /api/tokens %v: %d %s, want 422 naming %s", tt.in, r.Status, r.Body, tt.want)
		}
	}
}

// Every refusal of a bearer request: a malformed Bearer header is a 400; a token that is wrong,
// revoked, expired, cut short or one character off is the same 401, whatever the reason, and the
// failures are counted by reason, never by token.
func TestBearerRefusals(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	owner := s.NewClient(t)
	owner.SignUp("refusals@example.com")
	good := owner.MakeToken("good")
	typo := good[:12] + map[bool]string{true: "B", false: "A"}[good[12] == 'A'] + good[13:]

	var bodies []string
	for _, tok := range []string{typo, good[:30], "sm_" + strings.Repeat("A", 36), "ghp_abc", s.wellFormedToken(t, owner)} {
		bodies = append(bodies, requireInvalidToken(t, "the token "+tok, owner.WithToken(tok).API(http.MethodGet, "/api/me", nil, nil)))
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Fatalf("refusals differ: %s and %s", bodies[0], b)
		}
	}
	if strings.Contains(strings.Join(bodies, ""), good[3:]) {
		t.Fatal("a refusal shows the token")
	}
	for _, header := range []string{"Bearer", "Bearer ", "bearer a b", "Bearer  " + good, "Bearer " + good + "é", "Bearer " + good + ", Bearer " + good} {
		r := owner.Do(http.MethodGet, "/api/me", nil, map[string]string{"Authorization": header})
		if r.Status != http.StatusBadRequest || r.Header.Get("WWW-Authenticate") != `Bearer error="invalid_request"` || !strings.Contains(r.Body, "Authorization: Bearer") {
			t.Errorf("Authorization %q: %d %q %s, want 400 invalid_request", header, r.Status, r.Header.Get("WWW-Authenticate"), r.Body)
		}
	}
	// Another scheme is not Sandman's (a proxy's Basic authentication in front of it): the
	// request is a browser's, here with no session.
	for _, header := range []string{"Basic dXNlcjpwYXNz", "Token " + good} {
		r := s.NewClient(t).Do(http.MethodGet, "/api/me", nil, map[string]string{"Authorization": header})
		if r.Status != http.StatusUnauthorized || !strings.Contains(r.Body, `"unauthorized"`) {
			t.Errorf("Authorization %q: %d %s, want the 401 of a request with no session", header, r.Status, r.Body)
		}
	}
	if n := testkit.MetricValue(t, s.Registry(), "sandman_api_token_failures_total", map[string]string{"reason": "malformed"}); n != 4 {
		t.Errorf("%v malformed tokens counted, want 4", n)
	}
	if n := testkit.MetricValue(t, s.Registry(), "sandman_api_token_failures_total", map[string]string{"reason": "unknown"}); n != 1 {
		t.Errorf("%v unknown tokens counted, want 1", n)
	}
	apptest.RequireStatus(t, owner.WithToken(good).API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)
	if n := testkit.MetricValue(t, s.Registry(), "sandman_requests_by_auth_total", map[string]string{"auth": "token"}); n < 1 {
		t.Errorf("%v requests counted as the token's", n)
	}
}

// The routes that make and revoke tokens, and open and close sessions, refuse a token: a leaked
// token cannot mint more, nor revoke the founder's others.
func TestTokenRoutesRefuseATokenItself(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	owner := s.NewClient(t)
	owner.SignUp("mint@example.com")
	var made struct{ ID, Token string }
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/tokens", map[string]any{"name": "leaked"}, &made), http.StatusCreated)
	leaked := owner.WithToken(made.Token)
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/api/tokens", map[string]any{"name": "minted"}},
		{http.MethodGet, "/api/tokens", nil},
		{http.MethodDelete, "/api/tokens/" + made.ID, nil},
		{http.MethodDelete, "/api/session", nil},
		{http.MethodPost, "/api/session", map[string]string{"email": "mint@example.com", "password": apptest.Password}},
		{http.MethodPost, "/api/users", map[string]string{"email": "minted@example.com", "password": apptest.Password}},
	} {
		res := leaked.API(r.method, r.path, r.body, nil)
		if res.Status != http.StatusForbidden || !strings.Contains(res.Body, `"session_only"`) || res.Header.Get("Set-Cookie") != "" {
			t.Errorf("%s %s with a token: %d %s, want 403 session_only and no cookie", r.method, r.path, res.Status, res.Body)
		}
	}
	if l := listTokens(t, owner); len(l) != 1 || l[0].ID != made.ID {
		t.Fatalf("tokens after the leaked one's attempts: %+v", l)
	}
	if n := s.count(t, "SELECT count(*) FROM users"); n != 1 {
		t.Fatalf("%d founders: the token signed one up", n)
	}
}

// A founder has at most 20 tokens that work; revoking one makes room. Deleting the account takes
// its tokens with it.
func TestAtMostTwentyLiveTokensAndNoneAfterTheAccount(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	owner := s.NewClient(t)
	owner.SignUp("twenty@example.com")
	var first struct{ ID, Token string }
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/tokens", map[string]any{"name": "t0"}, &first), http.StatusCreated)
	for i := 1; i < accounts.MaxLiveTokens; i++ {
		owner.MakeToken("t" + strconv.Itoa(i))
	}
	r := owner.API(http.MethodPost, "/api/tokens", map[string]any{"name": "one too many"}, nil)
	if r.Status != http.StatusConflict || !strings.Contains(r.Body, `"too_many_tokens"`) {
		t.Fatalf("the 21st token: %d %s, want 409 too_many_tokens", r.Status, r.Body)
	}
	apptest.RequireStatus(t, owner.API(http.MethodDelete, "/api/tokens/"+first.ID, nil, nil), http.StatusNoContent)
	last := owner.MakeToken("in its place")
	apptest.RequireStatus(t, owner.WithToken(last).API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)

	if _, err := s.Pool().Exec(context.Background(), "DELETE FROM users WHERE email = 'twenty@example.com'"); err != nil {
		t.Fatal(err)
	}
	requireInvalidToken(t, "a token of a deleted account", owner.WithToken(last).API(http.MethodGet, "/api/me", nil, nil))
	if n := s.count(t, "SELECT count(*) FROM api_tokens"); n != 0 {
		t.Fatalf("%d tokens outlived their account", n)
	}
}

// Each token makes at most its limit of requests (then 429 with Retry-After, the others of the
// founder unaffected); an address that failed its limit of bearer attempts is refused whatever
// its token until they count no more, while a token failing its checksum is no attempt (it
// never reaches the database).
func TestTokenAndAddressLimitsAtTheirBounds(t *testing.T) {
	t.Parallel()
	const perToken, failures = 5, 3
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) {
		c.TokenLimit = accounts.Limit{N: perToken, Window: time.Minute}
		c.BearerFailureLimit = accounts.Limit{N: failures, Window: time.Minute}
	}})
	owner := s.NewClient(t)
	owner.SignUp("limits@example.com")
	busy, calm := owner.WithToken(owner.MakeToken("busy")), owner.WithToken(owner.MakeToken("calm"))
	for range perToken {
		apptest.RequireStatus(t, busy.API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)
	}
	r := busy.API(http.MethodGet, "/api/me", nil, nil)
	wait, _ := strconv.Atoi(r.Header.Get("Retry-After"))
	if r.Status != http.StatusTooManyRequests || wait < 1 || wait > 60 || !strings.Contains(r.Body, "Try again in") {
		t.Fatalf("request %d of the token: %d, Retry-After %q, %s; want 429 within a minute", perToken+1, r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	apptest.RequireStatus(t, calm.API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)

	// Failures, from an address of their own (the instance trusts no proxy: every client here
	// is 127.0.0.1, so this part runs after the tokens' own).
	stranger := owner.WithToken(s.wellFormedToken(t, owner))
	for range failures {
		requireInvalidToken(t, "a wrong token", stranger.API(http.MethodGet, "/api/me", nil, nil))
	}
	typo := owner.WithToken("sm_" + strings.Repeat("A", 36))
	requireInvalidToken(t, "a token failing its checksum, past the address's limit", typo.API(http.MethodGet, "/api/me", nil, nil))
	for what, c := range map[string]*apptest.Client{"a wrong token": stranger, "a good token": calm} {
		r := c.API(http.MethodGet, "/api/me", nil, nil)
		if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || !strings.Contains(r.Body, "from your network") {
			t.Fatalf("%s from the address over its limit: %d %q %s, want 429", what, r.Status, r.Header.Get("Retry-After"), r.Body)
		}
	}
	// The browser's session is not a bearer attempt: it still works.
	apptest.RequireStatus(t, owner.API(http.MethodGet, "/api/me", nil, nil), http.StatusOK)
}

// No token is ever written to the logs, at any level, whatever happens to it (made, used,
// refused for its limit, revoked, sent again); the request log names the token by its id.
func TestTokensNeverInTheLogs(t *testing.T) {
	t.Parallel()
	var logs testkit.SyncBuffer
	s := start(t, apptest.Options{Role: app.RoleWeb, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Config: func(c *app.Config) { c.TokenLimit = accounts.Limit{N: 2, Window: time.Minute} }})
	owner := s.NewClient(t)
	owner.SignUp("logs@example.com")
	var made struct{ ID, Token string }
	apptest.RequireStatus(t, owner.API(http.MethodPost, "/api/tokens", map[string]any{"name": "ci"}, &made), http.StatusCreated)
	owner.Get("/settings/tokens")
	backend := owner.WithToken(made.Token)
	apptest.RequireStatus(t, backend.API(http.MethodPost, "/api/projects", map[string]string{"name": "logged", "starter": "counter"}, nil), http.StatusCreated)
	backend.API(http.MethodGet, "/api/projects", nil, nil)
	apptest.RequireStatus(t, backend.API(http.MethodGet, "/api/projects", nil, nil), http.StatusTooManyRequests)
	apptest.RequireStatus(t, backend.API(http.MethodPost, "/api/tokens", map[string]string{"name": "x"}, nil), http.StatusForbidden)
	backend.Do(http.MethodGet, "/api/me", nil, map[string]string{"Authorization": "Bearer " + made.Token + " extra"})
	apptest.RequireStatus(t, owner.API(http.MethodDelete, "/api/tokens/"+made.ID, nil, nil), http.StatusNoContent)
	requireInvalidToken(t, "the revoked token", backend.API(http.MethodGet, "/api/me", nil, nil))
	s.Stop(t)

	out := logs.String()
	secret := made.Token[len(accounts.TokenPrefix):]
	if strings.Contains(out, secret) || strings.Contains(out, secret[:16]) || strings.Contains(out, secret[len(secret)-16:]) {
		t.Fatal("the logs hold the token")
	}
	var tokenLines int
	for _, line := range strings.Split(out, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "request" && rec["token"] == made.ID {
			tokenLines++
		}
	}
	if tokenLines != 4 {
		t.Fatalf("%d request lines name the token's id, want the four requests it was found for:\n%s", tokenLines, out)
	}
	testkit.Record(t, testkit.Scenario{ID: "tokens-not-logged", Times: 1,
		Injected: "an API token made, shown, used, over its limit, refused on a token route, sent in a malformed header, revoked and sent again; the instance logging at debug",
		Result:   "no log line holds the token or 16 characters of it; the request lines name it by its id"})
}

// Credits spent with a token are the founder's, and the history says so by the token's name.
func TestHistoryNamesTheTokenThatSpentACredit(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	owner := s.NewClient(t)
	owner.SignUp("history-token@example.com")
	backend := owner.WithToken(owner.MakeToken("ci"))
	var p struct{ ID string }
	apptest.RequireStatus(t, backend.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	apptest.RequireStatus(t, backend.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "b"}, nil), http.StatusAccepted)
	apptest.RequireStatus(t, backend.API(http.MethodPost, "/api/projects/"+p.ID+"/rebuild", map[string]string{"idempotencyKey": "r"}, nil), http.StatusAccepted)
	if got := owner.Credits(); got != 8 {
		t.Fatalf("the founder has %d credits, want 8", got)
	}
	page := owner.Get("/projects/" + p.ID)
	for _, want := range []string{`Build started through the API (token &#34;ci&#34;), 1 credit`, `Rebuilt through the API (token &#34;ci&#34;), 1 credit`} {
		apptest.RequireContains(t, page.Body, want)
	}
}

// Of many requests at once, exactly the limits pass: 30 tokens asked for at once make 20, and 12
// requests at once with a token limited to 5 get 5 answers and 7 refusals (the counts are held in
// the database, under its row locks).
func TestConcurrentTokensAndRequestsKeepTheirLimits(t *testing.T) {
	t.Parallel()
	const perToken = 5
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) {
		c.TokenLimit = accounts.Limit{N: perToken, Window: time.Minute}
	}})
	owner := s.NewClient(t)
	owner.SignUp("concurrent-tokens@example.com")
	statuses := func(n int, do func(i int) int) map[int]int {
		var mu sync.Mutex
		var wg sync.WaitGroup
		got := map[int]int{}
		for i := range n {
			wg.Go(func() {
				st := do(i)
				mu.Lock()
				got[st]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return got
	}
	made := statuses(30, func(i int) int {
		return owner.API(http.MethodPost, "/api/tokens", map[string]any{"name": "t" + strconv.Itoa(i)}, nil).Status
	})
	if made[http.StatusCreated] != accounts.MaxLiveTokens || made[http.StatusConflict] != 30-accounts.MaxLiveTokens {
		t.Fatalf("30 tokens asked for at once: %v, want %d made and the rest 409", made, accounts.MaxLiveTokens)
	}
	if _, err := s.Pool().Exec(context.Background(), "DELETE FROM api_tokens"); err != nil {
		t.Fatal(err)
	}
	backend := owner.WithToken(owner.MakeToken("burst"))
	got := statuses(12, func(int) int { return backend.API(http.MethodGet, "/api/me", nil, nil).Status })
	if got[http.StatusOK] != perToken || got[http.StatusTooManyRequests] != 12-perToken {
		t.Fatalf("12 requests at once with a token limited to %d: %v", perToken, got)
	}
}
