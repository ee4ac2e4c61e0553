package main

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"html"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// reserved is the path prefix the proxy answers itself; everything else goes to the app.
const reserved = "/__sandman/"

// Config is what the proxy is told at its start (flags or environment, main.go).
type Config struct {
	Target *url.URL // the app's server, http://127.0.0.1:PORT
	// Plain turns the injection off: the proxy forwards every answer untouched (the project's
	// setting).
	Plain bool
	// ScriptURL, when set, is the src of the injected tag instead of the reporter the proxy
	// serves itself.
	ScriptURL string
	Log       *slog.Logger
}

//go:embed report.js
var reportJS string

// Proxy forwards a preview's requests to the app and adds the reporter's script tag to its
// HTML pages (docs/architecture.md, "The preview proxy").
type Proxy struct {
	cfg      Config
	rp       *httputil.ReverseProxy
	tag      []byte // the script tag added to each page
	etagMark string // appended to the ETag of a page with the tag: "-sm" and the tag's hash
	script   []byte // the reporter, served at reserved+"report.js"; nil with a ScriptURL
}

// New makes the proxy of cfg.
func New(cfg Config) (*Proxy, error) {
	if cfg.Target == nil || cfg.Target.Host == "" {
		return nil, errors.New("no target: give the app's address, as 127.0.0.1:3000")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{cfg: cfg}
	if !cfg.Plain {
		p.prepare()
	}
	transport := &http.Transport{
		Proxy:       nil, // the app is next door: never through an HTTP_PROXY of the sandbox
		DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		// A page loads tens of modules at once from a dev server (Vite serves each file on its
		// own): keep their connections rather than open one a request.
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		// Compressed answers pass as they are: the transport never asks for gzip of its own.
		DisableCompression: true,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      transport,
		FlushInterval:  -1, // server-sent events and streamed pages reach the browser as they come
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       slog.NewLogLogger(cfg.Log.Handler(), slog.LevelDebug),
	}
	return p, nil
}

// prepare takes the reporter and makes the tag that loads it.
func (p *Proxy) prepare() {
	src := p.cfg.ScriptURL
	if src == "" {
		p.script = []byte(reportJS)
		sum := sha256.Sum256(p.script)
		src = reserved + "report.js?v=" + hex.EncodeToString(sum[:6])
	}
	p.tag = []byte(`<script src="` + html.EscapeString(src) + `"></script>`)
	sum := sha256.Sum256(p.tag)
	p.etagMark = "-sm" + hex.EncodeToString(sum[:4])
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, reserved) {
		switch r.URL.Path {
		case reserved + "report.js":
			if p.script != nil {
				p.serveScript(w, r)
				return
			}
		case reserved + "ping":
			// Tells the proxy is up without asking the app (the app's own health is Sandman's
			// watch).
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	p.rp.ServeHTTP(asSent{w}, r)
}

// asSent keeps an answer's headers as the app sent them: without Date or Content-Type when it
// sent none (the server would add a Date, and may sniff a type).
type asSent struct{ http.ResponseWriter }

func (w asSent) WriteHeader(code int) {
	h := w.Header()
	for _, k := range []string{"Content-Type", "Date"} {
		if _, ok := h[k]; !ok {
			h[k] = nil
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap gives http.ResponseController the server's writer: its Flush (streams) and Hijack
// (websockets).
func (w asSent) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (p *Proxy) serveScript(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	// The tag names the script by its hash (?v=): a new reporter is a new URL.
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(p.script)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(p.script)
}

// markKey is the request context's key telling that the browser's If-None-Match named a page
// with the tag: the app's 304 then carries the marked ETag back.
type markKey struct{}

func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	pr.SetURL(p.cfg.Target)
	// The app sees the request as the browser sent it: its Host (a dev server may check it) and
	// the X-Forwarded-* headers of the proxies in front, which Rewrite removes.
	pr.Out.Host = pr.In.Host
	for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		if v, ok := pr.In.Header[k]; ok {
			pr.Out.Header[k] = v
		}
	}
	if p.cfg.Plain {
		return
	}
	marked := false
	for _, k := range []string{"If-None-Match", "If-Range"} {
		if v := pr.Out.Header.Get(k); v != "" && strings.Contains(v, p.etagMark) {
			pr.Out.Header.Set(k, strings.ReplaceAll(v, p.etagMark+`"`, `"`))
			marked = true
		}
	}
	if isNavigation(pr.In) {
		// The page must come decoded to take the tag: ask for it so (a page is small, and the
		// app is on loopback). An app that compresses anyway is decoded for gzip and deflate.
		pr.Out.Header.Set("Accept-Encoding", "identity")
		if !marked {
			// A copy the browser holds without the tag (cached while the script was off) must
			// not be kept by a 304: only the marked ETag revalidates a page.
			pr.Out.Header.Del("If-None-Match")
			pr.Out.Header.Del("If-Modified-Since")
		}
	}
	if marked {
		pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), markKey{}, true))
	}
}

