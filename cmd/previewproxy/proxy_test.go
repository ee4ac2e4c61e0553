package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// fixedDate is the Date every test upstream sends, so a direct answer and the proxy's can be
// compared header for header.
const fixedDate = "Thu, 26 Nov 2026 12:00:00 GMT"

// upstream starts the app: a real HTTP server on loopback.
func upstream(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

// testConfig is a proxy's configuration in front of app.
func testConfig(t testing.TB, app *httptest.Server) Config {
	t.Helper()
	u, err := url.Parse(app.URL)
	if err != nil {
		t.Fatal(err)
	}
	return Config{Target: u}
}

// startProxy runs the proxy of cfg on a real loopback server.
func startProxy(t testing.TB, cfg Config) (*Proxy, *httptest.Server) {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(p)
	t.Cleanup(s.Close)
	return p, s
}

// rawClient reads answers as they travel: no decoding of gzip, no redirects followed.
var rawClient = &http.Client{
	Transport: &http.Transport{DisableCompression: true, Proxy: nil},
	CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	},
	Timeout: 30 * time.Second,
}

func do(t testing.TB, method, u string, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, u, err)
	}
	return resp, body
}

// navigation is what a browser sends for a page.
var navigation = map[string]string{
	"Accept":          "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
	"Accept-Encoding": "gzip, deflate, br, zstd",
	"Sec-Fetch-Dest":  "document",
}

func gzipped(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}

func zlibbed(s string) []byte {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}

func TestAPageGetsExactlyOneScriptTag(t *testing.T) {
	tests := []struct {
		name     string
		page     string
		encoding string // how the app sends it, whatever it was asked
		chunked  bool   // no Content-Length: the app flushes as it writes
		at       string // the tag goes right after this prefix of the page
	}{
		{name: "after the head tag", page: "<!doctype html><html><head><title>t</title></head><body>hi</body></html>", at: "<!doctype html><html><head>"},
		{name: "a head tag whose attribute holds >", page: `<!DOCTYPE html><html><head data-x="a>b"><meta charset="utf-8"></head><body></body></html>`, at: `<!DOCTYPE html><html><head data-x="a>b">`},
		{name: "no head: after the html tag", page: "<!DOCTYPE html>\n<html lang=\"en\">\n<body><p>hi</p></body></html>", at: "<!DOCTYPE html>\n<html lang=\"en\">\n"},
		{name: "neither head nor html: after the doctype and comments", page: "<!doctype html><!-- <head> --><title>x</title><p>hi", at: "<!doctype html><!-- <head> -->"},
		{name: "a fragment: at the start", page: "<p>hello</p>", at: ""},
		{name: "gzip the app sends anyway", page: "<!doctype html><html><head></head><body>gz</body></html>", encoding: "gzip", at: "<!doctype html><html><head>"},
		{name: "deflate the app sends anyway", page: "<!doctype html><html><head></head><body>df</body></html>", encoding: "deflate", at: "<!doctype html><html><head>"},
		{name: "a page streamed in chunks", page: "<!doctype html><html><head></head><body>" + strings.Repeat("chunk ", 5000) + "</body></html>", chunked: true, at: "<!doctype html><html><head>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked string
			app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				asked = r.Header.Get("Accept-Encoding")
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				body := []byte(tt.page)
				switch tt.encoding {
				case "gzip":
					body = gzipped(tt.page)
				case "deflate":
					body = zlibbed(tt.page)
				}
				if tt.encoding != "" {
					w.Header().Set("Content-Encoding", tt.encoding)
				}
				if tt.chunked {
					for len(body) > 0 {
						n := min(len(body), 1000)
						_, _ = w.Write(body[:n])
						w.(http.Flusher).Flush()
						body = body[n:]
					}
					return
				}
				w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				_, _ = w.Write(body)
			})
			p, proxy := startProxy(t, testConfig(t, app))
			resp, body := do(t, "GET", proxy.URL+"/", navigation)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			if asked != "identity" {
				t.Errorf("the app was asked for Accept-Encoding %q, want identity for a page", asked)
			}
			want := tt.at + string(p.tag) + strings.TrimPrefix(tt.page, tt.at)
			if got := strings.Count(string(body), "<script"); got != strings.Count(want, "<script") {
				t.Errorf("%d script tags in %.300q, want exactly one more than the app's", got, body)
			}
			if string(body) != want {
				t.Errorf("the page through the proxy:\n%.400q\nwant:\n%.400q", body, want)
			}
			if ce := resp.Header.Get("Content-Encoding"); ce != "" {
				t.Errorf("Content-Encoding %q on a decoded page", ce)
			}
			if cl := resp.Header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length %s for a body of %d bytes", cl, len(body))
			}
			// HEAD says what GET would send.
			head, _ := do(t, "HEAD", proxy.URL+"/", navigation)
			if ce, cl := head.Header.Get("Content-Encoding"), head.Header.Get("Content-Length"); ce != "" || (cl != "" && cl != strconv.Itoa(len(body))) {
				t.Errorf("HEAD says Content-Encoding %q, Content-Length %q; the GET was %d bytes, not encoded", ce, cl, len(body))
			}
		})
	}
}

