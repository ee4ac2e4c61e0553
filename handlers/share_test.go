package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/db"
	"sandman/internal/testkit"
	"sandman/shares"
)

// Share links over HTTP: the link's life, what its token reaches, what a visitor sees in each
// state, and the visitors' limits. The browser's side is in share_browser_test.go.

// shareToken turns the project's share link on through the JSON API and returns its token.
func shareToken(t testing.TB, c *apptest.Client, projectID string) string {
	t.Helper()
	var out struct{ URL string }
	r := c.API(http.MethodPost, "/api/projects/"+projectID+"/share", nil, &out)
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("share %s: %d %s", projectID, r.Status, r.Body)
	}
	_, token, ok := strings.Cut(out.URL, "/s/")
	if !ok || len(token) != shares.TokenLength {
		t.Fatalf("share %s: the link %q has no token", projectID, out.URL)
	}
	return token
}

// forcedState is the fixture state of everyone_test.go named name.
func forcedState(t testing.TB, name string) forced {
	t.Helper()
	for _, f := range forcedStates {
		if f.name == name {
			return f
		}
	}
	t.Fatalf("no forced state %q", name)
	return forced{}
}

// project creates a project of the counter starter named name, in the forced state, and
// returns its id and its sandbox's ("" when it is not built).
func (s *stack) project(t *testing.T, c *apptest.Client, name, state string) (projectID, sandboxID string) {
	t.Helper()
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": name, "starter": "counter"}, &p), http.StatusCreated)
	s.forceState(t, c, p.ID, forcedState(t, state))
	if state != "not-built" {
		if err := s.Pool().QueryRow(context.Background(), "SELECT id::text FROM sandboxes WHERE project_id = $1", p.ID).Scan(&sandboxID); err != nil {
			t.Fatal(err)
		}
	}
	return p.ID, sandboxID
}

// visitorState is the state the visitor's page shows (its data-state).
var visitorStateRe = regexp.MustCompile(`data-testid="share-state" data-state="([a-z]+)"`)

func visitorState(t testing.TB, body string) string {
	t.Helper()
	m := visitorStateRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no visitor's state in the page:\n%.1500s", body)
	}
	return m[1]
}

var shareURLRe = regexp.MustCompile(`value="([^"]+)" data-testid="share-url"`)

// shareURLOn reads the link the build page's share section shows ("" when none).
func shareURLOn(page string) string {
	if m := shareURLRe.FindStringSubmatch(page); m != nil {
		return m[1]
	}
	return ""
}

// requireVisitorHeaders fails unless a visitor's answer asks not to be indexed or kept, sets no
// cookie and carries the security headers.
func requireVisitorHeaders(t *testing.T, what string, r apptest.Response) {
	t.Helper()
	if r.Header.Get("X-Robots-Tag") != "noindex, nofollow" || r.Header.Get("Cache-Control") != "no-store" || r.Header.Get("Set-Cookie") != "" {
		t.Errorf("%s: X-Robots-Tag %q, Cache-Control %q, Set-Cookie %q", what, r.Header.Get("X-Robots-Tag"), r.Header.Get("Cache-Control"), r.Header.Get("Set-Cookie"))
	}
	securityHeaders(t, what, r.Header)
}

