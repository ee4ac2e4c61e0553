package handlers_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/lifecycle"
)

// reporterTag is what the preview proxy adds to a page (docs/architecture.md, "The preview
// proxy").
const reporterTag = `<script src="/__sandman/report.js?v=`

var reporterTagRe = regexp.MustCompile(`<script src="/__sandman/report\.js\?v=[0-9a-f]+"></script>`)

// withoutReporter is a page of the preview as the app sent it: less the one tag the proxy adds.
func withoutReporter(page string) string {
	return reporterTagRe.ReplaceAllLiteralString(page, "")
}

// previewPage reads the preview's page over HTTP, as a visitor's browser would.
func previewPage(t *testing.T, s *stack, previewURL string) string {
	t.Helper()
	res, err := s.Host.HTTPClient().Get(previewURL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the preview answered %d %.200q", res.StatusCode, body)
	}
	return string(body)
}

// buildVersion2 stores files as the project's version 2 and builds it.
func buildVersion2(t *testing.T, c *apptest.Client, pid string, files ...vfile) apptest.Sandbox {
	t.Helper()
	r, _ := postVersion(t, c, pid, map[string]any{"files": files}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	var res struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+pid+"/builds", map[string]string{"idempotencyKey": "v2"}, &res), http.StatusAccepted)
	return c.WaitSandbox(res.Sandbox.ID, "running", 90*time.Second)
}

func browserProblems(t *testing.T, c *apptest.Client, pid, marker string) func() int64 {
	return func() int64 {
		var n int64
		for _, p := range problems(t, c, pid) {
			if p.Source == "browser" && strings.Contains(p.Message, marker) && p.Version == 2 {
				n += p.Count
			}
		}
		return n
	}
}

// A page that really throws, in a real sandbox, reaches Sandman through the proxy's reporter
// alone (the page posts nothing itself): a browser problem of the version the preview runs once
// the build page shows it, counted again once a share link's visitor's page does. The preview
// URL is the proxy's port, not the app's.
func TestBrowserAPageThatThrowsBehindTheProxyBecomesAProblem(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	email := "proxy-throws-" + uuid.NewString()[:8] + "@example.com"
	c.SignUp(email)
	pid := newProject(t, c, "Throws for real").String()
	marker := "marker" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	sb := buildVersion2(t, c, pid, text("public/index.html", `<!doctype html><html lang="en"><head><title>Throws</title></head>`+
		`<body><p>throws</p><script>`+marker+`();</script></body></html>`))
	u, err := url.Parse(sb.PreviewURL)
	if err != nil || !strings.HasPrefix(u.Hostname(), "49984-") {
		t.Fatalf("the preview URL %q is not the proxy's port (%d)", sb.PreviewURL, lifecycle.ProxyPort)
	}
	count := browserProblems(t, c, pid, marker)

	browser, _ := s.Browse(t, email)
	founderPage := browser.Open(t, s.URL()+"/projects/"+pid)
	founderPage.FrameText(t, sb.PreviewURL, "throws")
	testkit.Eventually(t, 20*time.Second, "the build page's error stored as a problem of version 2", wantCount(count, 1))

	visitor := apptest.NewBrowser(t).Open(t, s.URL()+"/s/"+shareToken(t, c, pid))
	visitor.FrameText(t, sb.PreviewURL, "throws")
	testkit.Eventually(t, 20*time.Second, "the visitor's page's error counted on the same problem", wantCount(count, 2))
}

