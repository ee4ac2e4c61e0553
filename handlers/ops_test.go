package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/ops"
	"sandman/views"
)

// makeOperator lets the founder's account open the console, as `sandman operator add` does.
func (s *stack) makeOperator(t testing.TB, email string) {
	t.Helper()
	if _, err := ops.NewOperators(s.Pool()).Grant(context.Background(), email, "test"); err != nil {
		t.Fatal(err)
	}
}

// notFoundPage checks an answer is the one of a page that does not exist: the same status and
// the same words as the client's own request for a missing page.
func notFoundPage(t *testing.T, c *apptest.Client, what string, got apptest.Response) {
	t.Helper()
	if got.Status != http.StatusNotFound {
		t.Fatalf("%s: %d, want 404", what, got.Status)
	}
	// A logged-in founder's missing page; a visitor's missing page sends to the log-in page,
	// where the console's routes answer 404 all the same.
	text := apptest.ByTestID(t, got.Body, "error-page").Text
	want := text
	if missing := c.Do(http.MethodGet, "/no-such-page", nil, nil); missing.Status == http.StatusNotFound {
		want = apptest.ByTestID(t, missing.Body, "error-page").Text
	} else if !strings.HasPrefix(text, "Not Found") {
		want = "Not Found…"
	}
	if text != want {
		t.Fatalf("%s says %q, a missing page %q", what, text, want)
	}
	if strings.Contains(strings.ToLower(got.Body), "operator") {
		t.Fatalf("%s mentions operators: %s", what, got.Body)
	}
}

// The console and its routes are pages that do not exist for anyone but operators, logged in
// or not, the JSON route and the actions included (a refused Kill changes nothing); `sandman
// operator add` opens them to an account and `remove` closes them again. The summary takes an
// operator's API token like the rest of the API; a token opens no page.
func TestOpsIsMissingForAllButOperators(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	founder := s.NewClient(t)
	founder.SignUp("founder-ops@example.com")
	_, sandboxID := s.project(t, founder, "Counter", "starting")
	pages := []string{"/ops", "/ops/sandboxes/" + sandboxID, "/ops/sandboxes/" + sandboxID + "/kill"}

	anon := s.NewClient(t)
	for _, p := range pages {
		notFoundPage(t, anon, "anonymous GET "+p, anon.Get(p))
	}
	for _, p := range []string{"/ops/sandboxes/" + sandboxID + "/kill", "/ops/sandboxes/" + sandboxID + "/pause"} {
		notFoundPage(t, anon, "anonymous POST "+p, anon.PostForm(p, url.Values{}))
	}
	if r := anon.API(http.MethodGet, "/api/ops/summary", nil, nil); r.Status != http.StatusNotFound || !strings.Contains(r.Body, `"not_found"`) {
		t.Fatalf("anonymous summary: %d %s, want a JSON 404", r.Status, r.Body)
	}

	founder.Get("/") // a page's session token for the forms
	check := func(who string) {
		t.Helper()
		for _, p := range pages {
			notFoundPage(t, founder, who+" GET "+p, founder.Get(p))
		}
		notFoundPage(t, founder, who+" POST kill", founder.PostForm("/ops/sandboxes/"+sandboxID+"/kill", url.Values{}))
		if r := founder.API(http.MethodGet, "/api/ops/summary", nil, nil); r.Status != http.StatusNotFound || !strings.Contains(r.Body, `"not_found"`) {
			t.Fatalf("%s's summary: %d %s, want a JSON 404", who, r.Status, r.Body)
		}
		if n := s.count(t, "SELECT count(*) FROM sandboxes WHERE status = 'terminated'"); n != 0 {
			t.Fatalf("a refused kill terminated %d sandboxes", n)
		}
	}
	check("a founder")
	// An API token authenticates the summary as the rest of the API, and opens it to operators only.
	withToken := founder.WithToken(founder.MakeToken("dashboards"))
	if r := withToken.API(http.MethodGet, "/api/ops/summary", nil, nil); r.Status != http.StatusNotFound {
		t.Fatalf("a founder's API token on the summary: %d %s, want 404", r.Status, r.Body)
	}

	s.makeOperator(t, "founder-ops@example.com")
	apptest.RequireStatus(t, withToken.API(http.MethodGet, "/api/ops/summary", nil, nil), http.StatusOK)
	notFoundPage(t, withToken, "an operator's API token on /ops (a token opens no page)", withToken.Get("/ops"))
	r := founder.Get("/ops")
	apptest.RequireStatus(t, r, http.StatusOK)
	apptest.ByTestID(t, r.Body, "ops-console")
	var sum ops.Summary
	apptest.RequireStatus(t, founder.API(http.MethodGet, "/api/ops/summary", nil, &sum), http.StatusOK)
	if sum.States["starting"] != 1 || sum.Rates.VCPUHour != 0.0504 || sum.Rates.GiBHour != 0.0162 || sum.Rates.VCPUs != 2 ||
		sum.Rates.MemoryGiB != 0.5 || sum.Spent == nil || sum.Saved == nil {
		b, _ := json.Marshal(sum)
		t.Fatalf("summary %s", b)
	}

	if _, err := ops.NewOperators(s.Pool()).Revoke(context.Background(), "founder-ops@example.com", "test"); err != nil {
		t.Fatal(err)
	}
	check("a former operator")
}