// A share link's life: Share (a form without JavaScript) shows the link with Copy link, the
// JSON API returns the same one, the card says Shared; a visitor with no account sees the
// project's name and its preview; New link replaces it (the old one 404s at once); Turn off ends
// it; sharing again makes a new one. Another founder can do none of it.
func TestShareLinkLifecycle(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("share-life@example.com")
	projectID, _ := s.project(t, c, "Pitch deck", "running")
	var sb struct{ PreviewURL string }
	if err := s.Pool().QueryRow(context.Background(), "SELECT preview_url FROM sandboxes WHERE project_id = $1", projectID).Scan(&sb.PreviewURL); err != nil {
		t.Fatal(err)
	}

	page := c.Get("/projects/" + projectID)
	apptest.RequireContains(t, page.Body, `data-testid="share"`)
	if shareURLOn(page.Body) != "" || strings.Contains(c.Get("/").Body, `data-testid="shared"`) {
		t.Fatal("a project never shared shows a link")
	}
	// Share, as a form without JavaScript: back to the build page, which shows the link.
	r := c.PostForm("/projects/"+projectID+"/share", url.Values{})
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != "/projects/"+projectID {
		t.Fatalf("Share without JavaScript: %d to %q", r.Status, r.Header.Get("Location"))
	}
	page = c.Get("/projects/" + projectID)
	link := shareURLOn(page.Body)
	if !strings.HasPrefix(link, s.URL()+"/s/") || len(strings.TrimPrefix(link, s.URL()+"/s/")) != shares.TokenLength {
		t.Fatalf("the build page shows the link %q", link)
	}
	apptest.RequireContains(t, page.Body, `data-copy="`+link+`" data-testid="copy-link"`)
	// The JSON API returns the current link: the same one.
	var again struct{ URL string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+projectID+"/share", nil, &again), http.StatusOK)
	if again.URL != link {
		t.Fatalf("the API returned %q, the page shows %q", again.URL, link)
	}
	apptest.RequireContains(t, c.Get("/").Body, `data-testid="shared"`)

	// A visitor: no account, no cookie; the project's name and its preview, nothing of the founder.
	path := strings.TrimPrefix(link, s.URL())
	v := s.NewClient(t)
	r = v.Get(path)
	apptest.RequireStatus(t, r, http.StatusOK)
	requireVisitorHeaders(t, "the link's page", r)
	if visitorState(t, r.Body) != "live" {
		t.Fatalf("a running preview's link shows %s", visitorState(t, r.Body))
	}
	apptest.RequireContains(t, r.Body, `<title>Pitch deck · preview</title>`)
	apptest.RequireContains(t, r.Body, `data-testid="share-title">Pitch deck · preview</h1>`)
	apptest.RequireContains(t, r.Body, `src="`+sb.PreviewURL+`" title="Preview of Pitch deck" referrerpolicy="no-referrer"`)
	for _, secret := range []string{"share-life@example.com", projectID, "csrf", "/projects/", "Log out"} {
		if strings.Contains(r.Body, secret) {
			t.Fatalf("the visitor's page shows %q", secret)
		}
	}

	// New link, through htmx: the section shows another link; the old one stops working at once.
	r = c.HTMX(http.MethodPost, "/projects/"+projectID+"/share/new", nil)
	apptest.RequireStatus(t, r, http.StatusOK)
	renewed := shareURLOn(r.Body)
	if renewed == "" || renewed == link {
		t.Fatalf("New link shows %q (was %q)", renewed, link)
	}
	r = v.Get(path)
	apptest.RequireStatus(t, r, http.StatusNotFound)
	apptest.RequireContains(t, r.Body, "This link doesn&#39;t work anymore.")
	requireVisitorHeaders(t, "a replaced link", r)
	apptest.RequireStatus(t, v.Get(strings.TrimPrefix(renewed, s.URL())), http.StatusOK)

	// Turn off (JSON API): 204, twice; the link 404s; the card and the build page say so.
	apptest.RequireStatus(t, c.API(http.MethodDelete, "/api/projects/"+projectID+"/share", nil, nil), http.StatusNoContent)
	apptest.RequireStatus(t, c.API(http.MethodDelete, "/api/projects/"+projectID+"/share", nil, nil), http.StatusNoContent)
	apptest.RequireStatus(t, v.Get(strings.TrimPrefix(renewed, s.URL())), http.StatusNotFound)
	page = c.Get("/projects/" + projectID)
	if shareURLOn(page.Body) != "" || !strings.Contains(page.Body, `data-testid="share"`) || strings.Contains(c.Get("/").Body, `data-testid="shared"`) {
		t.Fatal("a link turned off still shows")
	}
	// Shared again: a new link (201), neither of the old ones.
	var third struct{ URL string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+projectID+"/share", nil, &third), http.StatusCreated)
	if third.URL == link || third.URL == renewed {
		t.Fatal("sharing again brought an old link back")
	}

	// Another founder can neither see nor change it.
	other := s.NewClient(t)
	other.SignUp("share-other@example.com")
	other.Get("/")
	apptest.RequireStatus(t, other.API(http.MethodPost, "/api/projects/"+projectID+"/share", nil, nil), http.StatusNotFound)
	apptest.RequireStatus(t, other.API(http.MethodDelete, "/api/projects/"+projectID+"/share", nil, nil), http.StatusNotFound)
	for _, act := range []string{"", "/new", "/off"} {
		apptest.RequireStatus(t, other.PostForm("/projects/"+projectID+"/share"+act, url.Values{}), http.StatusNotFound)
	}
	apptest.RequireStatus(t, v.Get(strings.TrimPrefix(third.URL, s.URL())), http.StatusOK)
}

