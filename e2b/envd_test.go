package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	var b []byte
	b = appendEnvelope(b, 0, []byte(`{"a":1}`))
	b = appendEnvelope(b, 0, nil)
	b = appendEnvelope(b, flagEndStream, []byte(`{}`))
	got, err := decodeEnvelopes(b)
	if err != nil || len(got) != 3 || string(got[0].msg) != `{"a":1}` || len(got[1].msg) != 0 || got[2].flags != flagEndStream {
		t.Fatalf("decodeEnvelopes = %+v, %v", got, err)
	}
}

func TestEnvelopeErrors(t *testing.T) {
	t.Parallel()
	full := appendEnvelope(nil, 0, []byte(`{"a":1}`))
	tests := map[string][]byte{
		"truncated header":  full[:3],
		"truncated message": full[:len(full)-1],
		"too large":         {0, 0xff, 0xff, 0xff, 0xff},
		"compressed":        appendEnvelope(nil, flagCompressed, []byte("x")),
	}
	for name, b := range tests {
		if _, err := decodeEnvelopes(b); !errors.Is(err, errMalformedStream) {
			t.Errorf("%s: err = %v, want errMalformedStream", name, err)
		}
	}
}

func TestEndStreamError(t *testing.T) {
	t.Parallel()
	if err := endStreamError("op", []byte(`{}`)); err != nil {
		t.Errorf("{} = %v", err)
	}
	if err := endStreamError("op", []byte(`{"metadata":{"x":["y"]}}`)); err != nil {
		t.Errorf("metadata only = %v", err)
	}
	err := endStreamError("op", []byte(`{"error":{"code":"not_found","message":"process with pid 7 not found"}}`))
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("not_found = %v", err)
	}
	if err := endStreamError("op", []byte(`{"error":{}}`)); !errors.Is(err, ErrTransient) {
		t.Errorf("codeless error = %v, want unknown → transient", err)
	}
	if err := endStreamError("op", []byte(`{`)); !errors.Is(err, errMalformedStream) {
		t.Errorf("bad JSON = %v", err)
	}
}

func TestProtoJSONScalars(t *testing.T) {
	t.Parallel()
	var v struct {
		A, B, C protoInt
		D, E    protoBytes
	}
	if err := json.Unmarshal([]byte(`{"A":7,"B":"-3","C":1e2,"D":"aGk=","E":"_-8"}`), &v); err != nil {
		t.Fatal(err)
	}
	if v.A != 7 || v.B != -3 || v.C != 100 || string(v.D) != "hi" || !bytes.Equal(v.E, []byte{0xff, 0xef}) {
		t.Errorf("decoded %+v", v)
	}
	if err := json.Unmarshal([]byte(`{"A":1.5}`), &v); err == nil {
		t.Error("1.5 accepted as an integer")
	}
}

// fakeEnvd records envd requests and streams scripted Start answers.
type fakeEnvd struct {
	t       *testing.T
	mu      sync.Mutex
	headers []http.Header
	files   map[string]string
	start   func(w http.ResponseWriter, req map[string]any)
}

