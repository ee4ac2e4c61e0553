package sandboxd_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// The guarantees E2B's own SDK test suite checks (docs/sandboxd.md, "Running E2B's SDK suite"),
// each held here by a test of ours.

func TestTrafficToAPausedSandboxAnswersTheProvidersNotFound(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(nil)
	c.must(204, "POST", "/sandboxes/"+sb.SandboxID+"/pause", map[string]any{"memory": true}, nil)
	// envd's /health is what the SDK's isRunning asks; only a 502 means "not running".
	res, err := c.http.Do(c.envdRequest(sb, "GET", "/health", nil))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var body struct {
		Code      int    `json:"code"`
		Message   string `json:"message"`
		SandboxID string `json:"sandboxId"`
	}
	if res.StatusCode != http.StatusBadGateway || json.Unmarshal(b, &body) != nil ||
		body.Code != 502 || body.SandboxID != sb.SandboxID || body.Message != "The sandbox was not found" {
		t.Fatalf("envd of a paused sandbox answered %d %s; want the provider's 502 not-found body", res.StatusCode, b)
	}
}

// uploadWith writes path through envd's upload (multipart, or octet-stream when raw) with
// extra headers, returning the status and body.
func (c *client) uploadWith(sb sandboxBody, path, content string, raw bool, hdr map[string]string) (int, []byte) {
	c.t.Helper()
	var req *http.Request
	if raw {
		req = c.envdRequest(sb, "POST", "/files?path="+path, strings.NewReader(content))
		req.Header.Set("Content-Type", "application/octet-stream")
	} else {
		var buf bytes.Buffer
		ct := newMultipart(&buf, "file", path, content)
		req = c.envdRequest(sb, "POST", "/files?path="+path, &buf)
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return c.envdDo(req)
}

type metaEntry struct {
	Name          string            `json:"name"`
	Path          string            `json:"path"`
	Type          string            `json:"type"`
	SymlinkTarget string            `json:"symlinkTarget"`
	Metadata      map[string]string `json:"metadata"`
}

func TestFileMetadataIsKeptOnTheFileAndReturnedAsEnvdDoes(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(nil)
	stat := func(p string) map[string]string {
		var out struct{ Entry metaEntry }
		if status, body := c.rpc(sb, "filesystem.Filesystem/Stat", map[string]any{"path": p}, &out); status != 200 {
			t.Fatalf("stat %s: %d %s", p, status, body)
		}
		return out.Entry.Metadata
	}
	want := map[string]string{"author": "mish", "purpose": "upload"}
	for _, raw := range []bool{false, true} {
		p := fmt.Sprintf("meta-%v.txt", raw)
		status, body := c.uploadWith(sb, p, "x", raw, map[string]string{"X-Metadata-Author": "mish", "x-metadata-purpose": "upload"})
		var written []metaEntry
		if status != 200 || json.Unmarshal(body, &written) != nil || len(written) != 1 || !maps.Equal(written[0].Metadata, want) {
			t.Fatalf("upload (octet-stream %v) with metadata: %d %s; want its metadata %v back", raw, status, body, want)
		}
		if got := stat(p); !maps.Equal(got, want) {
			t.Fatalf("stat after upload (octet-stream %v): metadata %v, want %v", raw, got, want)
		}
	}
	// It lives on the file: a rename keeps it, a listing shows it, programs inside see it.
	var moved struct{ Entry metaEntry }
	c.rpc(sb, "filesystem.Filesystem/Move", map[string]any{"source": "meta-false.txt", "destination": "d/moved.txt"}, &moved)
	if !maps.Equal(moved.Entry.Metadata, want) {
		t.Fatalf("renamed: metadata %v, want %v", moved.Entry.Metadata, want)
	}
	var listed struct{ Entries []metaEntry }
	c.rpc(sb, "filesystem.Filesystem/ListDir", map[string]any{"path": "d"}, &listed)
	if len(listed.Entries) != 1 || !maps.Equal(listed.Entries[0].Metadata, want) {
		t.Fatalf("listed: %s, want the metadata", mustJSON(t, listed))
	}
	if res := c.run(sb, "getfattr --only-values -n user.e2b.author d/moved.txt 2>/dev/null || python3 -c \"import os; print(os.getxattr('d/moved.txt', 'user.e2b.author').decode(), end='')\""); res.stdout != "mish" {
		t.Fatalf("inside the sandbox, user.e2b.author = %+v, want mish", res)
	}
	// Set from inside, it shows; an overwrite without metadata clears it all.
	c.run(sb, "python3 -c \"import os; os.setxattr('meta-true.txt', 'user.e2b.stage', b'inside')\"")
	if got := stat("meta-true.txt"); got["stage"] != "inside" {
		t.Fatalf("metadata set inside: %v, want stage=inside", got)
	}
	if status, body := c.uploadWith(sb, "meta-true.txt", "y", true, nil); status != 200 || strings.Contains(string(body), "metadata") {
		t.Fatalf("overwrite without metadata: %d %s", status, body)
	}
	if got := stat("meta-true.txt"); got != nil {
		t.Fatalf("after an overwrite without metadata: %v, want none", got)
	}
	// Bad metadata is refused before anything is written.
	for _, hdr := range []map[string]string{
		{"X-Metadata-Good": "caf\u00e9"},
		{"X-Metadata-" + strings.Repeat("k", 247): "v"},
		{"X-Metadata-Big": strings.Repeat("v", 4096)},
	} {
		status, body := c.uploadWith(sb, "refused.txt", "z", true, hdr)
		if status != 400 || !strings.Contains(string(body), "invalid metadata") {
			t.Fatalf("bad metadata: %d %s, want 400 invalid metadata", status, body)
		}
	}
	if status, _ := c.rpc(sb, "filesystem.Filesystem/Stat", map[string]any{"path": "refused.txt"}, nil); status != 404 {
		t.Fatalf("a refused upload left its file: stat %d", status)
	}
}

func TestEnvdListsByNameResolvesSymlinksAndRemovesWhatIsGone(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(nil)
	c.run(sb, "mkdir -p l/b l/a/z l/a/y && touch l/c l/a/x && ln -s a/x l/link && ln -s nowhere l/dangling")
	var listed struct{ Entries []metaEntry }
	c.rpc(sb, "filesystem.Filesystem/ListDir", map[string]any{"path": "l", "depth": 2}, &listed)
	var paths []string
	for _, e := range listed.Entries {
		paths = append(paths, strings.TrimPrefix(e.Path, "/home/user/l/"))
	}
	if want := []string{"a", "a/x", "a/y", "a/z", "b", "c", "dangling", "link"}; !slices.Equal(paths, want) {
		t.Fatalf("list order %v, want by name, parents first: %v", paths, want)
	}
	var stat struct{ Entry metaEntry }
	c.rpc(sb, "filesystem.Filesystem/Stat", map[string]any{"path": "l/link"}, &stat)
	if stat.Entry.Name != "link" || stat.Entry.SymlinkTarget != "/home/user/l/a/x" || stat.Entry.Type != "FILE_TYPE_FILE" {
		t.Fatalf("a symlink's entry: %+v, want its target resolved (/home/user/l/a/x) and its type", stat.Entry)
	}
	for _, p := range []string{"l/never-was", "l/c"} {
		for range 2 {
			if status, body := c.rpc(sb, "filesystem.Filesystem/Remove", map[string]any{"path": p}, nil); status != 200 {
				t.Fatalf("remove %s: %d %s, want 200 (removing what is gone is done)", p, status, body)
			}
		}
	}
}

type watchMessage struct {
	Start      *struct{} `json:"start"`
	Filesystem *struct {
		Name  string     `json:"name"`
		Type  string     `json:"type"`
		Entry *metaEntry `json:"entry"`
	} `json:"filesystem"`
}

// watchUntil reads a WatchDir stream until an event of typ for name arrives, and returns it.
func watchUntil(t *testing.T, s *stream, name, typ string) watchMessage {
	t.Helper()
	for {
		msg := s.message()
		if msg == nil {
			t.Fatalf("the watch ended before %s %s: %s", typ, name, s.trailer)
		}
		var m watchMessage
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("watch message %s: %v", msg, err)
		}
		if m.Filesystem != nil && m.Filesystem.Name == name && m.Filesystem.Type == typ {
			return m
		}
	}
}