// With the project's reporter off, the preview's pages come as the app sends them (no tag) and
// their errors are no problem; turned on again from the build page's form (no JavaScript), the
// running preview's pages carry the reporter at once.
func TestBrowserWithTheReporterOffAPageThatThrowsIsNoProblem(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	email := "proxy-off-" + uuid.NewString()[:8] + "@example.com"
	c.SignUp(email)
	pid := newProject(t, c, "Reporter off").String()
	var p struct{ PreviewReporter bool }
	apptest.RequireStatus(t, c.API(http.MethodPatch, "/api/projects/"+pid, map[string]bool{"previewReporter": false}, &p), http.StatusOK)
	if p.PreviewReporter {
		t.Fatal("the PATCH answered the reporter on")
	}
	marker := "marker" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	sentinel := "sentinel-" + marker
	// The page throws, then posts a report of its own: once that one is stored, a report of the
	// throw (posted before it) would have been too.
	sb := buildVersion2(t, c, pid, text("public/index.html", `<!doctype html><html lang="en"><head><title>Off</title></head>`+
		`<body><p>throws</p><script>`+marker+`();</script><script>window.parent.postMessage({sandman: "report", kind: "error", `+
		`message: "`+sentinel+`", stack: "", url: location.href}, "*");</script></body></html>`))
	if page := previewPage(t, s, sb.PreviewURL); strings.Contains(page, reporterTag) {
		t.Fatalf("with the reporter off the page carries it: %.300q", page)
	}

	browser, _ := s.Browse(t, email)
	founderPage := browser.Open(t, s.URL()+"/projects/"+pid)
	founderPage.FrameText(t, sb.PreviewURL, "throws")
	testkit.Eventually(t, 20*time.Second, "the page's own report stored", wantCount(browserProblems(t, c, pid, sentinel), 1))
	for _, pr := range problems(t, c, pid) {
		if strings.Contains(pr.Message, marker) && !strings.Contains(pr.Message, sentinel) {
			t.Fatalf("with the reporter off the page's error is a problem: %+v", pr)
		}
	}

	r := c.PostForm("/projects/"+pid+"/settings/reporter", url.Values{"preview_reporter": {"true"}})
	if r.Status != http.StatusSeeOther && r.Status != http.StatusFound && r.Status != http.StatusOK {
		t.Fatalf("the form answered %d %s", r.Status, r.Body)
	}
	if page := previewPage(t, s, sb.PreviewURL); !strings.Contains(page, reporterTag) {
		t.Fatalf("turned on again, the running preview's page has no reporter: %.300q", page)
	}
}

// An app that listens on its own port whatever PORT says answers through the preview URL,
// which is the proxy's port, not the app's.
func TestAnAppThatHardCodesItsPortAnswersThroughThePreviewURL(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("hard-coded-" + uuid.NewString()[:8] + "@example.com")
	pid := newProject(t, c, "Hard-coded port").String()
	sb := buildVersion2(t, c, pid, text("dev-server.js", `require("http").createServer((req, res) => {
  res.writeHead(200, {"Content-Type": "text/html"});
  res.end("<!doctype html><title>x</title><p>hard-coded 5173</p>");
}).listen(5173, "0.0.0.0");
`))
	if strings.Contains(sb.PreviewURL, "5173") {
		t.Fatalf("the preview URL %q is the app's port", sb.PreviewURL)
	}
	if page := previewPage(t, s, sb.PreviewURL); !strings.Contains(page, "hard-coded 5173") || !strings.Contains(page, reporterTag) {
		t.Fatalf("the preview answered %.300q", page)
	}
}

// PATCH /api/projects/{id}: another founder's project is not found whatever the JSON body (never
// a 400 that would tell it exists); a body without a setting to change is a 400 that says what to
// send, and changes nothing.
func TestPatchingAProjectIsNotFoundForAnotherFounderWhateverTheBody(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	owner := s.NewClient(t)
	owner.SignUp("patch-owner-" + uuid.NewString()[:8] + "@example.com")
	pid := newProject(t, owner, "Patched").String()
	other := s.NewClient(t)
	other.SignUp("patch-other-" + uuid.NewString()[:8] + "@example.com")
	// (A body that is not JSON at all is refused before any route, the same for everyone.)
	for _, body := range []string{`{"previewReporter": false}`, `{"previewReporter": "no"}`, `{"other": 1}`, `{}`} {
		r := other.Do(http.MethodPatch, "/api/projects/"+pid, strings.NewReader(body),
			map[string]string{"Content-Type": "application/json", "X-CSRF-Token": other.CSRF()})
		apptest.RequireStatus(t, r, http.StatusNotFound)
	}
	r := owner.API(http.MethodPatch, "/api/projects/"+pid, map[string]any{}, nil)
	apptest.RequireStatus(t, r, http.StatusBadRequest)
	if !strings.Contains(r.Body, "previewReporter") {
		t.Fatalf("the 400 does not say what to send: %s", r.Body)
	}
	var projects []struct{ PreviewReporter bool }
	apptest.RequireStatus(t, owner.API(http.MethodGet, "/api/projects", nil, &projects), http.StatusOK)
	if len(projects) != 1 || !projects[0].PreviewReporter {
		t.Fatalf("the reporter is off after refused PATCHes: %+v", projects)
	}
}
