package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"sandman/applog"
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

// open loads url in a new tab of the browser, closed when the (sub)test ends, and returns the
// tab's context.
func open(t *testing.T, browser context.Context, url string) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	// The tab is made by its context's first action and lives as long as that action's context:
	// made here with the tab's own, not the navigation's timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	nav, cancelNav := context.WithTimeout(ctx, 30*time.Second)
	defer cancelNav()
	if err := chromedp.Do(nav, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return ctx
}

// posted is one message a window heard, as the page's script recorded it.
type posted struct {
	FromFrame bool           // sent by the window of the page's iframe
	Origin    string         // the sender's origin
	Size      int            // bytes of its data as JSON
	Data      map[string]any // the message
}

// report is a posted message as the relay reads it; ok tells it has the shape the relay takes:
// sandman "report" and nothing but the four fields, each a string.
func (m posted) report() (r sentReport, ok bool) {
	if m.Data["sandman"] != "report" {
		return r, false
	}
	for k, v := range m.Data {
		if _, str := v.(string); !str || !strings.Contains(" sandman kind message stack url ", " "+k+" ") {
			return r, false
		}
	}
	str := func(k string) string { s, _ := m.Data[k].(string); return s }
	return sentReport{Kind: str("kind"), Message: str("message"), Stack: str("stack"), URL: str("url"), size: m.Size}, true
}

// sentReport is one report as the page's parent heard it.
type sentReport struct {
	Kind, Message, Stack, URL string
	size                      int
}

// listener records each message the window hears in window.heard (the parent page's and the
// page alone's).
const listener = `<script>
window.heard = [];
addEventListener("message", function (ev) {
  var f = document.querySelector("iframe");
  window.heard.push({FromFrame: !!f && ev.source === f.contentWindow, Origin: ev.origin,
    Size: new TextEncoder().encode(JSON.stringify(ev.data)).length, Data: ev.data});
});
</script>`

// heardUntil reads the tab's window.heard every 20 ms until done holds of it or 30 s pass, and
// returns the last read.
func heardUntil(t *testing.T, tab context.Context, done func([]posted) bool) []posted {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		read, cancel := context.WithTimeout(tab, 10*time.Second)
		raw, err := chromedp.Run(read, chromedp.Evaluate[string](`JSON.stringify(window.heard || [])`))
		cancel()
		if err != nil {
			t.Fatalf("read the messages heard: %v", err)
		}
		var got []posted
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatalf("the messages heard: %v: %.200q", err, raw)
		}
		if done(got) || time.Now().After(deadline) {
			return got
		}
	}
}

// reportsOf is the reports among msgs, each checked to come from the frame, from the proxy's
// origin, in the relay's shape.
func reportsOf(t *testing.T, msgs []posted, origin string) []sentReport {
	t.Helper()
	var out []sentReport
	for _, m := range msgs {
		if m.Data["done"] != nil {
			continue
		}
		r, ok := m.report()
		if !ok || !m.FromFrame || m.Origin != origin {
			t.Errorf("a message the relay would not take: %+v (from the frame %v, origin %q; want %q)", m.Data, m.FromFrame, m.Origin, origin)
			continue
		}
		out = append(out, r)
	}
	return out
}

func isDone(msgs []posted) bool {
	for _, m := range msgs {
		if m.Data["done"] != nil {
			return true
		}
	}
	return false
}

// parent stands for Sandman's page that frames the preview: on its own origin, it frames a page
// (/frame?src=), records what it hears, and relays with Sandman's own static/js/reports.js to its
// /reports, which reads each with applog.ParseReport as Sandman's endpoints do.
type parent struct {
	url     string
	mu      sync.Mutex
	relayed []applog.Report
	refused []string
}