func TestAPageHeadersLengthAndETagFollowTheTag(t *testing.T) {
	page := "<!doctype html><html><head></head><body>etag</body></html>"
	modTime := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "index.html", modTime, strings.NewReader(page))
	})
	p, proxy := startProxy(t, testConfig(t, app))

	resp, body := do(t, "GET", proxy.URL+"/", navigation)
	etag := resp.Header.Get("ETag")
	if etag == `"v1"` || !strings.HasPrefix(etag, `"v1`) {
		t.Fatalf("the page with the tag has ETag %s, want the app's marked as another representation", etag)
	}
	if want := strconv.Itoa(len(page) + len(p.tag)); resp.Header.Get("Content-Length") != want || len(body) != len(page)+len(p.tag) {
		t.Errorf("Content-Length %s and a body of %d bytes, want %s", resp.Header.Get("Content-Length"), len(body), want)
	}

	head, _ := do(t, "HEAD", proxy.URL+"/", navigation)
	if head.Header.Get("Content-Length") != resp.Header.Get("Content-Length") || head.Header.Get("ETag") != etag {
		t.Errorf("HEAD says Content-Length %s, ETag %s; GET said %s, %s", head.Header.Get("Content-Length"), head.Header.Get("ETag"), resp.Header.Get("Content-Length"), etag)
	}

	again, body := do(t, "GET", proxy.URL+"/", map[string]string{"Accept": "text/html", "If-None-Match": etag})
	if again.StatusCode != http.StatusNotModified || len(body) != 0 {
		t.Fatalf("a revalidation with the page's own ETag: %d with %d bytes, want 304 (the app's check sees its own ETag)", again.StatusCode, len(body))
	}
	if got := again.Header.Get("ETag"); got != etag {
		t.Errorf("the 304 carries ETag %s, want the page's %s", got, etag)
	}

	// A copy cached without the tag (the project had the script off) is never revalidated.
	for _, h := range []map[string]string{
		{"Accept": "text/html", "If-None-Match": `"v1"`},
		{"Accept": "text/html", "If-Modified-Since": modTime.Format(http.TimeFormat)},
	} {
		stale, body := do(t, "GET", proxy.URL+"/", h)
		if stale.StatusCode != http.StatusOK || !strings.Contains(string(body), string(p.tag)) {
			t.Errorf("a revalidation of a copy without the tag (%v): %d, want 200 with the tag", h, stale.StatusCode)
		}
	}
}

func TestEveryAnswerButAPageIsByteIdentical(t *testing.T) {
	random := make([]byte, 300_000)
	_, _ = rand.Read(random)
	png := append([]byte("\x89PNG\r\n\x1a\n"), random[:2000]...)
	tests := []struct {
		name   string
		header map[string]string
		status int
		body   []byte
	}{
		{name: "random bytes", header: map[string]string{"Content-Type": "application/octet-stream", "ETag": `"bin-1"`}, body: random},
		{name: "an image", header: map[string]string{"Content-Type": "image/png", "ETag": `W/"img"`, "Cache-Control": "max-age=60"}, body: png},
		{name: "JSON", header: map[string]string{"Content-Type": "application/json"}, body: []byte(`{"html":"<head></head>"}`)},
		{name: "gzipped JavaScript", header: map[string]string{"Content-Type": "text/javascript", "Content-Encoding": "gzip", "Vary": "Accept-Encoding"}, body: gzipped("console.log('<head>')")},
		{name: "no Content-Type at all", header: map[string]string{"Content-Type": ""}, body: []byte("<html><head></head></html>")},
		{name: "no Date", header: map[string]string{"Content-Type": "application/json", "Date": ""}, body: []byte("{}")},
		{name: "a page in an error", header: map[string]string{"Content-Type": "text/html"}, status: 500, body: []byte("<html><head></head>oops</html>")},
		{name: "a page's part (206)", header: map[string]string{"Content-Type": "text/html", "Content-Range": "bytes 0-5/100"}, status: 206, body: []byte("<html>")},
		{name: "a redirect", header: map[string]string{"Location": "/elsewhere", "Content-Type": "text/html"}, status: 302, body: []byte("<a href=/elsewhere>moved</a>")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				h := w.Header()
				for k, v := range tt.header { // "" for a header the app sends none of
					if v == "" {
						h[k] = nil // the server sends none and sniffs none
						continue
					}
					h.Set(k, v)
				}
				if _, none := h["Date"]; !none {
					h.Set("Date", fixedDate)
				}
				h.Set("Content-Length", strconv.Itoa(len(tt.body)))
				w.WriteHeader(cmp(tt.status, 200))
				_, _ = w.Write(tt.body)
			})
			_, proxy := startProxy(t, testConfig(t, app))
			direct, want := do(t, "GET", app.URL+"/x", navigation)
			through, got := do(t, "GET", proxy.URL+"/x", navigation)
			if through.StatusCode != direct.StatusCode {
				t.Errorf("status %d, the app's %d", through.StatusCode, direct.StatusCode)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the body through the proxy (%d bytes, %.80q) differs from the app's (%d bytes, %.80q)", len(got), got, len(want), want)
			}
			if a, b := headerText(direct.Header), headerText(through.Header); a != b {
				t.Errorf("the headers through the proxy:\n%s\nthe app's:\n%s", b, a)
			}
		})
	}
}

