package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromiumPath is where the browser tests expect Debian's Chromium (`make deps` installs it),
// as app/apptest's; this program's tests start their own, without the whole of Sandman.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts a headless Chromium for the test and returns its first tab's context.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("browser tests need Debian's Chromium at %s: run `make deps` (apt-get install -y chromium)", chromiumPath)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// open loads url in a new tab of the browser, closed when the (sub)test ends.
func open(t *testing.T, browser context.Context, url string) {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	nav, cancelNav := context.WithTimeout(ctx, 30*time.Second)
	defer cancelNav()
	if err := chromedp.Do(nav, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

// sentReport is one report as the report server received it.
type sentReport struct {
	Kind, Message, Stack, URL, At string
	query                         map[string][]string
	contentType                   string
	size                          int
}

// reportServer stands for Sandman's endpoint: it keeps what it is sent.
type reportServer struct {
	url     string
	mu      sync.Mutex
	reports []sentReport
}

func startReportServer(t *testing.T) *reportServer {
	rs := &reportServer{}
	s := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var rep sentReport
		if err := json.Unmarshal(body, &rep); err != nil {
			t.Errorf("a report that is not JSON: %v: %.200q", err, body)
		}
		rep.query, rep.contentType, rep.size = r.URL.Query(), r.Header.Get("Content-Type"), len(body)
		rs.mu.Lock()
		rs.reports = append(rs.reports, rep)
		rs.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	rs.url = s.URL + "/api/reports"
	return rs
}

// waitFor waits up to 30 s for n reports, and returns what came.
func (rs *reportServer) waitFor(n int) []sentReport {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		rs.mu.Lock()
		got := append([]sentReport(nil), rs.reports...)
		rs.mu.Unlock()
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
	}
}

func kinds(reports []sentReport) string {
	var s []string
	for _, r := range reports {
		s = append(s, r.Kind+": "+truncate(r.Message, 60))
	}
	return strings.Join(s, "; ")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// pages is the app of the browser tests: each path a page that misbehaves its own way.
var pages = map[string]string{
	"/three": `<!doctype html><html><head><title>three</title></head><body><p>errors</p>
<script>function boom() { throw new Error("uncaught-8f2c"); } boom();</script>
<script>Promise.reject(new Error("rejected-8f2c"));</script>
<script>console.error("console-8f2c", {detail: 1});</script>
</body></html>`,
	// The page counts the reporter's requests (it wraps fetch once the reporter is there) and,
	// once each was answered, tells the app it is done: a witness ordered after every report.
	"/bounded": `<!doctype html><html><head><title>bounded</title></head><body>
<script>
var sent = [], realFetch = window.fetch;
window.fetch = function () {
  var p = realFetch.apply(this, arguments);
  sent.push(p.catch(function () {}));
  return p;
};
for (var i = 0; i < 5; i++) console.error("same-8f2c");
console.error("big-8f2c " + "x".repeat(30000)); // past 16 KiB, within fetch keepalive's 64 KiB
for (var i = 0; i < 20; i++) console.error("many-8f2c-" + i);
Promise.all(sent).then(function () { realFetch("/done?sent=" + sent.length); });
</script></body></html>`,
	// Vite's overlay: a custom element in the body whose open shadow root holds the message.
	"/vite": `<!doctype html><html><head><title>vite</title></head><body>
<script>
customElements.define("vite-error-overlay", class extends HTMLElement {
  constructor() {
    super();
    this.attachShadow({mode: "open"}).innerHTML =
      '<div class="message"><span class="message-body">vite-8f2c: Unexpected token</span></div>' +
      '<div class="file">/src/main.js:3:7</div><pre class="frame">1 | x = (</pre><pre class="stack">at parse</pre>';
  }
});
setTimeout(function () { document.body.appendChild(document.createElement("vite-error-overlay")); }, 50);
</script></body></html>`,
}

func TestBrowserAPageErrorsReachTheReportURL(t *testing.T) {
	done := make(chan string, 1) // the /bounded page's witness: how many requests it saw sent
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/done" {
			select {
			case done <- r.URL.Query().Get("sent"):
			default:
			}
			return
		}
		page, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})
	b := newBrowser(t)

	t.Run("an uncaught error, a rejected promise and console.error", func(t *testing.T) {
		rs := startReportServer(t)
		cfg := testConfig(t, app)
		cfg.ReportURL = rs.url
		_, proxy := startProxy(t, cfg)
		open(t, b, proxy.URL+"/three")
		got := rs.waitFor(3)
		if len(got) != 3 {
			t.Fatalf("%d reports (%s), want 3: the uncaught error, the rejection and the console.error", len(got), kinds(got))
		}
		byKind := map[string]sentReport{}
		for _, r := range got {
			byKind[r.Kind] = r
			if r.query["t"][0] != "tok-1" || r.query["sandbox"][0] != "sb-1" {
				t.Errorf("a report's query %v, want t=tok-1 and sandbox=sb-1", r.query)
			}
			if !strings.HasPrefix(r.contentType, "text/plain") {
				t.Errorf("a report sent as %q, want text/plain (no preflight)", r.contentType)
			}
			if r.URL != proxy.URL+"/three" {
				t.Errorf("a report's url %q, want the page's %q", r.URL, proxy.URL+"/three")
			}
			if _, err := time.Parse(time.RFC3339, r.At); err != nil {
				t.Errorf("a report's at %q: %v", r.At, err)
			}
		}
		for kind, want := range map[string]struct{ message, stack string }{
			"error":              {"uncaught-8f2c", "boom"},
			"unhandledrejection": {"rejected-8f2c", "rejected-8f2c"},
			"console.error":      {`console-8f2c {"detail":1}`, "/three"},
		} {
			r, ok := byKind[kind]
			if !ok {
				t.Errorf("no %s report among %s", kind, kinds(got))
				continue
			}
			if !strings.Contains(r.Message, want.message) || !strings.Contains(r.Stack, want.stack) {
				t.Errorf("the %s report: message %q, stack %q; want %q in the message, %q in the stack", kind, r.Message, r.Stack, want.message, want.stack)
			}
		}
	})

	t.Run("repeats are sent once, 10 a minute, each within 16 KiB", func(t *testing.T) {
		rs := startReportServer(t)
		cfg := testConfig(t, app)
		cfg.ReportURL = rs.url
		_, proxy := startProxy(t, cfg)
		open(t, b, proxy.URL+"/bounded")
		var sent string
		select {
		case sent = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the page did not say its reports were answered within 30s; reports: %s", kinds(rs.waitFor(0)))
		}
		got := rs.waitFor(0)
		if sent != strconv.Itoa(len(got)) {
			t.Errorf("the page sent %s reports, the server received %d", sent, len(got))
		}
		count := map[string]int{}
		for _, r := range got {
			count[strings.SplitN(r.Message, " ", 2)[0]]++
			if r.size > 16384 {
				t.Errorf("a report of %d bytes (%s), want at most 16384", r.size, truncate(r.Message, 40))
			}
		}
		if len(got) != 10 || count["same-8f2c"] != 1 || count["big-8f2c"] != 1 {
			t.Errorf("%d reports (%s), want 10: the repeated one once, the big one, 8 others", len(got), kinds(got))
		}
	})

	t.Run("Vite's error overlay", func(t *testing.T) {
		rs := startReportServer(t)
		cfg := testConfig(t, app)
		cfg.ReportURL = rs.url
		_, proxy := startProxy(t, cfg)
		open(t, b, proxy.URL+"/vite")
		got := rs.waitFor(1)
		if len(got) != 1 || got[0].Kind != "error" || !strings.Contains(got[0].Message, "vite-8f2c: Unexpected token") || !strings.Contains(got[0].Stack, "/src/main.js:3:7") {
			t.Errorf("reports %+v, want one error with the overlay's message and file", got)
		}
	})
}
