package sandboxd_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandman/sandboxd"
)

func TestEnvdProcessStart(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(map[string]any{"envVars": map[string]string{"FROM_CREATE": "c", "OVERRIDDEN": "create"}})
	c.run(sb, "mkdir -p work")
	res := c.openStream(sb, "process.Process/Start", startRequest(
		`echo "$FROM_CREATE $FROM_REQ $OVERRIDDEN $HOME $(pwd)"; echo oops >&2; exit 7`,
		map[string]any{"cwd": "/home/user/work", "envs": map[string]string{"FROM_REQ": "r", "OVERRIDDEN": "request"}},
	), nil).wait()
	home := "/home/user"
	if !strings.HasPrefix(res.stdout, "c r request ") || res.stderr != "oops\n" || res.exitCode != 7 || res.trailer != "{}" {
		t.Fatalf("result: %+v", res)
	}
	if c.h.Server.Isolation() == "bwrap" && res.stdout != "c r request "+home+" "+home+"/work\n" {
		t.Fatalf("paths inside the sandbox: %q", res.stdout)
	}

	tests := []struct {
		name, code string
		req        map[string]any
	}{
		{"missing cwd", "invalid_argument", startRequest("true", map[string]any{"cwd": "/home/user/nope"})},
		{"no command", "invalid_argument", map[string]any{"process": map[string]any{"cmd": ""}}},
		{"pty of no size", "invalid_argument", map[string]any{"process": map[string]any{"cmd": "/bin/bash"}, "pty": map[string]any{"size": map[string]any{"cols": 0, "rows": 24}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := c.openStream(sb, "process.Process/Start", tt.req, nil).wait()
			var tr struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.Unmarshal([]byte(res.trailer), &tr)
			if tr.Error.Code != tt.code {
				t.Fatalf("trailer %s, want code %s", res.trailer, tt.code)
			}
		})
	}
}

func TestEnvdProcessControl(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(nil)

	// A tagged background process, listed, re-attached, then killed.
	tagged := map[string]any{"process": map[string]any{"cmd": "/bin/bash", "args": []string{"-c", "while true; do echo tick; sleep 0.05; done"}}, "tag": "ticker", "stdin": false}
	first := c.openStream(sb, "process.Process/Start", tagged, nil)
	pid := first.next().Start.Pid
	first.close() // the process must outlive its stream
	var list struct {
		Processes []struct {
			Pid    uint32 `json:"pid"`
			Tag    string `json:"tag"`
			Config struct {
				Cmd string `json:"cmd"`
			} `json:"config"`
		} `json:"processes"`
	}
	c.rpc(sb, "process.Process/List", map[string]any{}, &list)
	if len(list.Processes) != 1 || list.Processes[0].Pid != pid || list.Processes[0].Tag != "ticker" || list.Processes[0].Config.Cmd != "/bin/bash" {
		t.Fatalf("list: %+v", list)
	}
	again := c.openStream(sb, "process.Process/Connect", map[string]any{"process": map[string]any{"tag": "ticker"}}, nil)
	if ev := again.next(); ev.Start == nil || ev.Start.Pid != pid {
		t.Fatalf("connect: %+v", ev)
	}
	if ev := again.next(); ev.Data == nil || !strings.Contains(string(ev.Data.Stdout), "tick") {
		t.Fatalf("connect output: %+v", ev)
	}
	if status, body := c.rpc(sb, "process.Process/SendSignal", map[string]any{"process": map[string]any{"pid": pid}, "signal": "SIGNAL_SIGKILL"}, nil); status != 200 {
		t.Fatalf("signal: %d %s", status, body)
	}
	if res := again.wait(); res.exitCode != -1 || res.trailer != "{}" {
		t.Fatalf("after kill: %+v", res)
	}
	waitFor(t, "the list to empty", 2*time.Second, func() bool {
		c.rpc(sb, "process.Process/List", map[string]any{}, &list)
		return len(list.Processes) == 0
	})
	for _, tt := range []struct {
		name, procedure string
		msg             map[string]any
		status          int
		code            string
	}{
		{"unknown pid", "process.Process/SendSignal", map[string]any{"process": map[string]any{"pid": 999999}, "signal": 9}, 404, "not_found"},
		{"bad signal", "process.Process/SendSignal", map[string]any{"process": map[string]any{"pid": pid}, "signal": "SIGNAL_SIGHUP"}, 501, "unimplemented"},
		{"unknown tag", "process.Process/CloseStdin", map[string]any{"process": map[string]any{"tag": "nope"}}, 404, "not_found"},
		{"unknown method", "process.Process/Teleport", map[string]any{}, 404, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := c.rpc(sb, tt.procedure, tt.msg, nil)
			var e struct{ Code string }
			_ = json.Unmarshal(body, &e)
			if status != tt.status || (tt.code != "" && e.Code != tt.code) {
				t.Fatalf("got %d %s, want %d %s", status, body, tt.status, tt.code)
			}
		})
	}

	// Stdin: input goes in, EOF ends the command.
	cat := c.openStream(sb, "process.Process/Start", map[string]any{"process": map[string]any{"cmd": "/bin/cat"}, "stdin": true}, nil)
	catPid := cat.next().Start.Pid
	c.rpc(sb, "process.Process/SendInput", map[string]any{"process": map[string]any{"pid": strconv.Itoa(int(catPid))}, "input": map[string]any{"stdin": base64.StdEncoding.EncodeToString([]byte("echo me\n"))}}, nil)
	c.rpc(sb, "process.Process/CloseStdin", map[string]any{"process": map[string]any{"pid": catPid}}, nil)
	if res := cat.wait(); res.stdout != "echo me\n" || res.exitCode != 0 {
		t.Fatalf("cat: %+v", res)
	}

	// Connect-Timeout-Ms bounds the command, like envd.
	start := time.Now()
	res := c.openStream(sb, "process.Process/Start", startRequest("sleep 30", nil), map[string]string{"Connect-Timeout-Ms": "300"}).wait()
	if res.exitCode != -1 || time.Since(start) > 5*time.Second {
		t.Fatalf("timeout: %+v after %v", res, time.Since(start))
	}

	// Keepalives flow at the requested interval while a command is quiet.
	ka := c.openStream(sb, "process.Process/Start", startRequest("sleep 2", nil), map[string]string{"Keepalive-Ping-Interval": "1"})
	ka.next()
	if ev := ka.next(); ev.Keepalive == nil {
		t.Fatalf("want a keepalive, got %+v", ev)
	}
	ka.close()
}