func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func headerText(h http.Header) string {
	var b bytes.Buffer
	_ = h.WriteSubset(&b, nil)
	return b.String()
}

func TestAWebsocketPassesBothWays(t *testing.T) {
	app := upstream(t, websocket.Handler(func(ws *websocket.Conn) {
		// The app speaks first (Vite's "connected"), then echoes.
		if err := websocket.Message.Send(ws, `{"type":"connected"}`); err != nil {
			return
		}
		for {
			var msg []byte
			if err := websocket.Message.Receive(ws, &msg); err != nil {
				return
			}
			if err := websocket.Message.Send(ws, append([]byte("echo:"), msg...)); err != nil {
				return
			}
		}
	}).ServeHTTP)
	_, proxy := startProxy(t, testConfig(t, app))

	conf, err := websocket.NewConfig("ws"+strings.TrimPrefix(proxy.URL, "http")+"/ws", proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	conf.Protocol = []string{"vite-hmr"}
	ws, err := websocket.DialConfig(conf)
	if err != nil {
		t.Fatalf("the websocket's handshake through the proxy: %v", err)
	}
	defer ws.Close()
	_ = ws.SetDeadline(time.Now().Add(10 * time.Second))
	var first string
	if err := websocket.Message.Receive(ws, &first); err != nil || first != `{"type":"connected"}` {
		t.Fatalf("the app's first message through the proxy: %q, %v", first, err)
	}
	binary := make([]byte, 70_000)
	_, _ = rand.Read(binary)
	for _, msg := range [][]byte{[]byte("hello"), binary} {
		if err := websocket.Message.Send(ws, msg); err != nil {
			t.Fatalf("send: %v", err)
		}
		var got []byte
		if err := websocket.Message.Receive(ws, &got); err != nil {
			t.Fatalf("receive: %v", err)
		}
		if !bytes.Equal(got, append([]byte("echo:"), msg...)) {
			t.Fatalf("the echo of %d bytes came back as %d bytes, not the same", len(msg), len(got))
		}
	}
}

// nextLine reads one line within 10 s, or fails the test saying what it waited for.
func nextLine(t *testing.T, r *bufio.Reader, what string) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		return s
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not arrive through the proxy within 10s while the app held the rest back: the proxy buffers", what)
		return ""
	}
}

func TestStreamsArriveAsTheyAreSent(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		first, rest string
	}{
		{name: "server-sent events", contentType: "text/event-stream", first: "data: one\n\n", rest: "data: two\n\n"},
		{name: "a page streamed in parts", contentType: "text/html", first: "<!doctype html><html><head><title>s</title>\n", rest: "</head><body>late</body></html>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				_, _ = io.WriteString(w, tt.first)
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-r.Context().Done():
				case <-time.After(30 * time.Second):
				}
				_, _ = io.WriteString(w, tt.rest)
			})
			_, proxy := startProxy(t, testConfig(t, app))
			req, _ := http.NewRequest("GET", proxy.URL+"/stream", nil)
			req.Header.Set("Accept", tt.contentType)
			resp, err := rawClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			r := bufio.NewReader(resp.Body)
			got := nextLine(t, r, "the stream's first part")
			close(release)
			if !strings.HasPrefix(tt.first, got) && !strings.Contains(got, "<script") {
				t.Errorf("first line %q", got)
			}
			rest, _ := io.ReadAll(r)
			if !strings.HasSuffix(got+string(rest), tt.rest) {
				t.Errorf("the stream ended %q, want %q last", rest, tt.rest)
			}
		})
	}
}

