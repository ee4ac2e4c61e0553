package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/applog"
	"sandman/internal/testkit"
)

type logPage struct {
	Lines []struct {
		Seq       int64
		At        time.Time
		SandboxID string
		Version   int32
		Source    string
		Stream    string
		Text      string
	}
	Next int64
}

// newProject makes a project through the API and returns its id.
func newProject(t *testing.T, c *apptest.Client, name string) uuid.UUID {
	t.Helper()
	var p struct{ ID uuid.UUID }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": name, "starter": "static"}, &p), http.StatusCreated)
	return p.ID
}

// printLines stores texts as one run's output, as the dev servers' watch does, and waits until
// they are stored.
func (s *stack) printLines(t *testing.T, run applog.Run, texts ...string) {
	t.Helper()
	lines := make([]applog.Line, len(texts))
	for i, x := range texts {
		lines[i] = applog.Line{Run: run, Stream: applog.Stderr, Text: x}
	}
	w := s.AppLog().Writer
	w.Lines(context.Background(), lines)
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func appRun(project uuid.UUID) applog.Run {
	return applog.Run{ProjectID: project, SandboxID: uuid.New(), Version: 1, Source: applog.SourceApp, ID: uuid.New()}
}

// A backend pages through its app's output with a token: oldest first after the cursor, at most
// 1,000 lines a page whatever it asks, and the cursor of the next page; another founder's
// project is not found, for its lines, its stream and its problems alike.
func TestLogsArePagedAfterTheirCursor(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	founder := s.NewClient(t)
	founder.SignUp("logs-pages@example.com")
	backend := founder.WithToken(founder.MakeToken("logs"))
	p := newProject(t, founder, "Logs")
	texts := make([]string, 1500)
	for i := range texts {
		texts[i] = "line " + strconv.Itoa(i)
	}
	s.printLines(t, appRun(p), texts...)

	var seen []string
	after := int64(0)
	for page := 0; ; page++ {
		var lp logPage
		apptest.RequireStatus(t, backend.API(http.MethodGet, fmt.Sprintf("/api/projects/%s/logs?after=%d&limit=5000", p, after), nil, &lp), http.StatusOK)
		if len(lp.Lines) > applog.MaxPage {
			t.Fatalf("page %d has %d lines; at most %d are sent", page, len(lp.Lines), applog.MaxPage)
		}
		if len(lp.Lines) == 0 {
			if lp.Next != after {
				t.Errorf("an empty page's next is %d, want the cursor %d back", lp.Next, after)
			}
			break
		}
		for _, l := range lp.Lines {
			if l.Seq <= after {
				t.Fatalf("line %d came after cursor %d", l.Seq, after)
			}
			if l.Source != "app" || l.Stream != "stderr" || l.Version != 1 || l.At.IsZero() || l.SandboxID == "" {
				t.Fatalf("line %+v", l)
			}
			seen = append(seen, l.Text)
			after = l.Seq
		}
		if lp.Next != after {
			t.Fatalf("next is %d, want the last line's seq %d", lp.Next, after)
		}
	}
	if strings.Join(seen, ",") != strings.Join(texts, ",") {
		t.Errorf("read %d lines back, not the 1,500 in their order", len(seen))
	}
	apptest.RequireStatus(t, backend.API(http.MethodGet, "/api/projects/"+p.String()+"/logs?limit=0", nil, nil), http.StatusUnprocessableEntity)
	apptest.RequireStatus(t, backend.API(http.MethodGet, "/api/projects/"+p.String()+"/logs?after=x", nil, nil), http.StatusUnprocessableEntity)

	other := s.NewClient(t)
	other.SignUp("logs-other@example.com")
	for _, path := range []string{"/logs", "/logs/stream", "/problems"} {
		apptest.RequireStatus(t, other.API(http.MethodGet, "/api/projects/"+p.String()+path, nil, nil), http.StatusNotFound)
	}
	anonymous := s.NewClient(t)
	apptest.RequireStatus(t, anonymous.API(http.MethodGet, "/api/projects/"+p.String()+"/logs", nil, nil), http.StatusUnauthorized)
}

// openLogStream opens the project's log stream with the client's token and headers.
func openLogStream(t testing.TB, ctx context.Context, c *apptest.Client, token string, project uuid.UUID, header map[string]string) <-chan testkit.SSEEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.URL("/api/projects/"+project.String()+"/logs/stream"), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		res.Body.Close()
		t.Fatalf("log stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	out := make(chan testkit.SSEEvent, 100)
	go func() {
		defer close(out)
		defer res.Body.Close()
		_ = testkit.ReadSSE(bufio.NewReader(res.Body), func(ev testkit.SSEEvent) bool {
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	return out
}

// The log stream, with an API token: one "log" event per line, its id the line's seq; lines
// printed while it is open arrive, and a reconnection with Last-Event-ID gets exactly the lines
// after it. A line's text is data, one JSON line: its line breaks cannot end the event, nor its
// markup become markup.
func TestTheLogStreamFollowsAndResumesWithAToken(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	founder := s.NewClient(t)
	founder.SignUp("logs-stream@example.com")
	token := founder.MakeToken("stream")
	p := newProject(t, founder, "Stream")
	run := appRun(p)
	s.printLines(t, run, "one", "two")

	ctx, cancel := context.WithCancel(context.Background())
	events := openLogStream(t, ctx, founder, token, p, nil)
	type line struct {
		Seq  int64
		Text string
	}
	next := func(what string) (testkit.SSEEvent, line) {
		ev := testkit.NextSSE(t, events, 10*time.Second, what, func(ev testkit.SSEEvent) bool { return ev.Event == "log" })
		var l line
		if err := json.Unmarshal([]byte(ev.Data), &l); err != nil {
			t.Fatalf("%s: %v in %q", what, err, ev.Data)
		}
		if ev.ID != strconv.FormatInt(l.Seq, 10) {
			t.Fatalf("%s: event id %q for seq %d", what, ev.ID, l.Seq)
		}
		return ev, l
	}
	_, l1 := next("the first stored line")
	_, l2 := next("the second stored line")
	if l1.Text != "one" || l2.Text != "two" {
		t.Fatalf("stored lines came as %q, %q", l1.Text, l2.Text)
	}
	hostile := "three\ndata: forged\n\n<script>alert(1)</script>"
	s.printLines(t, run, hostile)
	ev, l3 := next("a line printed while the stream is open")
	if l3.Text != hostile || strings.Contains(ev.Data, "\n") || strings.Contains(ev.Data, "<script>") {
		t.Fatalf("the hostile line came as %q (data %q)", l3.Text, ev.Data)
	}
	cancel()

	s.printLines(t, run, "four")
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	resumed := openLogStream(t, ctx2, founder, token, p, map[string]string{"Last-Event-ID": strconv.FormatInt(l2.Seq, 10)})
	events = resumed
	_, r1 := next("the first line after Last-Event-ID")
	_, r2 := next("the second line after Last-Event-ID")
	if r1.Seq != l3.Seq || r2.Text != "four" {
		t.Fatalf("resumed after %d with %d %q, %q; want %d then \"four\"", l2.Seq, r1.Seq, r1.Text, r2.Text, l3.Seq)
	}
}

type problemOut struct {
	ID                  string
	Source, Message     string
	Detail              string
	Version             int32
	Count               int64
	FirstSeen, LastSeen time.Time
	Open                bool
}

func problems(t *testing.T, c *apptest.Client, project string) []problemOut {
	t.Helper()
	var out struct{ Problems []problemOut }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects/"+project+"/problems", nil, &out), http.StatusOK)
	return out.Problems
}

// An exit's problem in the API: what the run printed last, as data (JSON escapes its markup).
func TestAnExitsProblemIsListedAsData(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	founder := s.NewClient(t)
	founder.SignUp("logs-problems@example.com")
	p := newProject(t, founder, "Problems")
	run := appRun(p)
	s.printLines(t, run, "<img src=x onerror=alert(1)> Error: boom")
	if _, err := s.AppLog().OpenExitProblem(context.Background(), run, 1); err != nil {
		t.Fatal(err)
	}
	r := founder.API(http.MethodGet, "/api/projects/"+p.String()+"/problems", nil, nil)
	if r.Status != http.StatusOK || strings.Contains(r.Body, "<img") || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("problems answer %d %s: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	got := problems(t, founder, p.String())
	if len(got) != 1 || got[0].Source != "app" || got[0].Message != "<img src=x onerror=alert(1)> Error: boom" || !got[0].Open || got[0].Count != 1 ||
		got[0].FirstSeen.IsZero() || got[0].LastSeen.IsZero() || got[0].Version != 1 || got[0].ID == "" {
		t.Errorf("problems %+v", got)
	}
}

// The browsers' reports: a report about a founder's own preview (their session) or through a
// share link (its token) becomes a browser problem of the version the preview runs; what is not
// a report is a 400, a larger one a 413, another founder's preview or a wrong link a 404, and a
// flood a 429. Nothing refused is stored.
func TestBrowserReportsAreTakenOnlyWithinTheirBounds(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	founder := s.NewClient(t)
	founder.SignUp("reports@example.com")
	projectID, sandboxID := founder.BuildCounter()
	report := func(c *apptest.Client, path, body string) apptest.Response {
		t.Helper()
		return c.Do(http.MethodPost, path, strings.NewReader(body), map[string]string{"Content-Type": "application/json", "X-CSRF-Token": c.CSRF()})
	}
	own := "/api/sandboxes/" + sandboxID + "/reports"
	ok := `{"kind":"error","message":"TypeError: count is undefined","stack":"at inc (app.js:3:9)","url":"http://preview/"}`
	apptest.RequireStatus(t, report(founder, own, ok), http.StatusNoContent)
	apptest.RequireStatus(t, report(founder, own, `{"kind":"error","message":"TypeError: count is undefined","stack":"at inc (app.js:3:9)"}`), http.StatusNoContent)

	var share struct{ URL string }
	apptest.RequireStatus(t, founder.API(http.MethodPost, "/api/projects/"+projectID+"/share", nil, &share), http.StatusCreated)
	token := share.URL[strings.LastIndex(share.URL, "/")+1:]
	visitor := s.NewClient(t)
	apptest.RequireStatus(t, report(visitor, "/s/"+token+"/reports", `{"kind":"unhandledrejection","message":"fetch failed"}`), http.StatusNoContent)

	other := s.NewClient(t)
	other.SignUp("reports-other@example.com")
	for _, tc := range []struct {
		name   string
		c      *apptest.Client
		path   string
		body   string
		status int
	}{
		{"not JSON", founder, own, "TypeError", http.StatusBadRequest},
		{"an unknown kind", founder, own, `{"kind":"warn","message":"x"}`, http.StatusBadRequest},
		{"past 16 KiB", founder, own, `{"kind":"error","message":"` + strings.Repeat("a", 17<<10) + `"}`, http.StatusRequestEntityTooLarge},
		{"another founder's preview", other, own, ok, http.StatusNotFound},
		{"a preview that does not exist", founder, "/api/sandboxes/" + uuid.NewString() + "/reports", ok, http.StatusNotFound},
		{"a wrong share token", visitor, "/s/" + strings.Repeat("A", len(token)) + "/reports", ok, http.StatusNotFound},
		{"no session (refused at its CSRF check, as every POST)", visitor, own, ok, http.StatusForbidden},
	} {
		if r := report(tc.c, tc.path, tc.body); r.Status != tc.status {
			t.Errorf("%s: %d, want %d (%s)", tc.name, r.Status, tc.status, r.Body)
		}
	}

	got := problems(t, founder, projectID)
	var count int64
	for _, p := range got {
		if p.Source != "browser" || p.Version != 1 {
			t.Errorf("a %s problem of version %d (%.80q): want a browser problem of version 1", p.Source, p.Version, p.Message)
		}
		count += p.Count
	}
	if len(got) != 2 || count != 3 {
		t.Fatalf("%d problems counting %d reports; want the founder's report counted twice and the visitor's once, nothing refused stored", len(got), count)
	}

	limited := 0
	for i := range 40 {
		r := report(founder, own, fmt.Sprintf(`{"kind":"console.error","message":"flood %d"}`, i))
		if r.Status == http.StatusTooManyRequests {
			limited++
			if r.Header.Get("Retry-After") == "" {
				t.Error("a 429 without Retry-After")
			}
		}
	}
	if limited == 0 {
		t.Error("40 reports at once were all taken: no rate limits them")
	}
}