// An operator's Kill, sent as the page's plain form (no JavaScript), ends the founder's preview
// at once: the founder's history says "Stopped by an operator", the operators' log says who,
// and the provider's sandbox is killed. An operator's Pause is the founder's pause, recorded
// as the operator's.
func TestOperatorKillShowsInTheFoundersHistory(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	founder := s.NewClient(t)
	founder.SignUp("killed@example.com")
	projectID, sandboxID := founder.BuildCounter()
	sb := founder.WaitSandbox(sandboxID, "running", time.Minute)
	operator := s.NewClient(t)
	operator.SignUp("operator@example.com")
	s.makeOperator(t, "operator@example.com")

	page := operator.Get("/ops/sandboxes/" + sandboxID)
	apptest.RequireStatus(t, page, http.StatusOK)
	if got := apptest.ByTestID(t, page.Body, "founder").Text; got != "killed@example.com" {
		t.Fatalf("the page names the founder %q", got)
	}
	if got := apptest.ByTestID(t, page.Body, "provider-id").Text; got != sb.ProviderID {
		t.Fatalf("the page names the provider id %q, want %q", got, sb.ProviderID)
	}
	apptest.RequireStatus(t, operator.PostForm("/ops/sandboxes/"+sandboxID+"/pause", url.Values{}), http.StatusSeeOther)
	founder.WaitSandbox(sandboxID, "paused", 30*time.Second)
	firstHistoryLine(t, founder, projectID, "Paused by an operator")

	// Without JavaScript the Kill link opens a page that asks first, naming founder and project.
	confirm := operator.Get("/ops/sandboxes/" + sandboxID + "/kill")
	apptest.RequireStatus(t, confirm, http.StatusOK)
	if q := apptest.ByTestID(t, confirm.Body, "kill-line").Text; !strings.Contains(q, "killed@example.com") || !strings.Contains(q, "Counter") {
		t.Fatalf("the kill's question %q names neither the founder nor the project", q)
	}
	r := operator.PostForm("/ops/sandboxes/"+sandboxID+"/kill", url.Values{})
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); loc != "/ops/sandboxes/"+sandboxID {
		t.Fatalf("after the kill: sent to %q", loc)
	}
	founder.WaitSandbox(sandboxID, "terminated", time.Second)
	firstHistoryLine(t, founder, projectID, "Stopped by an operator")
	if n := s.count(t, `SELECT count(*) FROM operator_log l JOIN users u ON u.id = l.actor_id
		WHERE u.email = 'operator@example.com' AND l.sandbox_id = $1 AND l.action IN ('pause', 'kill')`, sandboxID); n != 2 {
		t.Fatalf("%d operator actions logged, want the pause and the kill", n)
	}
	testkit.Eventually(t, 30*time.Second, "the provider's sandbox killed", func() error {
		if n := s.count(t, `SELECT count(*) FROM river_job WHERE kind = 'kill' AND state = 'completed' AND args->>'provider_id' = $1`, sb.ProviderID); n != 1 {
			return fmt.Errorf("%d kill jobs completed", n)
		}
		return nil
	})
}