func TestWatchDirStreamsChangesAsEnvdDoes(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, c *client) {
		sb := c.create(nil)
		c.run(sb, "mkdir -p w/old && echo a > w/f.txt && echo x > plain.txt")
		s := c.openStream(sb, "filesystem.Filesystem/WatchDir", map[string]any{"path": "w", "recursive": true, "includeEntry": true}, nil)
		var first watchMessage
		if msg := s.message(); msg == nil || json.Unmarshal(msg, &first) != nil || first.Start == nil {
			t.Fatalf("first message %s, want the start event", msg)
		}
		c.upload(sb, "w/f.txt", "changed")
		if m := watchUntil(t, s, "f.txt", "EVENT_TYPE_WRITE"); m.Filesystem.Entry == nil || m.Filesystem.Entry.Path != "/home/user/w/f.txt" {
			t.Fatalf("write event %+v, want the file's entry", m.Filesystem)
		}
		// A directory made after the watch began is watched too.
		c.rpc(sb, "filesystem.Filesystem/MakeDir", map[string]any{"path": "w/new"}, nil)
		watchUntil(t, s, "new", "EVENT_TYPE_CREATE")
		c.upload(sb, "w/new/g.txt", "deep")
		watchUntil(t, s, "new/g.txt", "EVENT_TYPE_WRITE")
		c.run(sb, "echo deeper > w/old/h.txt && rm w/f.txt")
		watchUntil(t, s, "old/h.txt", "EVENT_TYPE_CREATE")
		if m := watchUntil(t, s, "f.txt", "EVENT_TYPE_REMOVE"); m.Filesystem.Entry != nil {
			t.Fatalf("a removed file's event carries an entry: %+v", m.Filesystem.Entry)
		}
		s.close()
		for _, tt := range []struct{ path, code string }{{"nowhere", `"not_found"`}, {"plain.txt", `"invalid_argument"`}} {
			s := c.openStream(sb, "filesystem.Filesystem/WatchDir", map[string]any{"path": tt.path}, nil)
			if msg := s.message(); msg != nil || !strings.Contains(string(s.trailer), tt.code) {
				t.Fatalf("watch %s: %s then %s, want the stream to end with %s", tt.path, msg, s.trailer, tt.code)
			}
		}
	})
}

