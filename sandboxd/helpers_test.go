package sandboxd_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// client drives one sandboxd over HTTP, as the provider's SDKs would.
type client struct {
	t    testing.TB
	h    *sandboxdtest.Host
	http *http.Client
}

func newClient(t testing.TB, opts ...sandboxdtest.Option) *client {
	t.Helper()
	h := sandboxdtest.Start(t, opts...)
	return &client{t: t, h: h, http: h.HTTPClient()}
}

// forTest is c for a subtest, which must fail on its own t.
func (c *client) forTest(t testing.TB) *client {
	cc := *c
	cc.t = t
	return &cc
}

// do calls the API and returns the status and body.
func (c *client) do(method, path string, body any) (int, []byte, http.Header) {
	c.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, c.h.APIURL+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("X-API-KEY", c.h.APIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// must calls the API and fails the test unless it answers want; the body is
// decoded into out when out is not nil.
func (c *client) must(want int, method, path string, body, out any) http.Header {
	c.t.Helper()
	status, b, hdr := c.do(method, path, body)
	if status != want {
		c.t.Fatalf("%s %s: got %d %s, want %d", method, path, status, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
	return hdr
}

type sandboxBody struct {
	SandboxID       string  `json:"sandboxID"`
	TemplateID      string  `json:"templateID"`
	ClientID        string  `json:"clientID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken"`
	Domain          *string `json:"domain"`
}

type sandboxDetail struct {
	SandboxID string            `json:"sandboxID"`
	State     string            `json:"state"`
	StartedAt time.Time         `json:"startedAt"`
	EndAt     time.Time         `json:"endAt"`
	Metadata  map[string]string `json:"metadata"`
	Domain    *string           `json:"domain"`
	Lifecycle struct {
		AutoResume bool   `json:"autoResume"`
		OnTimeout  string `json:"onTimeout"`
	} `json:"lifecycle"`
	EnvdAccessToken string `json:"envdAccessToken"`
	MemoryMB        int    `json:"memoryMB"`
	DiskSizeMB      int    `json:"diskSizeMB"`
}

type restEvent struct {
	ID        string         `json:"id"`
	Type      string         `json:"type"`
	SandboxID string         `json:"sandboxId"`
	Timestamp time.Time      `json:"timestamp"`
	EventData map[string]any `json:"eventData"`
}

func (c *client) create(body map[string]any) sandboxBody {
	c.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["templateID"]; !ok {
		body["templateID"] = "base"
	}
	if _, ok := body["timeout"]; !ok {
		body["timeout"] = 300
	}
	var sb sandboxBody
	c.must(http.StatusCreated, "POST", "/sandboxes", body, &sb)
	return sb
}

func (c *client) info(id string) sandboxDetail {
	c.t.Helper()
	var d sandboxDetail
	c.must(http.StatusOK, "GET", "/sandboxes/"+id, nil, &d)
	return d
}

func (c *client) events(query string) []restEvent {
	c.t.Helper()
	var evs []restEvent
	c.must(http.StatusOK, "GET", "/events/sandboxes"+query, nil, &evs)
	return evs
}

// envdRequest builds a request to envd of a sandbox through the shared
// sandbox URL and the routing headers, as the SDKs send it.
func (c *client) envdRequest(sb sandboxBody, method, path string, body io.Reader) *http.Request {
	c.t.Helper()
	req, err := http.NewRequest(method, c.h.SandboxURL+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	if sb.EnvdAccessToken != "" {
		req.Header.Set("X-Access-Token", sb.EnvdAccessToken)
	}
	return req
}

// rpc makes a unary Connect call with the JSON codec.
func (c *client) rpc(sb sandboxBody, procedure string, msg, out any) (int, []byte) {
	c.t.Helper()
	b, _ := json.Marshal(msg)
	req := c.envdRequest(sb, "POST", "/"+procedure, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Connect-Protocol-Version", "1")
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", procedure, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, out); err != nil {
			c.t.Fatalf("%s: decode %s: %v", procedure, body, err)
		}
	}
	return resp.StatusCode, body
}

// procEvent is envd's ProcessEvent as the JSON codec writes it.
type procEvent struct {
	Start *struct {
		Pid uint32 `json:"pid"`
	} `json:"start"`
	Data *struct {
		Stdout []byte `json:"stdout"`
		Stderr []byte `json:"stderr"`
	} `json:"data"`
	End *struct {
		ExitCode int32  `json:"exitCode"`
		Exited   bool   `json:"exited"`
		Status   string `json:"status"`
	} `json:"end"`
	Keepalive *struct{} `json:"keepalive"`
}

// stream is an open server-streaming call.
type stream struct {
	t    testing.TB
	body io.ReadCloser
	r    *bufio.Reader
	// trailer is the end-of-stream message once read.
	trailer []byte
}

// openStream starts a server-streaming Connect call (Start or Connect).
func (c *client) openStream(sb sandboxBody, procedure string, msg any, hdr map[string]string) *stream {
	c.t.Helper()
	b, _ := json.Marshal(msg)
	env := append([]byte{0}, binary.BigEndian.AppendUint32(nil, uint32(len(b)))...)
	req := c.envdRequest(sb, "POST", "/"+procedure, bytes.NewReader(append(env, b...)))
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatalf("%s: %v", procedure, err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/connect+json" {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("%s: %d %s %s", procedure, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &stream{t: c.t, body: resp.Body, r: bufio.NewReader(resp.Body)}
	c.t.Cleanup(func() { resp.Body.Close() })
	return s
}

// next returns the next event, or nil at the end of the stream.
func (s *stream) next() *procEvent {
	s.t.Helper()
	msg := s.message()
	if msg == nil {
		return nil
	}
	var m struct {
		Event procEvent `json:"event"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		s.t.Fatalf("stream message %s: %v", msg, err)
	}
	return &m.Event
}

// message returns the next message of any stream, or nil at its end (the trailer kept).
func (s *stream) message() []byte {
	s.t.Helper()
	var hdr [5]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		s.t.Fatalf("stream: %v", err)
	}
	msg := make([]byte, binary.BigEndian.Uint32(hdr[1:]))
	if _, err := io.ReadFull(s.r, msg); err != nil {
		s.t.Fatalf("stream: %v", err)
	}
	if hdr[0]&0x02 != 0 {
		s.trailer = msg
		return nil
	}
	return msg
}

func (s *stream) close() { s.body.Close() }

// result collects a command's output until it ends.
type result struct {
	pid            uint32
	stdout, stderr string
	exitCode       int32
	trailer        string
}

func (s *stream) wait() result {
	s.t.Helper()
	var res result
	for ev := s.next(); ev != nil; ev = s.next() {
		switch {
		case ev.Start != nil:
			res.pid = ev.Start.Pid
		case ev.Data != nil:
			res.stdout += string(ev.Data.Stdout)
			res.stderr += string(ev.Data.Stderr)
		case ev.End != nil:
			res.exitCode = ev.End.ExitCode
		}
	}
	res.trailer = string(s.trailer)
	return res
}

func startRequest(cmd string, extra map[string]any) map[string]any {
	p := map[string]any{"cmd": "/bin/bash", "args": []string{"-l", "-c", cmd}}
	for k, v := range extra {
		p[k] = v
	}
	return map[string]any{"process": p, "stdin": false}
}

// run runs a shell command in the sandbox to completion.
func (c *client) run(sb sandboxBody, cmd string) result {
	c.t.Helper()
	return c.openStream(sb, "process.Process/Start", startRequest(cmd, nil), nil).wait()
}

// startBackground starts a long-running command and returns its pid once
// the start event arrived; the stream stays open until the test ends.
func (c *client) startBackground(sb sandboxBody, cmd string) uint32 {
	c.t.Helper()
	s := c.openStream(sb, "process.Process/Start", startRequest(cmd, nil), nil)
	ev := s.next()
	if ev == nil || ev.Start == nil {
		c.t.Fatalf("no start event: %+v", ev)
	}
	go func() { _, _ = io.Copy(io.Discard, s.body) }()
	return ev.Start.Pid
}

// upload writes one file through envd's multipart upload.
func (c *client) upload(sb sandboxBody, path, content string) {
	c.t.Helper()
	var buf bytes.Buffer
	w := newMultipart(&buf, "file", path, content)
	req := c.envdRequest(sb, "POST", "/files?path="+path, &buf)
	req.Header.Set("Content-Type", w)
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		c.t.Fatalf("upload %s: %d %s", path, resp.StatusCode, b)
	}
}

// preview GETs a sandbox port by host routing, as a browser would.
func (c *client) preview(id string, port int) (int, string) {
	c.t.Helper()
	resp, err := c.http.Get(c.h.PreviewURL(id, port))
	if err != nil {
		c.t.Fatalf("preview: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitPreview polls a sandbox port until it answers 200, like Sandman's
// readiness check.
func (c *client) waitPreview(id string, port int) string {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		status, body := c.preview(id, port)
		if status == http.StatusOK {
			return body
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("port %d of %s never answered: %d %s", port, id, status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// counterServer is the starter-like app: an in-memory visit counter.
const counterServer = `const http = require("http");
let n = 0;
http.createServer((req, res) => { n++; res.end("Visits: " + n); }).listen(Number(process.argv[2]), "127.0.0.1");
`

// startCounter uploads and starts the counter app on port and waits for it.
func (c *client) startCounter(sb sandboxBody, port int) {
	c.t.Helper()
	c.upload(sb, "/home/user/server.js", counterServer)
	c.startBackground(sb, "node server.js "+strconv.Itoa(port))
	c.waitPreview(sb.SandboxID, port)
}

// appPort returns the port a test's app should listen on: with bubblewrap
// every sandbox has its own loopback, so 3000 as in production; without,
// sandboxes share the host's, so a free one.
func appPort(t testing.TB, h *sandboxdtest.Host) int {
	if h.Server.Isolation() == sandboxd.IsolationBwrap {
		return 3000
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newMultipart writes a multipart body with one file part the way the JS
// SDK does (the whole path as filename) and returns its content type.
func newMultipart(w io.Writer, field, filename, content string) string {
	mw := multipart.NewWriter(w)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename=%q`, field, filename))
	h.Set("Content-Type", "application/octet-stream")
	pw, _ := mw.CreatePart(h)
	_, _ = io.WriteString(pw, content)
	mw.Close()
	return mw.FormDataContentType()
}