// A link's token is made with SANDMAN_SHARE_KEY, so the build page can show it again, but only
// with the key that made it. Without a key founders cannot share; with another key the old link
// still opens for whoever has it, the build page says it can't show it, and New link makes one
// it can.
func TestShareKeyIsNeededToShowALink(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("share-key@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": "Keyed", "starter": "counter"}, &p), http.StatusCreated)
	token := shareToken(t, c, p.ID)
	var unshared struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": "Unshared", "starter": "counter"}, &unshared), http.StatusCreated)

	sameDeployment := func(key string) *stack {
		return start(t, apptest.Options{Role: app.RoleWeb, Host: s.Host, DatabaseURL: s.DatabaseURL, Config: func(c *app.Config) { c.ShareKey = key }})
	}
	// No key: the link opens; nothing can be shared.
	noKey := sameDeployment("")
	apptest.RequireStatus(t, noKey.NewClient(t).Get("/s/"+token), http.StatusOK)
	cn := c.On(noKey.Instance)
	apptest.RequireContains(t, cn.Get("/projects/"+p.ID).Body, `data-testid="share-unshowable"`)
	page := cn.Get("/projects/" + unshared.ID)
	apptest.RequireContains(t, page.Body, `data-testid="sharing-off"`)
	if strings.Contains(page.Body, `data-testid="share"`) {
		t.Fatal("a Sandman without a share key offers Share")
	}
	r := cn.API(http.MethodPost, "/api/projects/"+unshared.ID+"/share", nil, nil)
	apptest.RequireStatus(t, r, http.StatusServiceUnavailable)
	apptest.RequireContains(t, r.Body, `"code":"sharing_off"`)

	// Another key: the link opens, can't be shown, and is replaced by one that can.
	rotated := sameDeployment("another-share-key-" + strings.Repeat("z", 32))
	cr := c.On(rotated.Instance)
	apptest.RequireStatus(t, rotated.NewClient(t).Get("/s/"+token), http.StatusOK)
	page = cr.Get("/projects/" + p.ID)
	apptest.RequireContains(t, page.Body, "Make a new link to copy one.")
	if shareURLOn(page.Body) != "" {
		t.Fatal("a link made with another key is shown")
	}
	r = cr.API(http.MethodPost, "/api/projects/"+p.ID+"/share", nil, nil)
	apptest.RequireStatus(t, r, http.StatusConflict)
	apptest.RequireContains(t, r.Body, `"code":"link_unshowable"`)
	r = cr.HTMX(http.MethodPost, "/projects/"+p.ID+"/share/new", nil)
	apptest.RequireStatus(t, r, http.StatusOK)
	link := shareURLOn(r.Body)
	if !strings.HasPrefix(link, rotated.URL()+"/s/") {
		t.Fatalf("New link shows %q", link)
	}
	for _, inst := range []*stack{s, noKey, rotated} {
		apptest.RequireStatus(t, inst.NewClient(t).Get("/s/"+token), http.StatusNotFound)
		apptest.RequireStatus(t, inst.NewClient(t).Get(strings.TrimPrefix(link, rotated.URL())), http.StatusOK)
	}
}