func TestASignedFileURLIsRefusedInEnvdsWords(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(map[string]any{"secure": true})
	c.upload(sb, "/home/user/s.txt", "S")
	past := time.Now().Add(-time.Minute).Unix()
	for _, tt := range []struct{ name, sig, exp, want string }{
		{"expired", fileSignature("/home/user/s.txt", "read", "", sb.EnvdAccessToken, past), strconv.FormatInt(past, 10), "signature is already expired"},
		{"another path's", fileSignature("/home/user/t.txt", "read", "", sb.EnvdAccessToken, 0), "", "invalid signature"},
		{"missing", "", "", "missing signature query parameter"},
	} {
		q := url.Values{"path": {"/home/user/s.txt"}}
		if tt.sig != "" {
			q.Set("signature", tt.sig)
		}
		if tt.exp != "" {
			q.Set("signature_expiration", tt.exp)
		}
		req := c.envdRequest(sb, "GET", "/files?"+q.Encode(), nil)
		req.Header.Del("X-Access-Token")
		status, body := c.envdDo(req)
		var got struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if status != 401 || json.Unmarshal(body, &got) != nil || got.Code != 401 || got.Message != tt.want {
			t.Fatalf("%s signature: %d %s, want 401 %q", tt.name, status, body, tt.want)
		}
	}
}

func TestAKilledSandboxBreaksItsCommandsStreams(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, c *client) {
		sb := c.create(nil)
		s := c.openStream(sb, "process.Process/Start", startRequest("sleep 60", nil), nil)
		if ev := s.next(); ev == nil || ev.Start == nil {
			t.Fatalf("first event %+v, want start", ev)
		}
		killed := make(chan struct{})
		go func() {
			defer close(killed)
			c.must(204, "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil)
		}()
		// The stream must break, not end: an end (or an end-stream message) reads as the
		// command's own exit, and the SDKs would not see that the sandbox went.
		rest, err := io.ReadAll(s.r)
		if err == nil {
			t.Fatalf("the command's stream ended cleanly after the kill (%q); want it broken", rest)
		}
		// The SDKs then ask envd's health at once: the sandbox must already be gone.
		if status, body := c.envdDo(c.envdRequest(sb, "GET", "/health", nil)); status != 502 {
			t.Fatalf("health right after the stream broke: %d %s, want 502 (the sandbox is gone)", status, body)
		}
		<-killed
	})
}