func (f *fakeEnvd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	switch r.URL.Path {
	case "/files":
		_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		mr := multipart.NewReader(r.Body, params["boundary"])
		var out []map[string]string
		for {
			p, err := mr.NextRawPart()
			if err != nil {
				break
			}
			_, dp, _ := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
			if p.FormName() != "file" {
				f.t.Errorf("part name %q", p.FormName())
			}
			b, _ := io.ReadAll(p)
			f.mu.Lock()
			f.files[dp["filename"]] = string(b)
			f.mu.Unlock()
			out = append(out, map[string]string{"path": dp["filename"], "type": "file"})
		}
		_ = json.NewEncoder(w).Encode(out)
	case "/process.Process/Start":
		if ct := r.Header.Get("Content-Type"); ct != "application/connect+json" {
			f.t.Errorf("Start content type %q", ct)
		}
		b, _ := io.ReadAll(r.Body)
		envs, err := decodeEnvelopes(b)
		if err != nil || len(envs) != 1 {
			f.t.Errorf("Start request envelopes %v, %v", envs, err)
			return
		}
		var req map[string]any
		_ = json.Unmarshal(envs[0].msg, &req)
		w.Header().Set("Content-Type", "application/connect+json")
		f.start(w, req)
	case "/process.Process/List":
		_, _ = w.Write([]byte(`{"processes":[{"config":{"cmd":"/bin/bash","args":["-l","-c","node server.js"],"cwd":"/app"},"pid":42,"tag":"dev"}]}`))
	case "/process.Process/SendSignal":
		b, _ := io.ReadAll(r.Body)
		if string(b) == `{"process":{"pid":42},"signal":"SIGNAL_SIGTERM"}` {
			_, _ = w.Write([]byte(`{}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"not_found","message":"process with pid 9 not found"}`))
	default:
		http.NotFound(w, r)
	}
}

func frame(w io.Writer, flags byte, v string) {
	_, _ = w.Write(appendEnvelope(nil, flags, []byte(v)))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestUploadFiles(t *testing.T) {
	t.Parallel()
	f := &fakeEnvd{t: t, files: map[string]string{}}
	c, _ := newFakeClient(t, f)
	sb := Sandbox{ID: "iabc", EnvdAccessToken: "tok"}
	err := c.UploadFiles(t.Context(), sb, []File{
		{Path: "/home/user/app/package.json", Content: []byte(`{"name":"x"}`)},
		{Path: `/home/user/app/we"ird\name.js`, Content: []byte("x")},
		{Path: "relative/empty.txt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"/home/user/app/package.json": `{"name":"x"}`, `/home/user/app/we"ird\name.js`: "x", "relative/empty.txt": ""}
	for p, content := range want {
		if got, ok := f.files[p]; !ok || got != content {
			t.Errorf("file %q = %q (present %v)", p, got, ok)
		}
	}
	h := f.headers[0]
	if h.Get("X-Access-Token") != "tok" || h.Get("E2b-Sandbox-Id") != "iabc" || h.Get("E2b-Sandbox-Port") != "49983" || h.Get("X-API-Key") != "" {
		t.Errorf("envd headers = %v (the API key must not go to sandboxes)", h)
	}
	if err := c.UploadFiles(t.Context(), sb, []File{{Path: "a\nb"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("newline in path: %v", err)
	}
}

func TestStartProcessWait(t *testing.T) {
	t.Parallel()
	f := &fakeEnvd{t: t, start: func(w http.ResponseWriter, req map[string]any) {
		proc := req["process"].(map[string]any)
		if proc["cmd"] != "/bin/bash" || proc["cwd"] != "/app" || req["tag"] != "install" || req["stdin"] != false {
			t.Errorf("start request %v", req)
		}
		if args := proc["args"].([]any); len(args) != 3 || args[2] != "npm install" {
			t.Errorf("args %v", args)
		}
		frame(w, 0, `{"event":{"start":{"pid":7}}}`)
		frame(w, 0, `{"event":{"keepalive":{}}}`)
		frame(w, 0, `{"event":{"data":{"stdout":"`+b64("added 1 package\n")+`"}}}`)
		frame(w, 0, `{"event":{"data":{"stderr":"`+b64("warn\n")+`"}}}`)
		frame(w, 0, `{"event":{"end":{"exitCode":3,"exited":true,"status":"exit status 3"}}}`)
		frame(w, flagEndStream, `{}`)
	}}
	c, _ := newFakeClient(t, f)
	p, err := c.StartProcess(t.Context(), Sandbox{ID: "iabc"}, ProcessParams{Command: "npm install", Cwd: "/app", Tag: "install", User: "user"})
	if err != nil {
		t.Fatal(err)
	}
	if p.PID != 7 {
		t.Errorf("PID = %d", p.PID)
	}
	res, err := p.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || !res.Exited || res.Stdout != "added 1 package\n" || res.Stderr != "warn\n" || res.Status != "exit status 3" {
		t.Errorf("result %+v", res)
	}
	if again, err := p.Wait(t.Context()); err != nil || again.ExitCode != 3 {
		t.Errorf("second Wait = %+v, %v", again, err)
	}
	h := f.headers[0]
	if h.Get("Authorization") != "Basic "+b64("user:") || h.Get("Connect-Protocol-Version") != "1" || h.Get("Keepalive-Ping-Interval") == "" {
		t.Errorf("start headers %v", h)
	}
}

func TestStartProcessDetach(t *testing.T) {
	t.Parallel()
	gone := make(chan struct{})
	f := &fakeEnvd{t: t, start: func(w http.ResponseWriter, req map[string]any) {
		frame(w, 0, `{"event":{"start":{"pid":"8"}}}`)
		// A dev server: output now and then, never an end.
		for {
			select {
			case <-gone:
				return
			case <-time.After(5 * time.Millisecond):
				frame(w, 0, `{"event":{"data":{"stdout":"`+b64("tick")+`"}}}`)
			}
		}
	}}
	c, _ := newFakeClient(t, f)
	p, err := c.StartProcess(t.Context(), Sandbox{ID: "iabc"}, ProcessParams{Command: "node server.js"})
	if err != nil || p.PID != 8 {
		t.Fatalf("StartProcess = %+v, %v", p, err)
	}
	p.Detach()
	close(gone)
	if _, err := p.Wait(t.Context()); err == nil {
		t.Error("Wait after Detach must report the closed stream")
	}
}

func TestProcessWaitHonoursContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := &fakeEnvd{t: t, start: func(w http.ResponseWriter, req map[string]any) {
		frame(w, 0, `{"event":{"start":{"pid":9}}}`)
		<-release
	}}
	c, _ := newFakeClient(t, f)
	defer close(release)
	p, err := c.StartProcess(t.Context(), Sandbox{ID: "iabc"}, ProcessParams{Command: "sleep 100"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = p.Wait(ctx)
	if !errors.Is(err, ErrTransient) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait past its deadline = %v", err)
	}
	if time.Since(start) > time.Second {
		t.Error("Wait ignored its deadline")
	}
}

func TestStartProcessErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		start func(w http.ResponseWriter)
		want  error
	}{
		{"end-stream error before start", func(w http.ResponseWriter) {
			frame(w, flagEndStream, `{"error":{"code":"invalid_argument","message":"bad cwd"}}`)
		}, ErrInvalid},
		{"unauthenticated as HTTP error", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"code":401,"message":"unauthorized access, please provide a valid access token or method signing if supported"}`))
		}, ErrAuth},
		{"stream cut before start", func(w http.ResponseWriter) {
			_, _ = w.Write([]byte{0, 0, 0})
		}, ErrTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeEnvd{t: t, start: func(w http.ResponseWriter, _ map[string]any) { tt.start(w) }}
			c, _ := newFakeClient(t, f)
			_, err := c.StartProcess(t.Context(), Sandbox{ID: "iabc"}, ProcessParams{Command: "true"})
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestStartProcessRetriesOnlyWhenNotStarted(t *testing.T) {
	t.Parallel()
	var n int
	var mu sync.Mutex
	f := &fakeEnvd{t: t}
	f.start = func(w http.ResponseWriter, _ map[string]any) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusBadGateway) // the proxy could not reach envd
			_, _ = w.Write([]byte(`{"sandboxId":"iabc","message":"The sandbox was not found","code":502}`))
			return
		}
		frame(w, 0, `{"event":{"start":{"pid":5}}}`)
		frame(w, 0, `{"event":{"end":{"exitCode":0,"exited":true}}}`)
		frame(w, flagEndStream, `{}`)
	}
	c, _ := newFakeClient(t, f)
	p, err := c.StartProcess(t.Context(), Sandbox{ID: "iabc"}, ProcessParams{Command: "true"})
	if err != nil || p.PID != 5 {
		t.Fatalf("StartProcess = %v, %v", p, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
}

func TestListProcessesAndSignal(t *testing.T) {
	t.Parallel()
	c, _ := newFakeClient(t, &fakeEnvd{t: t})
	sb := Sandbox{ID: "iabc"}
	ps, err := c.ListProcesses(t.Context(), sb)
	if err != nil || len(ps) != 1 || ps[0].PID != 42 || ps[0].Tag != "dev" || ps[0].Cwd != "/app" || !strings.Contains(strings.Join(ps[0].Args, " "), "node") {
		t.Fatalf("ListProcesses = %+v, %v", ps, err)
	}
	if err := c.SendSignal(t.Context(), sb, 42, SignalTerm); err != nil {
		t.Errorf("SendSignal: %v", err)
	}
	if err := c.SendSignal(t.Context(), sb, 9, SignalKill); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown pid: %v, want ErrNotFound", err)
	}
}