// A link's token reaches its own project's preview and nothing else: its stream carries that
// preview's page only (never another project's, the founder's or another founder's), its wake
// resumes that preview only, its activity moves that preview's deadline only.
func TestShareLinkReachesOnlyItsPreview(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	a, b := s.NewClient(t), s.NewClient(t)
	a.SignUp("share-scope-a@example.com")
	b.SignUp("share-scope-b@example.com")
	alpha, alphaSandbox := s.project(t, a, "Alpha", "sleeping-memory")
	beta, betaSandbox := s.project(t, a, "Beta", "sleeping-memory")
	delta, deltaSandbox := s.project(t, a, "Delta", "sleeping-memory")
	gamma, gammaSandbox := s.project(t, b, "Gamma", "sleeping-memory")
	tokA, tokB, tokG := shareToken(t, a, alpha), shareToken(t, a, beta), shareToken(t, b, gamma)
	lastActive := func(sandbox string) time.Time {
		var at time.Time
		if err := s.Pool().QueryRow(context.Background(), "SELECT last_active_at FROM sandboxes WHERE id = $1", sandbox).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	deltaActive := lastActive(deltaSandbox)

	v := s.NewClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := testkit.OpenSSE(t, ctx, v.HTTP(), v.URL("/s/"+tokA+"/events"))
	var seen []testkit.SSEEvent
	next := func(what, want string) {
		t.Helper()
		seen = append(seen, testkit.NextSSE(t, events, 30*time.Second, what, func(ev testkit.SSEEvent) bool {
			seen = append(seen, ev)
			return strings.Contains(ev.Data, want)
		}))
	}
	next("the stream's first state", `data-state="sleeping"`)
	// The founder's other projects change, by the founder and by their own links, and another
	// founder's project too; then Alpha, by its link.
	apptest.RequireStatus(t, a.API(http.MethodPost, "/api/sandboxes/"+betaSandbox+"/resume", nil, nil), http.StatusAccepted)
	apptest.RequireStatus(t, v.Do(http.MethodPost, "/s/"+tokB, nil, nil), http.StatusSeeOther)
	apptest.RequireStatus(t, v.Do(http.MethodPost, "/s/"+tokG, nil, nil), http.StatusSeeOther)
	apptest.RequireStatus(t, v.Do(http.MethodPost, "/s/"+tokB+"/activity", nil, nil), http.StatusNoContent)
	r := v.Do(http.MethodPost, "/s/"+tokA, nil, map[string]string{"HX-Request": "true"})
	apptest.RequireStatus(t, r, http.StatusOK)
	if visitorState(t, r.Body) != "waking" {
		t.Fatalf("the wake answered %s", visitorState(t, r.Body))
	}
	next("Alpha waking", `data-state="waking"`)
	cancel()

	for _, ev := range seen {
		if ev.Event != "share-state" || !strings.Contains(ev.Data, "Alpha") {
			t.Errorf("Alpha's stream carried %q: %.300s", ev.Event, ev.Data)
		}
		for _, other := range []string{"Beta", "Gamma", "Delta", beta, gamma, delta, betaSandbox, gammaSandbox, alpha, alphaSandbox,
			"share-scope-a@example.com", "share-scope-b@example.com", "csrf", "card-", "pane-"} {
			if strings.Contains(ev.Data, other) {
				t.Errorf("Alpha's stream carried %q: %.300s", other, ev.Data)
			}
		}
	}
	// Each link woke its own preview only; Delta, never shared, was not touched.
	for sandbox, want := range map[string]string{alphaSandbox: "resuming", betaSandbox: "resuming", gammaSandbox: "resuming", deltaSandbox: "paused"} {
		var status string
		var jobs int
		if err := s.Pool().QueryRow(context.Background(), `SELECT status::text, (SELECT count(*) FROM river_job WHERE kind = 'resume' AND args->>'sandbox_id' = $1::text)
			FROM sandboxes WHERE id = $1::uuid`, sandbox).Scan(&status, &jobs); err != nil {
			t.Fatal(err)
		}
		wantJobs := 1
		if want == "paused" {
			wantJobs = 0
		}
		if status != want || jobs != wantJobs {
			t.Errorf("sandbox %s: %s with %d resume jobs, want %s with %d", sandbox, status, jobs, want, wantJobs)
		}
	}
	if !lastActive(deltaSandbox).Equal(deltaActive) {
		t.Error("another link's activity moved Delta's deadline")
	}
	testkit.Record(t, testkit.Scenario{ID: "share-link-scope", Times: 5,
		Injected: "a visitor's stream of one link open while the founder's other projects, woken by their own links and by the founder, and another founder's shared project change; then that link's wake",
		Result:   "the stream carried only its project's page (no other project's name, id or URL, nothing of the founder); each wake resumed its own preview only; a project never shared was untouched"})
}

// What a visitor sees in each state, and what the founder learns: a running preview is the
// page; a sleeping one (or one whose one resume failed) is woken; a resume or a build under way
// is waited for; a gone one says so and tells the founder once ("A visitor found it gone"),
// leaving the card's why as it was; the provider's trouble offers Try again, which asks the
// provider again with a resume. No visitor's request calls the provider itself.
func TestShareLinkPagesOfEveryState(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.StartCredits = 20 }})
	c := s.NewClient(t)
	c.SignUp("share-states@example.com")
	tests := []struct {
		state, extraFailure string // the forced state; a second failed resume before it
		want                string // the visitor's state
		texts               []string
		wakes               bool // a wake resumes it
	}{
		{state: "running", want: "live", texts: []string{"· preview"}},
		{state: "sleeping-memory", want: "sleeping", texts: []string{"Waking up P-sleeping-memory…", "Wake preview", "It sleeps while nobody looks at it"}, wakes: true},
		{state: "sleeping-files", want: "sleeping", texts: []string{"the app is starting again. This may take a little longer."}, wakes: true},
		{state: "resuming", want: "waking", texts: []string{"Waking up P-resuming…"}},
		{state: "starting", want: "starting", texts: []string{"Getting P-starting ready…"}},
		{state: "gone-killed", want: "gone", texts: []string{"This preview isn&#39;t available right now.", "Ask the person who shared it to rebuild it."}},
		{state: "gone-expired", want: "gone"},
		{state: "gone-stopped", want: "gone"},
		{state: "build-failed", want: "gone"},
		{state: "resume-failed", want: "gone"}, // the provider no longer has it
		{state: "files-lost", want: "gone"},    // its files are lost for good: a wake would fail again
		{state: "not-built", want: "gone"},
		{state: "unknown", want: "trouble", texts: []string{"We can&#39;t reach this preview right now.", `data-testid="try-again"`}, wakes: true},
	}
	providerCalls := testkit.MetricValue(t, s.Registry(), "sandman_e2b_calls_total", nil)
	v := s.NewClient(t)
	for _, tt := range tests {
		projectID, sandboxID := s.project(t, c, "P-"+tt.state, tt.state)
		path := "/s/" + shareToken(t, c, projectID)
		r := v.Get(path)
		apptest.RequireStatus(t, r, http.StatusOK)
		requireVisitorHeaders(t, tt.state, r)
		if got := visitorState(t, r.Body); got != tt.want {
			t.Errorf("%s: the visitor sees %s, want %s", tt.state, got, tt.want)
		}
		for _, text := range tt.texts {
			if !strings.Contains(r.Body, text) {
				t.Errorf("%s: the page lacks %q", tt.state, text)
			}
		}
		if strings.Contains(r.Body, `data-testid="wake"`) != (tt.want == "sleeping") {
			t.Errorf("%s: the Wake preview button shows: %v", tt.state, !(tt.want == "sleeping"))
		}
		// A waiting page reloads itself without JavaScript; the others do not.
		if refresh := strings.Contains(r.Body, `http-equiv="refresh"`); refresh != (tt.want == "waking" || tt.want == "starting") {
			t.Errorf("%s: refreshes itself without JavaScript: %v", tt.state, refresh)
		}
		// The wake: a resume for what sleeps or could not be reached, nothing for the rest.
		r = v.Do(http.MethodPost, path, nil, map[string]string{"HX-Request": "true"})
		apptest.RequireStatus(t, r, http.StatusOK)
		jobs := s.count(t, "SELECT count(*) FROM river_job WHERE kind = 'resume' AND args->>'sandbox_id' = $1 AND (args->>'visitor')::boolean", sandboxID)
		if tt.wakes != (jobs == 1) || jobs > 1 {
			t.Errorf("%s: the wake queued %d visitor's resumes", tt.state, jobs)
		}
		if tt.wakes && visitorState(t, r.Body) != "waking" {
			t.Errorf("%s: the wake answered %s", tt.state, visitorState(t, r.Body))
		}
		if tt.want == "gone" && sandboxID != "" {
			// Seen twice, told once; the card still says why it is gone.
			v.Get(path)
			if n := s.count(t, "SELECT count(*) FROM sandbox_events WHERE sandbox_id = $1 AND source = 'visitor'", sandboxID); n != 1 {
				t.Errorf("%s: %d visitor's notes, want 1", tt.state, n)
			}
			page := c.Get("/projects/" + projectID)
			apptest.RequireContains(t, page.Body, `data-testid="history-text">A visitor found it gone</span>`)
			if strings.Contains(page.Body, `data-testid="why-text">A visitor found it gone`) {
				t.Errorf("%s: the note took the place of why the preview is gone", tt.state)
			}
		}
	}

	// One failed resume: sleeping, woken once more; two in a row: the provider's trouble.
	for _, failures := range []int{1, 2} {
		projectID, sandboxID := s.project(t, c, fmt.Sprintf("Failed %d", failures), "sleeping-memory")
		ctx := context.Background()
		for range failures {
			for _, q := range []string{
				`INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) VALUES ($1, 'paused', 'resuming', 'visitor', 'visitor_wake')`,
				`INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) VALUES ($1, 'resuming', 'resume_failed', 'visitor', 'resume_unreachable')`,
			} {
				if _, err := s.Pool().Exec(ctx, q, sandboxID); err != nil {
					t.Fatal(err)
				}
			}
		}
		if _, err := s.Pool().Exec(ctx, `UPDATE sandboxes SET status = 'resume_failed', failure_cause = $2 WHERE id = $1`, sandboxID,
			"unreachable"); err != nil {
			t.Fatal(err)
		}
		want := map[int]string{1: "sleeping", 2: "trouble"}[failures]
		path := "/s/" + shareToken(t, c, projectID)
		if got := visitorState(t, v.Get(path).Body); got != want {
			t.Errorf("after %d failed resumes the visitor sees %s, want %s", failures, got, want)
		}
		apptest.RequireStatus(t, v.Do(http.MethodPost, path, nil, nil), http.StatusSeeOther)
		if got := visitorState(t, v.Get(path).Body); got != "waking" {
			t.Errorf("after %d failed resumes a wake shows %s", failures, got)
		}
	}
	if n := testkit.MetricValue(t, s.Registry(), "sandman_share_views_total", map[string]string{"state": "gone"}); n < 6 {
		t.Errorf("%v views of gone previews counted", n)
	}
	// Every visitor's answer came from the database: the provider was never asked (a wake queues
	// its resume job, which no worker runs here).
	if n := testkit.MetricValue(t, s.Registry(), "sandman_e2b_calls_total", nil); n != providerCalls {
		t.Errorf("visitors' requests called the provider %v times", n-providerCalls)
	}
}