func TestATerminalRunsAnInteractiveShell(t *testing.T) {
	t.Parallel()
	forEachIsolation(t, func(t *testing.T, c *client) {
		sb := c.create(nil)
		start := map[string]any{
			"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-i", "-l"}, "envs": map[string]string{"ABC": "123", "TERM": "xterm"}},
			"pty":     map[string]any{"size": map[string]any{"cols": 80, "rows": 24}},
		}
		s := c.openStream(sb, "process.Process/Start", start, nil)
		msg := s.message()
		var first struct {
			Event procEvent `json:"event"`
		}
		if msg == nil || json.Unmarshal(msg, &first) != nil || first.Event.Start == nil {
			t.Fatalf("first message %s, want start", msg)
		}
		pid := first.Event.Start.Pid
		input := func(text string) {
			t.Helper()
			sel := map[string]any{"pid": pid}
			if status, body := c.rpc(sb, "process.Process/SendInput", map[string]any{"process": sel, "input": map[string]any{"pty": []byte(text)}}, nil); status != 200 {
				t.Fatalf("input %q: %d %s", text, status, body)
			}
		}
		var out string
		ended := false
		// read collects the terminal's output until it holds want (or, with want "", to the end).
		read := func(want string) {
			t.Helper()
			for !strings.Contains(strings.ReplaceAll(out, "\r", ""), want) || want == "" {
				msg := s.message()
				if msg == nil {
					if want != "" {
						t.Fatalf("the terminal ended without %q: %q", want, out)
					}
					return
				}
				var m struct {
					Event struct {
						Data *struct {
							Pty []byte `json:"pty"`
						} `json:"data"`
						End *struct {
							ExitCode int32 `json:"exitCode"`
						} `json:"end"`
					} `json:"event"`
				}
				if err := json.Unmarshal(msg, &m); err != nil {
					t.Fatalf("message %s: %v", msg, err)
				}
				if m.Event.Data != nil {
					out += string(m.Event.Data.Pty)
				}
				if m.Event.End != nil {
					ended = true
					if m.Event.End.ExitCode != 0 {
						t.Fatalf("the shell exited %d; output %q", m.Event.End.ExitCode, out)
					}
				}
			}
		}
		input("echo A$ABC; tput cols; tty\n")
		read("A123\n80\n/dev/pts/")
		if status, body := c.rpc(sb, "process.Process/Update", map[string]any{"process": map[string]any{"pid": pid}, "pty": map[string]any{"size": map[string]any{"cols": 100, "rows": 30}}}, nil); status != 200 {
			t.Fatalf("resize: %d %s", status, body)
		}
		input("tput cols\nexit\n")
		read("100\n")
		read("")
		if !ended {
			t.Fatalf("no end event; output %q", out)
		}
		// Isolated, the shell leads its own session on that terminal: job control works.
		if c.h.Server.Isolation() != sandboxd.IsolationNone && strings.Contains(out, "no job control") {
			t.Fatalf("the terminal is not the shell's controlling one: %q", out)
		}
	})
}