// isNavigation tells a request for a page: a browser's navigation, or anything that takes HTML.
func isNavigation(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Dest") {
	case "document", "iframe", "frame":
		return true
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

func (p *Proxy) modifyResponse(resp *http.Response) error {
	if p.cfg.Plain {
		return nil
	}
	if resp.StatusCode == http.StatusNotModified && resp.Request.Context().Value(markKey{}) != nil {
		p.markETag(resp.Header)
		return nil
	}
	if !takesTag(resp) {
		return nil
	}
	var body io.ReadCloser = resp.Body
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		if resp.ContentLength >= 0 {
			resp.ContentLength += int64(len(p.tag))
			resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		}
	case "gzip", "x-gzip", "deflate":
		if resp.Request.Method == http.MethodHead {
			// As the GET would come: decoded, its length unknown.
			resp.Header.Del("Content-Encoding")
			resp.Header.Del("Content-Length")
			break
		}
		d, err := decoder(enc, resp.Body)
		if err != nil {
			// Not the encoding it claims: the page goes as it came, without the tag.
			p.cfg.Log.Debug("an HTML answer could not be decoded; passed without the script", "encoding", enc, "err", err)
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(d.peeked()), resp.Body), resp.Body}
			return nil
		}
		body = d
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
	default:
		// An encoding the proxy does not read (br, zstd), which the app sent although asked
		// for none: the page goes without the tag rather than broken.
		p.cfg.Log.Debug("an HTML answer in an encoding the proxy does not read; passed without the script", "encoding", enc)
		return nil
	}
	p.markETag(resp.Header)
	// Hashes of the body the app sent no longer hold.
	resp.Header.Del("Content-MD5")
	resp.Header.Del("Digest")
	resp.Header.Del("Repr-Digest")
	resp.Header.Del("Content-Digest")
	if resp.Request.Method != http.MethodHead {
		resp.Body = newInjector(body, p.tag)
	}
	return nil
}

// markETag appends the tag's hash to the page's ETag: the page with the tag is a different
// representation from the app's, and a new reporter makes the cached one stale. rewrite
// takes the mark off the browser's conditional requests, so the app's own check still works.
func (p *Proxy) markETag(h http.Header) {
	v := h.Get("ETag")
	if !strings.HasSuffix(v, `"`) || len(v) < 2 || strings.HasSuffix(v, p.etagMark+`"`) {
		return
	}
	h.Set("ETag", v[:len(v)-1]+p.etagMark+`"`)
}

// takesTag tells an answer the script tag goes into: a page (text/html) with content, whole.
func takesTag(resp *http.Response) bool {
	if resp.StatusCode < 200 || resp.StatusCode > 299 ||
		resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusResetContent ||
		resp.StatusCode == http.StatusPartialContent {
		return false
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && mt == "text/html"
}

// peekDecoder decodes a gzip or deflate body; when the body is not what it claims, peeked gives
// back what was read of it.
type peekDecoder struct {
	io.Reader
	body io.ReadCloser
	rec  *bytes.Buffer
}

func (d *peekDecoder) Close() error   { return d.body.Close() }
func (d *peekDecoder) peeked() []byte { return d.rec.Bytes() }

func decoder(enc string, body io.ReadCloser) (*peekDecoder, error) {
	rec := &bytes.Buffer{}
	tee := io.TeeReader(body, rec)
	d := &peekDecoder{body: body, rec: rec}
	if enc == "deflate" {
		// "deflate" is zlib-wrapped by the standard; a few servers send raw deflate.
		br := bufio.NewReader(tee)
		if hdr, err := br.Peek(2); err == nil && (uint16(hdr[0])<<8|uint16(hdr[1]))%31 == 0 && hdr[0]&0x0f == 8 {
			zr, err := zlib.NewReader(br)
			if err != nil {
				return d, err
			}
			d.Reader = zr
		} else {
			d.Reader = flate.NewReader(br)
		}
		return d, nil
	}
	zr, err := gzip.NewReader(tee)
	if err != nil {
		return d, err
	}
	d.Reader = zr
	return d, nil
}

// upstreamError answers when the app cannot be reached: a small page of ours, never cached.
func (p *Proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) || r.Context().Err() != nil {
		return // the browser left
	}
	// At debug: while the app is down every request would log; Sandman watches the app itself.
	p.cfg.Log.Debug("the app did not answer", "method", r.Method, "path", r.URL.Path, "err", err)
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusBadGateway)
	_, _ = io.WriteString(w, badGatewayPage)
}

const badGatewayPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>The app isn't answering</title></head>
<body style="font-family:system-ui,sans-serif;margin:2rem;line-height:1.5">
<h1 style="font-size:1.25rem">The app isn't answering</h1>
<p>Its server is not running, or not listening on its port yet. Sandman shows what it printed.</p>
</body></html>
`