// fileSignature is envd's v1 signature, written from the provider's
// contract (docs/provider.md) rather than from sandboxd's code.
func fileSignature(path, op, user, token string, exp int64) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != 0 {
		raw += ":" + strconv.FormatInt(exp, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

func (c *client) envdDo(req *http.Request) (int, []byte) {
	c.t.Helper()
	resp, err := c.http.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestEnvdFiles(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(map[string]any{"secure": true})

	// Several files in one multipart request, paths from the part names.
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for name, content := range map[string]string{"/home/user/src/a.js": "A", "src/deep/b.js": "B", "/tmp/t.txt": "T"} {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", `form-data; name="file"; filename="`+name+`"`)
		w, _ := mw.CreatePart(h)
		io.WriteString(w, content)
	}
	mw.Close()
	req := c.envdRequest(sb, "POST", "/files", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	status, body := c.envdDo(req)
	var written []struct{ Path, Name, Type string }
	_ = json.Unmarshal(body, &written)
	if status != 200 || len(written) != 3 {
		t.Fatalf("upload: %d %s", status, body)
	}

	// Octet-stream, gzip-encoded.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("zipped"))
	zw.Close()
	req = c.envdRequest(sb, "POST", "/files?path=z.txt", &gz)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "gzip")
	if status, body := c.envdDo(req); status != 200 || !strings.Contains(string(body), `"/home/user/z.txt"`) {
		t.Fatalf("octet upload: %d %s", status, body)
	}

	read := func(path string, mutate func(*http.Request)) (int, string) {
		req := c.envdRequest(sb, "GET", "/files?path="+url.QueryEscape(path), nil)
		if mutate != nil {
			mutate(req)
		}
		status, body := c.envdDo(req)
		return status, string(body)
	}
	for _, tt := range []struct {
		path   string
		status int
		body   string
	}{
		{"/home/user/src/a.js", 200, "A"},
		{"src/deep/b.js", 200, "B"},
		{"/tmp/t.txt", 200, "T"},
		{"~/z.txt", 200, "zipped"},
		{"/home/user/missing", 404, ""},
		{"/home/user/src", 400, ""},
		{"/root/.bashrc", 404, ""},
	} {
		if status, body := read(tt.path, nil); status != tt.status || (tt.body != "" && body != tt.body) {
			t.Fatalf("read %s: %d %q, want %d %q", tt.path, status, body, tt.status, tt.body)
		}
	}
	// The sandbox's own /etc, never the host's: an isolated sandbox's hostname names it, the
	// plain mode reads nothing outside its trees.
	hostStatus, hostname := read("/etc/hostname", nil)
	if c.h.Server.Isolation() == sandboxd.IsolationBwrap {
		if own := "e2b-" + sb.SandboxID + "\n"; hostStatus != 200 || hostname != own {
			t.Fatalf("read /etc/hostname: %d %q, want the sandbox's own hostname %q", hostStatus, hostname, own)
		}
	} else if hostStatus == 200 {
		t.Fatalf("read /etc/hostname: the host's %q", hostname)
	}
	// Writes outside the sandbox's own trees are refused.
	req = c.envdRequest(sb, "POST", "/files?path=/etc/evil", strings.NewReader("x"))
	req.Header.Set("Content-Type", "application/octet-stream")
	if status, _ := c.envdDo(req); status != 403 {
		t.Fatalf("write to /etc: %d", status)
	}
	// A symlink to / reaches the sandbox's own root, never the host's: an
	// isolated sandbox resolves it in its own view, the plain mode refuses.
	c.run(sb, "ln -s / escape")
	linkStatus, linkBody := read("escape/etc/hostname", nil)
	if c.h.Server.Isolation() == sandboxd.IsolationBwrap {
		if linkStatus != 200 || linkBody != "e2b-"+sb.SandboxID+"\n" {
			t.Fatalf("symlink to / read %d %q, want the sandbox's own hostname", linkStatus, linkBody)
		}
	} else if linkStatus == 200 {
		t.Fatalf("symlink escaped: %q", linkBody)
	}

	// Secure sandbox: no token, no access; a signature opens one file.
	noToken := func(r *http.Request) { r.Header.Del("X-Access-Token") }
	if status, _ := read("/home/user/src/a.js", noToken); status != 401 {
		t.Fatalf("read without token: %d", status)
	}
	exp := time.Now().Add(time.Minute).Unix()
	sig := fileSignature("/home/user/src/a.js", "read", "", sb.EnvdAccessToken, exp)
	signed := func(r *http.Request) {
		noToken(r)
		q := r.URL.Query()
		q.Set("signature", sig)
		q.Set("signature_expiration", strconv.FormatInt(exp, 10))
		r.URL.RawQuery = q.Encode()
	}
	if status, body := read("/home/user/src/a.js", signed); status != 200 || body != "A" {
		t.Fatalf("signed read: %d %s", status, body)
	}
	if status, _ := read("/home/user/src/deep/b.js", signed); status != 401 {
		t.Fatalf("a signature must be bound to its path: %d", status)
	}
	rpcReq := c.envdRequest(sb, "POST", "/process.Process/List", strings.NewReader("{}"))
	rpcReq.Header.Set("Content-Type", "application/json")
	rpcReq.Header.Del("X-Access-Token")
	if status, _ := c.envdDo(rpcReq); status != 401 {
		t.Fatalf("rpc without token: %d", status)
	}
	health := c.envdRequest(sb, "GET", "/health", nil)
	health.Header.Del("X-Access-Token")
	if status, _ := c.envdDo(health); status != 204 {
		t.Fatalf("health: %d", status)
	}
	userReq := c.envdRequest(sb, "GET", "/files?path=src/a.js", nil)
	userReq.SetBasicAuth("mallory", "")
	if status, _ := c.envdDo(userReq); status != 401 {
		t.Fatalf("unknown user: %d", status)
	}
}

type entry struct {
	Name          string `json:"name"`
	Type          string `json:"type"`
	Path          string `json:"path"`
	Size          string `json:"size"`
	Permissions   string `json:"permissions"`
	SymlinkTarget string `json:"symlinkTarget"`
}

func TestEnvdFilesystem(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(nil)
	var made struct{ Entry entry }
	if status, body := c.rpc(sb, "filesystem.Filesystem/MakeDir", map[string]any{"path": "/home/user/a/b"}, &made); status != 200 || made.Entry.Type != "FILE_TYPE_DIRECTORY" {
		t.Fatalf("mkdir: %d %s", status, body)
	}
	if status, _ := c.rpc(sb, "filesystem.Filesystem/MakeDir", map[string]any{"path": "a/b"}, nil); status != 409 {
		t.Fatalf("mkdir twice: %d", status)
	}
	c.upload(sb, "/home/user/a/b/f.txt", "hello")
	c.run(sb, "ln -s a/b/f.txt link")
	var listed struct{ Entries []entry }
	c.rpc(sb, "filesystem.Filesystem/ListDir", map[string]any{"path": "/home/user", "depth": 3}, &listed)
	got := map[string]entry{}
	for _, e := range listed.Entries {
		got[e.Path] = e
	}
	if got["/home/user/a/b/f.txt"].Size != "5" || got["/home/user/link"].Type != "FILE_TYPE_FILE" ||
		got["/home/user/link"].SymlinkTarget != "/home/user/a/b/f.txt" || got["/home/user/a"].Type != "FILE_TYPE_DIRECTORY" {
		t.Fatalf("list: %s", mustJSON(t, listed))
	}
	c.rpc(sb, "filesystem.Filesystem/ListDir", map[string]any{"path": "/home/user", "depth": 1}, &listed)
	if len(listed.Entries) != 2 {
		t.Fatalf("depth 1: %s", mustJSON(t, listed))
	}
	var moved struct{ Entry entry }
	if status, body := c.rpc(sb, "filesystem.Filesystem/Move", map[string]any{"source": "a/b/f.txt", "destination": "/home/user/c/g.txt"}, &moved); status != 200 || moved.Entry.Path != "/home/user/c/g.txt" {
		t.Fatalf("move: %d %s", status, body)
	}
	var stat struct{ Entry entry }
	c.rpc(sb, "filesystem.Filesystem/Stat", map[string]any{"path": "c/g.txt"}, &stat)
	if stat.Entry.Name != "g.txt" || stat.Entry.Permissions != "-rw-r--r--" {
		t.Fatalf("stat: %+v", stat)
	}
	for _, tt := range []struct {
		procedure string
		msg       map[string]any
		status    int
	}{
		{"filesystem.Filesystem/Stat", map[string]any{"path": "nope"}, 404},
		{"filesystem.Filesystem/Remove", map[string]any{"path": "/etc/passwd"}, 403},
		{"filesystem.Filesystem/ListDir", map[string]any{"path": "c/g.txt"}, 400},
		{"filesystem.Filesystem/Remove", map[string]any{"path": "a"}, 200},
		{"filesystem.Filesystem/Stat", map[string]any{"path": "a"}, 404},
	} {
		if status, body := c.rpc(sb, tt.procedure, tt.msg, nil); status != tt.status {
			t.Fatalf("%s %v: %d %s, want %d", tt.procedure, tt.msg, status, body, tt.status)
		}
	}
}

func TestSandboxTrafficRouting(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(nil)
	get := func(host string, hdr map[string]string) (int, string) {
		req, _ := http.NewRequest("GET", c.h.SandboxURL+"/health", nil)
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		status, body := c.envdDo(req)
		return status, string(body)
	}
	tests := []struct {
		name   string
		host   string
		hdr    map[string]string
		status int
	}{
		{"per-sandbox host", "49983-" + sb.SandboxID + "." + c.h.Domain, nil, 204},
		{"headers on localhost", c.h.Domain, map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983"}, 204},
		{"headers on an IP", "127.0.0.1", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983"}, 204},
		{"shared sandbox host", "sandbox.localhost", map[string]string{"E2b-Sandbox-Id": sb.SandboxID, "E2b-Sandbox-Port": "49983"}, 204},
		{"localhost without headers", c.h.Domain, nil, 400},
		{"garbage label", "hello.localhost", nil, 400},
		{"unknown sandbox", "49983-inotthere.localhost", nil, 502},
		{"closed port", "8080-" + sb.SandboxID + ".localhost", nil, 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if status, body := get(tt.host, tt.hdr); status != tt.status {
				t.Fatalf("got %d %s, want %d", status, body, tt.status)
			}
		})
	}
	// Browsers get a page, not JSON.
	req, _ := http.NewRequest("GET", c.h.PreviewURL("inotthere", 3000), nil)
	req.Header.Set("Accept", "text/html")
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("browser error page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestAutoResumeByTraffic(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(map[string]any{"autoPause": true, "autoResume": map[string]any{"enabled": true}, "timeout": 60})
	port := appPort(t, c.h)
	c.startCounter(sb, port)
	c.must(204, "POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, nil)
	if got := c.waitPreview(sb.SandboxID, port); got != "Visits: 2" {
		t.Fatalf("auto-resumed: %q", got)
	}
	if d := c.info(sb.SandboxID); d.State != "running" || !d.Lifecycle.AutoResume {
		t.Fatalf("after auto-resume: %+v", d)
	}
}