func TestMetricsMeasureWhatASandboxUses(t *testing.T) {
	t.Parallel()
	c := newClient(t, sandboxdtest.WithConfig(func(cfg *sandboxd.Config) { cfg.MetricsInterval = 200 * time.Millisecond }))
	sb := c.create(nil)
	before := time.Now().Unix()
	c.startBackground(sb, `python3 -c "b = bytearray(96 << 20); import time; time.sleep(60)" & while :; do :; done`)
	type metric struct {
		TimestampUnix int64   `json:"timestampUnix"`
		CPUCount      int     `json:"cpuCount"`
		CPUUsedPct    float64 `json:"cpuUsedPct"`
		MemUsed       int64   `json:"memUsed"`
		MemTotal      int64   `json:"memTotal"`
		DiskUsed      int64   `json:"diskUsed"`
		DiskTotal     int64   `json:"diskTotal"`
	}
	var busy metric
	waitFor(t, "a sample of a busy sandbox", 30*time.Second, func() bool {
		var ms []metric
		c.must(200, "GET", "/sandboxes/"+sb.SandboxID+"/metrics", nil, &ms)
		for _, m := range ms {
			if m.CPUUsedPct > 20 && m.MemUsed > 64<<20 {
				busy = m
				return true
			}
		}
		return false
	})
	if busy.CPUCount < 1 || busy.MemTotal <= busy.MemUsed || busy.DiskTotal <= 0 || busy.TimestampUnix < before {
		t.Fatalf("sample %+v: want the sandbox's size and its time", busy)
	}
	// envd's own /metrics reads the same figures.
	req := c.envdRequest(sb, "GET", "/metrics", nil)
	var envdMetrics struct {
		MemUsed int64 `json:"mem_used"`
	}
	if status, body := c.envdDo(req); status != 200 || json.Unmarshal(body, &envdMetrics) != nil || envdMetrics.MemUsed < 64<<20 {
		t.Fatalf("envd /metrics: %d %s, want the ~96 MiB the sandbox holds", status, body)
	}
	var none []metric
	c.must(200, "GET", fmt.Sprintf("/sandboxes/%s/metrics?start=%d&end=%d", sb.SandboxID, before-3600, before-1800), nil, &none)
	if len(none) != 0 {
		t.Fatalf("an hour before the sandbox: %d samples, want none", len(none))
	}
	if status, body, _ := c.do("GET", "/sandboxes/"+sb.SandboxID+"/metrics?start=yesterday", nil); status != 400 {
		t.Fatalf("start=yesterday: %d %s, want 400", status, body)
	}
}

func TestOptionsAndEndpointsSandboxdLacksAreRefusedByName(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	count := func() int {
		var list []map[string]any
		c.must(200, "GET", "/v2/sandboxes", nil, &list)
		return len(list)
	}
	before := count()
	for _, tt := range []struct {
		option string
		body   map[string]any
	}{
		{"network.allowPublicTraffic=false", map[string]any{"secure": true, "network": map[string]any{"allowPublicTraffic": false}}},
		{"network.allowOut", map[string]any{"network": map[string]any{"allowOut": []string{"8.8.8.8"}}}},
		{"network.egressProxy", map[string]any{"network": map[string]any{"egressProxy": map[string]any{"address": "http://proxy:3128"}}}},
		{"network.maskRequestHost", map[string]any{"network": map[string]any{"maskRequestHost": "x.example.com"}}},
		{"network.rules", map[string]any{"network": map[string]any{"rules": map[string]any{"example.com": []any{}}}}},
		{"iam.tokens", map[string]any{"iam": map[string]any{"tokens": map[string]any{"t": map[string]any{"audience": "a", "tokenType": "jwt"}}}}},
		{"volumeMounts", map[string]any{"volumeMounts": []any{map[string]any{"name": "v", "path": "/data"}}}},
	} {
		tt.body["templateID"] = "base"
		status, body, _ := c.do("POST", "/v2/sandboxes", tt.body)
		if status != 400 || !strings.Contains(string(body), "does not serve "+tt.option) {
			t.Fatalf("create with %s: %d %s, want 400 naming it", tt.option, status, body)
		}
	}
	// What it serves as it stands passes: everything outbound is denied already.
	sb := c.create(map[string]any{"network": map[string]any{"denyOut": []string{"0.0.0.0/0"}}, "allow_internet_access": true, "mcp": map[string]any{"github": map[string]any{}}})
	if got := count(); got != before+1 {
		t.Fatalf("%d sandboxes after the refusals and one create, want %d", got, before+1)
	}
	for _, tt := range []struct{ method, path, feature string }{
		{"POST", "/sandboxes/" + sb.SandboxID + "/fork", "forking"},
		{"POST", "/sandboxes/" + sb.SandboxID + "/snapshots", "snapshots"},
		{"GET", "/snapshots", "snapshots"},
		{"PUT", "/sandboxes/" + sb.SandboxID + "/network", "network updates"},
		{"POST", "/volumes", "volumes"},
		{"GET", "/volumes/v1", "volumes"},
	} {
		status, body, _ := c.do(tt.method, tt.path, map[string]any{})
		if status != 501 || !strings.Contains(string(body), tt.feature) {
			t.Fatalf("%s %s: %d %s, want 501 naming %s", tt.method, tt.path, status, body, tt.feature)
		}
	}
}