// The visitors' limits, as bursts: of many wakes at once from one address, exactly the
// address's limit pass (one resume for all of them) and the rest are 429 with Retry-After and a
// page a person can read (the sentence in the flash for htmx); other addresses go on until the
// link had its fill; activity reports likewise. Another link is not held back by any of it.
func TestShareLinkRateLimits(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.TrustProxy = true }})
	c := s.NewClient(t)
	c.SignUp("share-limits@example.com")
	projectID, sandboxID := s.project(t, c, "Limited", "sleeping-memory")
	otherID, otherSandbox := s.project(t, c, "Unlimited", "sleeping-memory")
	path, otherPath := "/s/"+shareToken(t, c, projectID), "/s/"+shareToken(t, c, otherID)
	v := s.NewClient(t)
	from := func(ip string, htmx bool) map[string]string {
		h := map[string]string{"X-Forwarded-For": ip}
		if htmx {
			h["HX-Request"] = "true"
		}
		return h
	}
	burst := func(n int, route string, ip func(i int) string) (passed int, refused []apptest.Response) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := v.Do(http.MethodPost, route, nil, from(ip(i), false))
				mu.Lock()
				defer mu.Unlock()
				switch r.Status {
				case http.StatusSeeOther, http.StatusNoContent:
					passed++
				case http.StatusTooManyRequests:
					refused = append(refused, r)
				default:
					t.Errorf("%s: %d %.300s", route, r.Status, r.Body)
				}
			})
		}
		wg.Wait()
		return passed, refused
	}
	readable := func(what string, r apptest.Response) {
		t.Helper()
		secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || secs < 1 || secs > 60 {
			t.Errorf("%s: Retry-After %q", what, r.Header.Get("Retry-After"))
		}
		for _, want := range []string{"Too many requests", "Try again in", `href="` + path + `"`} {
			if !strings.Contains(r.Body, want) {
				t.Errorf("%s: the page lacks %q:\n%.800s", what, want, r.Body)
			}
		}
		requireVisitorHeaders(t, what, r)
	}
	wake, activity := shares.Limits[shares.Wake], shares.Limits[shares.Activity]

	// One address, twice its limit at once.
	n := 2 * wake.PerAddress
	passed, refused := burst(n, path, func(int) string { return "198.51.100.7" })
	if passed != wake.PerAddress || len(refused) != n-wake.PerAddress {
		t.Fatalf("%d wakes at once from one address: %d passed, %d refused; want %d passed", n, passed, len(refused), wake.PerAddress)
	}
	readable("a wake over the address's limit", refused[0])
	apptest.RequireContains(t, refused[0].Body, "from your network")
	r := v.Do(http.MethodPost, path, nil, from("198.51.100.7", true))
	apptest.RequireStatus(t, r, http.StatusTooManyRequests)
	if r.Header.Get("HX-Retarget") != "#flash" || !strings.Contains(r.Body, "Try again in") {
		t.Fatalf("htmx over the limit: %q %.300s", r.Header.Get("HX-Retarget"), r.Body)
	}
	// Other addresses, until the link had its fill.
	left := wake.PerLink - wake.PerAddress
	passed, refused = burst(left+10, path, func(i int) string { return fmt.Sprintf("203.0.113.%d", i+1) })
	if passed != left || len(refused) != 10 {
		t.Fatalf("%d wakes from %d addresses: %d passed, %d refused; want %d passed", left+10, left+10, passed, len(refused), left)
	}
	readable("a wake over the link's limit", refused[0])
	apptest.RequireContains(t, refused[0].Body, "by its visitors")
	// Activity reports from one address.
	n = activity.PerAddress + 5
	passed, refused = burst(n, path+"/activity", func(int) string { return "198.51.100.9" })
	if passed != activity.PerAddress || len(refused) != 5 {
		t.Fatalf("%d activity reports at once from one address: %d passed; want %d", n, passed, activity.PerAddress)
	}
	// An address over its limit is over it for every link; the link over its limit holds back
	// no other link.
	apptest.RequireStatus(t, v.Do(http.MethodPost, otherPath, nil, from("198.51.100.7", false)), http.StatusTooManyRequests)
	apptest.RequireStatus(t, v.Do(http.MethodPost, otherPath, nil, from("203.0.113.1", false)), http.StatusSeeOther)

	resumes := s.count(t, "SELECT count(*) FROM river_job WHERE kind = 'resume' AND args->>'sandbox_id' = $1", sandboxID)
	if resumes != 1 || s.count(t, "SELECT count(*) FROM river_job WHERE kind = 'resume' AND args->>'sandbox_id' = $1", otherSandbox) != 1 {
		t.Fatalf("%d resumes of the woken preview, want 1", resumes)
	}
	if got := testkit.MetricValue(t, s.Registry(), "sandman_rate_limited_total", map[string]string{"route": "/s/:token"}); got != float64(wake.PerAddress+1+10+1) {
		t.Errorf("sandman_rate_limited_total counted %v refused wakes, want %d", got, wake.PerAddress+12)
	}
	if got := testkit.MetricValue(t, s.Registry(), "sandman_share_wakes_total", nil); got != 2 {
		t.Errorf("sandman_share_wakes_total is %v, want 2", got)
	}
	testkit.Record(t, testkit.Scenario{ID: "share-wake-burst", Times: 2 * wake.PerAddress,
		Injected: fmt.Sprintf("%d wakes of one share link at once from one client address (limit: %d a minute per address)", 2*wake.PerAddress, wake.PerAddress),
		Result:   fmt.Sprintf("exactly %d passed, one resume for all of them; the rest 429 with Retry-After and a page saying when to try again; other addresses unaffected", wake.PerAddress)})
	testkit.Record(t, testkit.Scenario{ID: "share-wake-many-addresses", Times: left + 10,
		Injected: fmt.Sprintf("%d wakes of one share link at once from as many addresses, after %d from one (limit: %d a minute per link)", left+10, wake.PerAddress, wake.PerLink),
		Result:   fmt.Sprintf("exactly %d passed; 10 × 429 with Retry-After; still one resume; another link's wake from a new address passes", left)})
	testkit.Record(t, testkit.Scenario{ID: "share-activity-burst", Times: n,
		Injected: fmt.Sprintf("%d activity reports of one share link at once from one address (limit: %d a minute per address)", n, activity.PerAddress),
		Result:   fmt.Sprintf("exactly %d passed (204); 5 × 429 with Retry-After", activity.PerAddress)})
}