// firstHistoryLine checks the newest sentence of the founder's project history.
func firstHistoryLine(t *testing.T, c *apptest.Client, projectID, want string) {
	t.Helper()
	root, err := html.Parse(strings.NewReader(c.Get("/projects/" + projectID).Body))
	if err != nil {
		t.Fatal(err)
	}
	lines := testkit.ByTestID(root, "history-text")
	if len(lines) == 0 {
		t.Fatal("no history")
	}
	if got := testkit.Text(lines[0]); got != want {
		t.Fatalf("the founder's history reads %q first, want %q", got, want)
	}
}

// The console lists what needs a hand from the states and events the lifecycle records:
// a build stuck past its deadline, failed resumes grouped by cause, a preview the provider
// lost and one the integrity check healed, each linked to its preview's page; and the orphans
// the reconcile killed, each once with how many times and when last.
func TestOpsListsWhatNeedsAHand(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Role: app.RoleWeb})
	c := s.NewClient(t)
	c.SignUp("hand@example.com")
	s.makeOperator(t, "hand@example.com")
	forced := map[string]string{}
	for _, f := range []struct{ name, sql string }{
		{"stuck", `UPDATE sandboxes SET state_changed_at = now() - interval '3 hours' WHERE id = $1`},
		{"unreachable", `WITH s AS (UPDATE sandboxes SET status = 'resume_failed', failure_cause = 'unreachable' WHERE id = $1 RETURNING id)
			INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, detail) SELECT id, 'resuming', 'resume_failed', 'user', 'resume_unreachable', 'connect: 502 Bad Gateway' FROM s`},
		{"files lost", `WITH s AS (UPDATE sandboxes SET status = 'resume_failed', failure_cause = 'files_lost' WHERE id = $1 RETURNING id)
			INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) SELECT id, 'resuming', 'resume_failed', 'user', 'resume_files_lost' FROM s`},
		{"lost", `WITH s AS (UPDATE sandboxes SET status = 'killed', killed_reason = 'lost', killed_at = now() WHERE id = $1 RETURNING id)
			INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) SELECT id, 'running', 'killed', 'reconciler', 'lost' FROM s`},
		{"healed", `INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, files) VALUES ($1, 'resuming', 'resuming', 'user', 'restored', '{a.js,b.js}')`},
	} {
		state := "running"
		if f.name == "stuck" {
			state = "starting"
		}
		_, sandboxID := s.project(t, c, f.name, state)
		if _, err := s.Pool().Exec(context.Background(), f.sql, sandboxID); err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		forced[f.name] = sandboxID
	}
	// One orphan killed three times (the last ten minutes ago), another once, one a day ago.
	if _, err := s.Pool().Exec(context.Background(), `INSERT INTO orphan_kills (provider_id, created_at) VALUES
		('i-ghost', now() - interval '30 minutes'), ('i-ghost', now() - interval '20 minutes'), ('i-ghost', now() - interval '10 minutes'),
		('i-once', now() - interval '5 minutes'), ('i-gone', now() - interval '25 hours')`); err != nil {
		t.Fatal(err)
	}
	body := c.Get("/ops").Body
	root, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var orphans []string
	for _, n := range testkit.ByTestID(root, "orphan") {
		orphans = append(orphans, testkit.Text(n))
	}
	if want := []string{"i-once · 5 min ago", "i-ghost · killed 3 times, last 10 min ago"}; !slices.Equal(orphans, want) {
		t.Errorf("the orphans killed: %q, want %q", orphans, want)
	}
	if text := apptest.ByTestID(t, body, "orphans").Text; strings.Contains(text, "@") || strings.Contains(text, "{") {
		t.Errorf("the orphans' list shows template code: %q", text)
	}
	for list, want := range map[string][]string{
		"stuck":        {"stuck"},
		"needs-a-hand": {"unreachable", "files lost"}, // in a list per cause
		"lost":         {"lost"},
		"healed":       {"healed"},
	} {
		text := apptest.ByTestID(t, body, list).Text
		for _, name := range want {
			if !strings.Contains(text, name+" · hand@example.com") || !strings.Contains(body, `href="/ops/sandboxes/`+forced[name]+`"`) {
				t.Errorf("the %s list lacks %s with its link: %q", list, name, text)
			}
		}
	}
	causes := apptest.ByTestID(t, body, "needs-a-hand").Text
	for _, want := range []string{"Resume failed: the sandbox couldn't be reached (1)", "Resume failed: the provider lost its files and they couldn't be restored (1)",
		"connect: 502 Bad Gateway", "Restored 2 files the provider lost"} {
		if !strings.Contains(causes, want) {
			t.Errorf("needs a hand lacks %q: %q", want, causes)
		}
	}
}

