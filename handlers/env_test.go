package handlers_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// envServer is an app that serves its environment: a plain variable as it is, a secret by its
// length only; and prints the secret, which the log must never hold.
const envServer = `const http = require("http");
console.log("starting with key " + (process.env.API_KEY || "none"));
http.createServer((q, r) => r.end("GREETING=" + process.env.GREETING + " KEYLEN=" + (process.env.API_KEY || "").length))
  .listen(process.env.PORT, process.env.HOST);`

// previewSays waits for the preview to serve want.
func previewSays(t *testing.T, s *stack, previewURL, want string) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, "the preview to serve "+want, func() error {
		res, err := s.Host.HTTPClient().Get(previewURL)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if !strings.Contains(string(body), want) {
			return fmt.Errorf("the preview serves %.200q", body)
		}
		return nil
	})
}

// historySays waits for the project's build page to say want, and returns the page.
func historySays(t *testing.T, c *apptest.Client, pid, want string) apptest.Response {
	t.Helper()
	var page apptest.Response
	testkit.Eventually(t, 30*time.Second, "the build page to say "+want, func() error {
		if page = c.Get("/projects/" + pid); !strings.Contains(page.Body, want) {
			return fmt.Errorf("it does not")
		}
		return nil
	})
	return page
}

// A project's variables reach its running preview in place (its dev server restarted, free),
// and a sleeping one when it wakes; the history names them. A secret reaches the app's
// environment but never an answer: not the API, the build page, the version's zip or its
// files. Bad input is a 400 or a 422 naming the variable, and another founder's project a 404.
func TestVariablesReachThePreviewAndSecretsNeverLeaveSandman(t *testing.T) {
	t.Parallel()
	own := &testkit.SyncBuffer{} // Sandman's own log, every level
	s := start(t, apptest.Options{Logger: slog.New(slog.NewJSONHandler(own, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	c := s.NewClient(t)
	c.SignUp("env@example.com")
	pid, sid := c.BuildCounter()
	r, _ := postVersion(t, c, pid, map[string]any{"files": []vfile{text("server.js", envServer)}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	sb := c.WaitSandbox(sid, "running", time.Minute)
	previewSays(t, s, sb.PreviewURL, "GREETING=undefined KEYLEN=0")
	historySays(t, c, pid, "Version 2 is live") // its apply is over: the change below is one of its own
	credits := c.Credits()

	const secret = "sk-test-9d8c7b6a5f4e3d2c"
	apptest.RequireStatus(t, c.API(http.MethodPut, "/api/projects/"+pid+"/env", map[string]any{"vars": []map[string]any{
		{"name": "GREETING", "value": "hello"}, {"name": "API_KEY", "value": secret, "secret": true}, {"name": "UNUSED", "value": "x"}}}, nil),
		http.StatusNoContent)
	previewSays(t, s, sb.PreviewURL, fmt.Sprintf("GREETING=hello KEYLEN=%d", len(secret)))
	if got := c.Credits(); got != credits {
		t.Fatalf("applying variables cost %d credits", credits-got)
	}

	var listed struct {
		Vars []struct {
			Name   string
			Secret bool
			Value  *string
			Used   bool
		}
	}
	res := c.API(http.MethodGet, "/api/projects/"+pid+"/env", nil, &listed)
	apptest.RequireStatus(t, res, http.StatusOK)
	if len(listed.Vars) != 3 || listed.Vars[0].Name != "API_KEY" || !listed.Vars[0].Secret || listed.Vars[0].Value != nil ||
		!listed.Vars[0].Used || listed.Vars[1].Value == nil || *listed.Vars[1].Value != "hello" || listed.Vars[2].Used {
		t.Fatalf("listed %s", res.Body)
	}
	page := historySays(t, c, pid, "Environment changed: API_KEY, GREETING, UNUSED set")
	var logs struct{ Lines []struct{ Text string } }
	testkit.Eventually(t, 30*time.Second, "the log to hold the secret's name in its place", func() error {
		logs.Lines = nil
		apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects/"+pid+"/logs", nil, &logs), http.StatusOK)
		for _, l := range logs.Lines {
			if strings.Contains(l.Text, "starting with key [secret API_KEY]") {
				return nil
			}
		}
		return fmt.Errorf("the log: %+v", logs.Lines)
	})
	logsBody := c.Get("/api/projects/" + pid + "/logs").Body
	zipped := c.Get("/api/projects/" + pid + "/versions/2/archive")
	apptest.RequireStatus(t, zipped, http.StatusOK)
	zr, err := zip.NewReader(bytes.NewReader([]byte(zipped.Body)), int64(len(zipped.Body)))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, ".env") {
			t.Errorf("the zip holds %s", f.Name)
		}
	}
	// A project made from the downloaded zip carries no variables: they are not files.
	c.Get("/projects/new")
	r = upload(t, c, map[string]string{"name": "Copy", "start_command": "node server.js", "port": "3000"}, []upFile{{"copy.zip", zipped.Body}})
	m := projectLinkRe.FindStringSubmatch(r.Header.Get("Location"))
	if r.Status != http.StatusSeeOther || m == nil {
		t.Fatalf("upload the zip: %d %s", r.Status, r.Body)
	}
	var copied struct{ Vars []any }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects/"+m[1]+"/env", nil, &copied), http.StatusOK)
	if len(copied.Vars) != 0 {
		t.Fatalf("the copy has variables: %v", copied.Vars)
	}
	for what, body := range map[string]string{"the API's list": res.Body, "the build page": page.Body, "the zip": zipped.Body, "the log": logsBody,
		"the files": c.Get("/api/projects/" + pid + "/versions/2").Body} {
		if strings.Contains(body, secret) {
			t.Errorf("%s holds the secret", what)
		}
	}

	// Bad input, and another founder.
	for _, tt := range []struct {
		method, path string
		body         string
		status       int
		names        string
	}{
		{http.MethodPut, "/api/projects/" + pid + "/env/PORT", `{"value":"1"}`, http.StatusUnprocessableEntity, "PORT"},
		{http.MethodPut, "/api/projects/" + pid + "/env", `{"vars":[{"name":"OK","value":"1"},{"name":"LD_PRELOAD","value":"x"}]}`, http.StatusUnprocessableEntity, "LD_PRELOAD"},
		{http.MethodPut, "/api/projects/" + pid + "/env/NUL", `{"value":"a\u0000b"}`, http.StatusUnprocessableEntity, "NUL"},
		{http.MethodPut, "/api/projects/" + pid + "/env", `{"vars":`, http.StatusBadRequest, ""},
		{http.MethodPut, "/api/projects/" + pid + "/env/X", `{"value":1}`, http.StatusBadRequest, ""},
		{http.MethodDelete, "/api/projects/" + pid + "/env/NOPE", ``, http.StatusNotFound, ""},
	} {
		got := c.Do(tt.method, tt.path, strings.NewReader(tt.body), map[string]string{"Content-Type": "application/json", "X-CSRF-Token": c.CSRF()})
		if got.Status != tt.status || !strings.Contains(got.Body, tt.names) {
			t.Errorf("%s %s %s: %d %s, want %d naming %q", tt.method, tt.path, tt.body, got.Status, got.Body, tt.status, tt.names)
		}
	}
	other := s.NewClient(t)
	other.SignUp("env-other@example.com")
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		got := other.API(m, "/api/projects/"+pid+"/env/GREETING", map[string]any{"value": "x"}, nil)
		if m == http.MethodGet {
			got = other.API(m, "/api/projects/"+pid+"/env", nil, nil)
		}
		if got.Status != http.StatusNotFound {
			t.Errorf("%s by another founder: %d %s", m, got.Status, got.Body)
		}
	}

	// A sleeping preview gets a change when it wakes.
	c.Pause(sid)
	apptest.RequireStatus(t, c.API(http.MethodPut, "/api/projects/"+pid+"/env/GREETING", map[string]any{"value": "good morning"}, nil),
		http.StatusNoContent)
	apptest.RequireStatus(t, c.API(http.MethodDelete, "/api/projects/"+pid+"/env/API_KEY", nil, nil), http.StatusNoContent)
	// The change is a note in the history, never why the preview sleeps.
	page = historySays(t, c, pid, "Environment changed: API_KEY removed")
	if why := regexp.MustCompile(`data-testid="why-text">([^<]*)<`).FindStringSubmatch(page.Body); why == nil || why[1] != "Paused by you" {
		t.Fatalf("the sleeping preview's why: %q", why)
	}
	if r := c.API(http.MethodPost, "/api/sandboxes/"+sid+"/resume", nil, nil); r.Status != http.StatusAccepted && r.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.Status, r.Body)
	}
	sb = c.WaitSandbox(sid, "running", time.Minute)
	previewSays(t, s, sb.PreviewURL, "GREETING=good morning KEYLEN=0")

	// A version that prints a secret as it fails: its history line and its problem name it.
	apptest.RequireStatus(t, c.API(http.MethodPut, "/api/projects/"+pid+"/env/API_KEY", map[string]any{"value": secret, "secret": true}, nil),
		http.StatusNoContent)
	r, _ = postVersion(t, c, pid, map[string]any{"files": []vfile{text("server.js", `console.error("bad key " + process.env.API_KEY); process.exit(3);`)}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	page = historySays(t, c, pid, "Version 3 didn")
	var problems struct {
		Problems []struct{ Message, Detail string }
	}
	testkit.Eventually(t, 30*time.Second, "version 3's problem", func() error {
		apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects/"+pid+"/problems", nil, &problems), http.StatusOK)
		if len(problems.Problems) == 0 {
			return fmt.Errorf("no problem")
		}
		return nil
	})
	body := c.Get("/api/projects/" + pid + "/problems").Body
	if strings.Contains(page.Body, secret) || strings.Contains(body, secret) || !strings.Contains(page.Body+body, "bad key [secret API_KEY]") {
		t.Fatalf("a failure's output holds the secret, or not its name: %s", body)
	}
	if !strings.Contains(own.String(), "/api/projects/"+pid+"/env") || strings.Contains(own.String(), secret) {
		t.Fatal("Sandman's own log holds the secret (or logged no request of the test)")
	}
}