func startParent(t *testing.T) *parent {
	relay, err := os.ReadFile("../../static/js/reports.js")
	if err != nil {
		t.Fatal(err)
	}
	p := &parent{}
	s := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/frame":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><html><head><title>parent</title>%s</head>
<body hx-headers='{"X-CSRF-Token":"csrf-8f2c"}'><iframe src="%s" data-report-url="/reports"></iframe>
<script src="/reports.js"></script></body></html>`, listener, html.EscapeString(r.URL.Query().Get("src")))
		case "/reports.js":
			w.Header().Set("Content-Type", "text/javascript")
			_, _ = w.Write(relay)
		case "/reports":
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			rep, err := applog.ParseReport(body)
			p.mu.Lock()
			if r.Header.Get("X-CSRF-Token") != "csrf-8f2c" {
				err = fmt.Errorf("CSRF token %q", r.Header.Get("X-CSRF-Token"))
			}
			if err != nil {
				p.refused = append(p.refused, fmt.Sprintf("%v: %.200q", err, body))
			} else {
				p.relayed = append(p.relayed, rep)
			}
			p.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	})
	p.url = s.URL
	return p
}

// frame opens the parent page framing src in a new tab.
func (p *parent) frame(t *testing.T, browser context.Context, src string) context.Context {
	return open(t, browser, p.url+"/frame?src="+url.QueryEscape(src))
}

// waitRelayed waits up to 30 s for n reports relayed, and returns them and those refused.
func (p *parent) waitRelayed(n int) ([]applog.Report, []string) {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		p.mu.Lock()
		got, refused := append([]applog.Report(nil), p.relayed...), append([]string(nil), p.refused...)
		p.mu.Unlock()
		if len(got)+len(refused) >= n || time.Now().After(deadline) {
			return got, refused
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

// viteOverlay defines Vite's overlay: a custom element whose open shadow root holds the message.
const viteOverlay = `<script>
customElements.define("vite-error-overlay", class extends HTMLElement {
  constructor() {
    super();
    this.attachShadow({mode: "open"}).innerHTML =
      '<div class="message"><span class="message-body">vite-8f2c: Unexpected token</span></div>' +
      '<div class="file">/src/main.js:3:7</div><pre class="frame">1 | x = (</pre><pre class="stack">at parse</pre>';
  }
});
</script>`

// pages is the app of the browser tests: each path a page that misbehaves its own way.
var pages = map[string]string{
	"/three": `<!doctype html><html><head><title>three</title></head><body><p>errors</p>
<script>function boom() { throw new Error("uncaught-8f2c"); } boom();</script>
<script>Promise.reject(new Error("rejected-8f2c"));</script>
<script>console.error("console-8f2c", {detail: 1});</script>
</body></html>`,
	// Once its errors are reported the page tells its parent it is done: messages from one window
	// to another arrive in order, so the parent has heard every report when it hears that.
	"/bounded": `<!doctype html><html><head><title>bounded</title></head><body>
<script>
for (var i = 0; i < 5; i++) console.error("same-8f2c");
console.error("big-8f2c " + "x".repeat(30000));
for (var i = 0; i < 20; i++) console.error("many-8f2c-" + i);
window.parent.postMessage({done: true}, "*");
</script></body></html>`,
	// Vite appends its overlay to the body, here once the page has loaded…
	"/vite": `<!doctype html><html><head><title>vite</title></head><body>` + viteOverlay + `
<script>setTimeout(function () { document.body.appendChild(document.createElement("vite-error-overlay")); }, 50);</script>
</body></html>`,
	// …and here while it is still being read, before DOMContentLoaded (as a slow machine may
	// see a timer fire).
	"/vite-early": `<!doctype html><html><head><title>vite</title></head><body>` + viteOverlay + `
<script>document.body.appendChild(document.createElement("vite-error-overlay"));</script>
</body></html>`,
	// Alone in a tab the page hears its own messages; it says it is done after its errors.
	"/alone": `<!doctype html><html><head><title>alone</title>` + listener + `</head><body>
<script>function boom() { throw new Error("alone-8f2c"); } boom();</script>
<script>console.error("alone-8f2c");</script>
<script>setTimeout(function () { window.postMessage({done: true}, "*"); }, 100);</script>
</body></html>`,
}

func TestBrowserAPageErrorsReachTheWindowFramingIt(t *testing.T) {
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		page, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, page)
	})
	_, proxy := startProxy(t, testConfig(t, app))
	b := newBrowser(t)

	t.Run("an uncaught error, a rejected promise and console.error, relayed", func(t *testing.T) {
		parent := startParent(t)
		tab := parent.frame(t, b, proxy.URL+"/three")
		got := reportsOf(t, heardUntil(t, tab, func(m []posted) bool { return len(m) >= 3 }), proxy.URL)
		if len(got) != 3 {
			t.Fatalf("%d reports (%s), want 3: the uncaught error, the rejection and the console.error", len(got), kinds(got))
		}
		byKind := map[string]sentReport{}
		for _, r := range got {
			byKind[r.Kind] = r
			if r.URL != proxy.URL+"/three" {
				t.Errorf("a report's url %q, want the page's %q", r.URL, proxy.URL+"/three")
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
		// Sandman's own relay takes each and its endpoint's parser accepts it.
		relayed, refused := parent.waitRelayed(3)
		if len(refused) > 0 || len(relayed) != 3 {
			t.Errorf("the relay delivered %d reports (%+v), refused %q; want the 3", len(relayed), relayed, refused)
		}
	})

	t.Run("repeats are sent once, 10 a minute, each within 16 KiB", func(t *testing.T) {
		parent := startParent(t)
		tab := parent.frame(t, b, proxy.URL+"/bounded")
		msgs := heardUntil(t, tab, isDone)
		if !isDone(msgs) {
			t.Fatalf("the page did not say it was done within 30s; heard %d messages", len(msgs))
		}
		got := reportsOf(t, msgs, proxy.URL)
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
		if relayed, refused := parent.waitRelayed(len(got)); len(refused) > 0 || len(relayed) != len(got) {
			t.Errorf("the relay delivered %d of %d reports, refused %q", len(relayed), len(got), refused)
		}
	})

	for _, path := range []string{"/vite", "/vite-early"} {
		t.Run("Vite's error overlay "+path, func(t *testing.T) {
			parent := startParent(t)
			tab := parent.frame(t, b, proxy.URL+path)
			got := reportsOf(t, heardUntil(t, tab, func(m []posted) bool { return len(m) >= 1 }), proxy.URL)
			if len(got) != 1 || got[0].Kind != "error" || !strings.Contains(got[0].Message, "vite-8f2c: Unexpected token") || !strings.Contains(got[0].Stack, "/src/main.js:3:7") {
				t.Errorf("reports %+v, want one error with the overlay's message and file", got)
			}
		})
	}

	t.Run("alone in a tab, a page reports nothing", func(t *testing.T) {
		tab := open(t, b, proxy.URL+"/alone")
		msgs := heardUntil(t, tab, isDone)
		if !isDone(msgs) {
			t.Fatalf("the page did not say it was done within 30s")
		}
		if len(msgs) != 1 {
			t.Errorf("the page alone heard %+v, want only its own done: the reporter posted to a window that does not frame it", msgs)
		}
	})
}