// Removing an operator ends the streams that carry them the console on every instance at once,
// as a log-out ends a session's: the console's costs and lists stop reaching a founder who may no
// longer see them. Their reconnection is a founder's stream, with their own cards and no console.
func TestARemovedOperatorsConsoleStreamsEndOnEveryInstance(t *testing.T) {
	t.Parallel()
	a := webOnly(t)
	b := start(t, apptest.Options{Role: app.RoleWeb, Host: a.Host, DatabaseURL: a.DatabaseURL})
	op := a.NewClient(t)
	op.SignUp("removed-operator@example.com")
	a.makeOperator(t, "removed-operator@example.com")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	isConsole := func(ev testkit.SSEEvent) bool { return ev.Event == views.OpsConsoleID }
	onA, onB := op.Stream(ctx), op.On(b.Instance).Stream(ctx)
	testkit.NextSSE(t, onA, 10*time.Second, "the console on instance A", isConsole)
	testkit.NextSSE(t, onB, 10*time.Second, "the console on instance B", isConsole)

	// `sandman operator remove` runs as a command of its own, on neither instance.
	if _, err := ops.NewOperators(a.Pool()).Revoke(context.Background(), "removed-operator@example.com", "test"); err != nil {
		t.Fatal(err)
	}
	testkit.SSEEnds(t, onA, 10*time.Second)
	testkit.SSEEnds(t, onB, 10*time.Second)

	again := op.On(b.Instance).Stream(ctx)
	b.waitClients(t, 1)
	op.Get("/") // a page's CSRF token
	var p struct{ ID string }
	apptest.RequireStatus(t, op.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	apptest.RequireStatus(t, op.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "after"}, nil), http.StatusAccepted)
	testkit.NextSSE(t, again, 10*time.Second, "the reconnected stream's own new card", func(ev testkit.SSEEvent) bool {
		if isConsole(ev) {
			t.Fatalf("the former operator's new stream carried the console: %.200q", ev.Data)
		}
		return ev.Event == views.DOMID(views.Card, p.ID)
	})
	testkit.Record(t, testkit.Scenario{ID: "operator-removal-ends-console", Times: 1,
		Injected: "`operator remove` (a process of its own) while the operator has console streams open on instances A and B",
		Result:   "both streams end; the reconnection is a founder's stream (their own card, no console)"})
}