func TestAnAppThatIsDownGetsOurBadGatewayPageAndThePingAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, proxy := startProxy(t, Config{Target: &url.URL{Scheme: "http", Host: addr}, Plain: true})
	resp, body := do(t, "GET", proxy.URL+"/", navigation)
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	if !strings.Contains(string(body), "The app isn't answering") || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the 502's page (Cache-Control %q): %q, want ours, never cached", resp.Header.Get("Cache-Control"), body)
	}
	if ping, _ := do(t, "GET", proxy.URL+"/__sandman/ping", nil); ping.StatusCode != http.StatusNoContent {
		t.Errorf("the proxy's ping while the app is down: %d, want 204 (the proxy runs)", ping.StatusCode)
	}
}

func TestTheAppSeesTheRequestAsTheBrowserSentIt(t *testing.T) {
	seen := make(chan http.Header, 1)
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		h.Set("Host", r.Host)
		seen <- h
	})
	_, proxy := startProxy(t, testConfig(t, app))
	req, _ := http.NewRequest("GET", proxy.URL+"/api/items?q=1", nil)
	req.Host = "3001-sb-1.preview.example"
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("X-Forwarded-Proto", "https")
	req.Header.Set("X-Forwarded-Host", "3001-sb-1.preview.example")
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-seen
	for k, want := range map[string]string{"Host": "3001-sb-1.preview.example", "X-Forwarded-For": "203.0.113.9",
		"X-Forwarded-Proto": "https", "X-Forwarded-Host": "3001-sb-1.preview.example"} {
		if got := h.Get(k); got != want {
			t.Errorf("the app saw %s %q, want the browser's %q", k, got, want)
		}
	}
}

func TestPlainForwardsPagesUntouched(t *testing.T) {
	page := gzipped("<!doctype html><html><head></head><body>plain</body></html>")
	var asked string
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		asked = r.Header.Get("Accept-Encoding")
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("ETag", `"p"`)
		w.Header().Set("Date", fixedDate)
		_, _ = w.Write(page)
	})
	cfg := testConfig(t, app)
	cfg.Plain = true
	_, proxy := startProxy(t, cfg)
	direct, want := do(t, "GET", app.URL+"/", navigation)
	through, got := do(t, "GET", proxy.URL+"/", navigation)
	if !bytes.Equal(got, want) || headerText(direct.Header) != headerText(through.Header) {
		t.Errorf("a page through the plain proxy:\n%s%q\nthe app's:\n%s%q", headerText(through.Header), got, headerText(direct.Header), want)
	}
	if asked != navigation["Accept-Encoding"] {
		t.Errorf("the app was asked for Accept-Encoding %q, want the browser's %q", asked, navigation["Accept-Encoding"])
	}
	if _, body := do(t, "GET", proxy.URL+"/__sandman/report.js", nil); !bytes.Equal(body, page) {
		t.Errorf("the plain proxy answered the reporter's path itself: %.100q, want the app's answer", body)
	}
}

func TestTheReporterIsServedUnderItsOwnHash(t *testing.T) {
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<head></head>")
	})
	p, proxy := startProxy(t, testConfig(t, app))
	src := strings.TrimSuffix(strings.TrimPrefix(string(p.tag), `<script src="`), `"></script>`)
	resp, js := do(t, "GET", proxy.URL+src, nil)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("GET %s: %d %s", src, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if string(js) != reportJS {
		t.Errorf("the script served is not the reporter:\n%.300s", js)
	}
	// Cached for a year: only a URL naming the script's content lets a new reporter through.
	sum := sha256.Sum256([]byte(reportJS))
	if want := "/__sandman/report.js?v=" + hex.EncodeToString(sum[:6]); src != want || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
		t.Errorf("the reporter at %s (Cache-Control %q), want it at %s, immutable", src, resp.Header.Get("Cache-Control"), want)
	}
}

// TestTheStaticBinaryRunsFromItsEnvironment builds the program as it is uploaded (static, no
// cgo) and runs it with its settings in the environment, as a sandbox's start command does.
func TestTheStaticBinaryRunsFromItsEnvironment(t *testing.T) {
	bin := t.TempDir() + "/previewproxy"
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	app := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<!doctype html><html><head></head><body>bin</body></html>")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin)
	cmd.Env = []string{"PREVIEWPROXY_LISTEN=" + addr, "PREVIEWPROXY_TARGET=" + strings.TrimPrefix(app.URL, "http://")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var page []byte
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			page, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy did not answer within 10s: %v\n%s", err, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	i := strings.Index(string(page), `<script src="/__sandman/report.js?v=`)
	if i < 0 {
		t.Fatalf("no reporter's tag in %q", page)
	}
	src := string(page[i+len(`<script src="`):])
	src = src[:strings.IndexByte(src, '"')]
	resp, err := http.Get("http://" + addr + src)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(js) != reportJS {
		t.Errorf("the binary's script is not the reporter:\n%.300s", js)
	}
}