// Guessing tokens finds nothing: malformed, unknown and replaced tokens are the same 404, on
// every visitor's route, and change nothing.
func TestShareLinkGuessingFindsNothing(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("share-guess@example.com")
	projectID, _ := s.project(t, c, "Guarded", "sleeping-memory")
	token := shareToken(t, c, projectID)
	before := s.fingerprint(t)
	v := s.NewClient(t)
	changed := token[:len(token)-1] + "A"
	if token[len(token)-1] == 'A' {
		changed = token[:len(token)-1] + "B"
	}
	guesses := []string{strings.Repeat("A", shares.TokenLength), changed, token[:shares.TokenLength-1], token + "A",
		strings.ToUpper(token), "../../projects", "%00", strings.Repeat("x", 4000)}
	times := 0
	for _, g := range guesses {
		for _, route := range []struct{ method, suffix string }{{http.MethodGet, ""}, {http.MethodPost, ""}, {http.MethodPost, "/activity"}, {http.MethodGet, "/events"}} {
			r := v.Do(route.method, "/s/"+url.PathEscape(g)+route.suffix, nil, nil)
			times++
			if r.Status != http.StatusNotFound {
				t.Errorf("%s /s/%.40s%s: %d, want 404", route.method, g, route.suffix, r.Status)
			}
		}
	}
	if after := s.fingerprint(t); after != before {
		t.Fatalf("guessed tokens changed the database:\n before %s\n after  %s", before, after)
	}
	if s.count(t, "SELECT count(*) FROM share_hits") != 0 {
		t.Fatal("guessed tokens were counted as a link's visitors")
	}
	testkit.Record(t, testkit.Scenario{ID: "share-token-guessing", Times: times,
		Injected: "share links' routes with guessed tokens: all one letter, the real token with its last letter changed, cut short, lengthened, upper-cased, path tricks, 4,000 characters",
		Result:   "404 \"This link doesn't work anymore.\" on every route; nothing changed"})
}

// events lists a sandbox's recorded moves and notes, oldest first, as "from→to source reason".
func (s *stack) events(t testing.TB, sandboxID string) []string {
	t.Helper()
	evs, err := db.New(s.Pool()).ListSandboxEvents(context.Background(), uuid.MustParse(sandboxID))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%s→%s %s %s", e.FromStatus, e.ToStatus, e.Source, e.Reason)
	}
	return out
}

// Nothing but a visitor's browser wakes a preview: curl, link unfurlers and crawlers fetching
// the link (and its stream) leave it asleep. Ten visitors waking it at once cause one resume,
// recorded as the visitor's, with no credit spent; the founder's history says who woke it.
func TestConcurrentVisitorsWakeOnce(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("share-ten@example.com")
	projectID, sandboxID := c.BuildCounter()
	path := "/s/" + shareToken(t, c, projectID)
	c.Pause(sandboxID)
	credits := c.Credits()
	before := len(s.events(t, sandboxID))

	for _, agent := range []string{"curl/8.5.0", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
		"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "facebookexternalhit/1.1", "Twitterbot/1.0",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_0) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Safari/605.1.15"} {
		r := s.NewClient(t).Do(http.MethodGet, path, nil, map[string]string{"User-Agent": agent})
		apptest.RequireStatus(t, r, http.StatusOK)
		if visitorState(t, r.Body) != "sleeping" {
			t.Fatalf("%s was shown %s", agent, visitorState(t, r.Body))
		}
	}
	if r := peek(t, s.NewClient(t), http.MethodGet, path+"/events", nil); r.Status != http.StatusOK {
		t.Fatalf("the link's stream: %d", r.Status)
	}
	// Had any of them woken it, the resume would be recorded before its answer came.
	if evs := s.events(t, sandboxID); len(evs) != before || s.count(t, "SELECT count(*) FROM river_job WHERE kind = 'resume'") != 0 {
		t.Fatalf("fetching the link woke the preview: %q", evs[before:])
	}
	c.WaitSandbox(sandboxID, "paused", time.Second)

	const visitors = 10
	var wg sync.WaitGroup
	for range visitors {
		v := s.NewClient(t)
		wg.Go(func() {
			r := v.Do(http.MethodPost, path, nil, map[string]string{"HX-Request": "true"})
			if r.Status != http.StatusOK {
				t.Errorf("a visitor's wake: %d %.300s", r.Status, r.Body)
			} else if state := visitorState(t, r.Body); state != "waking" && state != "live" {
				t.Errorf("a visitor's wake answered %s", state)
			}
		})
	}
	wg.Wait()
	sb := c.WaitSandbox(sandboxID, "running", 60*time.Second)
	var resumes []string
	for _, e := range s.events(t, sandboxID)[before:] {
		if strings.HasPrefix(e, "paused→resuming") || strings.Contains(e, "→running") {
			resumes = append(resumes, e)
		}
	}
	if len(resumes) != 2 || resumes[0] != "paused→resuming visitor visitor_wake" || resumes[1] != "resuming→running visitor resumed" {
		t.Fatalf("%d visitors at once: %q, want one wake-up and one resume, the visitor's", visitors, resumes)
	}
	if n := s.count(t, "SELECT count(*) FROM river_job WHERE kind = 'resume' AND (args->>'visitor')::boolean"); n != 1 {
		t.Fatalf("%d visitors' resume jobs", n)
	}
	if got := c.Credits(); got != credits {
		t.Fatalf("waking cost credits: %d, then %d", credits, got)
	}
	page := c.Get("/projects/" + projectID)
	apptest.RequireContains(t, page.Body, `data-testid="history-text">Woken by a visitor of your share link</span>`)
	r := s.NewClient(t).Get(path)
	if visitorState(t, r.Body) != "live" || !strings.Contains(r.Body, `src="`+sb.PreviewURL+`"`) {
		t.Fatalf("after the wake the link shows %s", visitorState(t, r.Body))
	}
	audit := apptest.AuditDB(t, s.Pool())
	testkit.Record(t, testkit.Scenario{ID: "share-visitors-at-once", Times: visitors, Counts: audit,
		Injected: "a paused preview's share link fetched by curl, link unfurlers, a crawler and its stream (no wake), then woken by 10 visitors at once",
		Result:   "the fetches woke nothing; one resume, recorded as the visitor's; no credit spent; the preview running"})
}
