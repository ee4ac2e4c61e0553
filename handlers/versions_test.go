package handlers_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
	"sandman/versions"
)

// version is the JSON API's view of a version.
type version struct {
	Number, FileCount       int32
	Parent, RestoredFrom    *int32
	Source, Message         string
	Added, Changed, Removed int32
	Files                   []struct {
		Path, SHA256 string
		Size         int64
	}
}

type versionAnswer struct {
	Version             version
	Unchanged, Replayed bool
	Current             version
	Code, Error         string
	Fields              map[string]string
}

// postVersion sends POST /api/projects/{id}/versions with a JSON body and optional headers.
func postVersion(t testing.TB, c *apptest.Client, projectID string, body any, header map[string]string) (apptest.Response, versionAnswer) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"X-CSRF-Token": c.CSRF(), "Content-Type": "application/json"}
	for k, v := range header {
		h[k] = v
	}
	r := c.Do(http.MethodPost, "/api/projects/"+projectID+"/versions", bytes.NewReader(b), h)
	var out versionAnswer
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal([]byte(r.Body), &out); err != nil {
			t.Fatalf("decode %s: %v", r.Body, err)
		}
	}
	return r, out
}

type vfile map[string]any

func text(path, content string) vfile { return vfile{"path": path, "content": content} }

// newCounter creates a Counter project (version 1) through the API and returns its id.
func newCounter(t testing.TB, c *apptest.Client) string {
	t.Helper()
	var p struct {
		ID             string
		CurrentVersion int32
	}
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": "Counter", "starter": "counter"}, &p), http.StatusCreated)
	if p.CurrentVersion != 1 {
		t.Fatalf("a new project is at version %d, want 1", p.CurrentVersion)
	}
	return p.ID
}

// fileOf reads one file of a version through the API.
func fileOf(t testing.TB, c *apptest.Client, projectID string, n int, path string) apptest.Response {
	t.Helper()
	return c.Do(http.MethodGet, fmt.Sprintf("/api/projects/%s/versions/%d/files/%s", projectID, n, path), nil, nil)
}

// Versions through the JSON API: made over the current version, numbered, unchanged requests
// answered with the current one, a stale base refused with the current one, read back whole,
// file by file and as a zip, restored as a new version (whole or a path), and another
// founder's project not found.
func TestVersionsAPI(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("versions@example.com")
	pid := newCounter(t, c)

	r, a := postVersion(t, c, pid, map[string]any{"message": "Say hello", "base": 1,
		"files": []vfile{text("hello.txt", "hello\n"), {"path": "bin/run", "base64": base64.StdEncoding.EncodeToString([]byte{0, 1, 2}), "executable": true}}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	if v := a.Version; v.Number != 2 || v.Parent == nil || *v.Parent != 1 || v.Added != 2 || v.Changed != 0 || v.Removed != 0 || v.Source != "api" || v.Message != "Say hello" {
		t.Fatalf("version 2 = %+v", v)
	}
	r, a = postVersion(t, c, pid, map[string]any{"files": []vfile{text("hello.txt", "hello\n")}}, nil)
	apptest.RequireStatus(t, r, http.StatusOK)
	if !a.Unchanged || a.Version.Number != 2 {
		t.Fatalf("a request that changes nothing: %+v, want version 2 unchanged", a)
	}
	r, a = postVersion(t, c, pid, map[string]any{"base": 1, "files": []vfile{text("hello.txt", "bonjour\n")}}, nil)
	apptest.RequireStatus(t, r, http.StatusConflict)
	if a.Code != "version_conflict" || a.Current.Number != 2 {
		t.Fatalf("a stale base: %+v, want version_conflict naming version 2", a)
	}
	r, a = postVersion(t, c, pid, map[string]any{"base": 2, "files": []vfile{text("hello.txt", "bonjour\n")}, "delete": []string{"bin/run"}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	if v := a.Version; v.Number != 3 || v.Changed != 1 || v.Removed != 1 {
		t.Fatalf("version 3 = %+v", v)
	}

	var one version
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects/"+pid+"/versions/2", nil, &one), http.StatusOK)
	sum := sha256.Sum256([]byte("hello\n"))
	found := false
	for _, f := range one.Files {
		if f.Path == "hello.txt" {
			found = f.Size == 6 && f.SHA256 == fmt.Sprintf("%x", sum)
		}
	}
	if !found {
		t.Fatalf("version 2's manifest lacks hello.txt with its size and digest: %+v", one.Files)
	}
	f := fileOf(t, c, pid, 2, "hello.txt")
	apptest.RequireStatus(t, f, http.StatusOK)
	if f.Body != "hello\n" || !strings.HasPrefix(f.Header.Get("Content-Disposition"), "attachment") || f.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("a file's bytes: %q, %v; want its content as a nosniff attachment", f.Body, f.Header)
	}
	apptest.RequireStatus(t, fileOf(t, c, pid, 3, "bin/run"), http.StatusNotFound)

	z := c.Do(http.MethodGet, "/api/projects/"+pid+"/versions/2/archive", nil, nil)
	apptest.RequireStatus(t, z, http.StatusOK)
	zr, err := zip.NewReader(strings.NewReader(z.Body), int64(len(z.Body)))
	if err != nil {
		t.Fatal(err)
	}
	inZip := map[string]string{}
	for _, zf := range zr.File {
		rc, _ := zf.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		inZip[zf.Name] = string(b)
		if zf.Name == "bin/run" && zf.Mode()&0o100 == 0 {
			t.Errorf("bin/run lost its executable bit in the zip: %v", zf.Mode())
		}
	}
	if inZip["hello.txt"] != "hello\n" || inZip["bin/run"] != "\x00\x01\x02" || len(inZip) != int(one.FileCount) {
		t.Fatalf("the archive of version 2 holds %d files: %q", len(inZip), inZip)
	}

	// Restore version 2 whole: version 4, with version 2's files.
	var restored versionAnswer
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+pid+"/versions/2/restore", nil, &restored), http.StatusCreated)
	if v := restored.Version; v.Number != 4 || v.Source != "restore" || v.RestoredFrom == nil || *v.RestoredFrom != 2 {
		t.Fatalf("restore of version 2: %+v", v)
	}
	if f := fileOf(t, c, pid, 4, "hello.txt"); f.Body != "hello\n" {
		t.Fatalf("version 4's hello.txt is %q, want version 2's", f.Body)
	}
	// One path from version 3: version 5 has version 3's hello.txt and still version 2's bin/run.
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+pid+"/versions/3/restore", map[string]any{"paths": []string{"hello.txt"}}, &restored), http.StatusCreated)
	if restored.Version.Number != 5 || fileOf(t, c, pid, 5, "hello.txt").Body != "bonjour\n" || fileOf(t, c, pid, 5, "bin/run").Status != http.StatusOK {
		t.Fatalf("restoring one path: %+v", restored.Version)
	}
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+pid+"/versions/99/restore", nil, nil), http.StatusNotFound)

	var list struct {
		Versions   []version
		Current    int32
		NextBefore *int32
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects/"+pid+"/versions?limit=2", nil, &list), http.StatusOK)
	if list.Current != 5 || len(list.Versions) != 2 || list.Versions[0].Number != 5 || list.NextBefore == nil || *list.NextBefore != 4 {
		t.Fatalf("the first page: %+v", list)
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, fmt.Sprintf("/api/projects/%s/versions?before=%d", pid, *list.NextBefore), nil, &list), http.StatusOK)
	if len(list.Versions) != 3 || list.Versions[0].Number != 3 || list.NextBefore != nil {
		t.Fatalf("the last page: %+v", list)
	}
	var projects []struct {
		ID             string
		CurrentVersion int32
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &projects), http.StatusOK)
	if len(projects) != 1 || projects[0].CurrentVersion != 5 {
		t.Fatalf("GET /api/projects: %+v, want currentVersion 5", projects)
	}

	other := s.NewClient(t)
	other.SignUp("other-versions@example.com")
	for _, path := range []string{"/versions", "/versions/1", "/versions/1/archive", "/versions/1/files/package.json"} {
		apptest.RequireStatus(t, other.Do(http.MethodGet, "/api/projects/"+pid+path, nil, nil), http.StatusNotFound)
	}
	r, _ = postVersion(t, other, pid, map[string]any{"files": []vfile{text("x", "y")}}, nil)
	apptest.RequireStatus(t, r, http.StatusNotFound)
	apptest.RequireStatus(t, other.API(http.MethodPost, "/api/projects/"+pid+"/versions/1/restore", nil, nil), http.StatusNotFound)
}

// Every bad input gets a clear error naming the file, and stores nothing.
func TestVersionsRefuseBadInput(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("bad-versions@example.com")
	pid := newCounter(t, c)
	long := strings.Repeat("a", 256)
	tests := []struct {
		name   string
		body   string
		status int
		field  string // the field the answer must name
		says   string
	}{
		{"dot-dot", `{"files":[{"path":"../x","content":"x"}]}`, 422, "file:../x", ".."},
		{"absolute", `{"files":[{"path":"/etc/x","content":"x"}]}`, 422, "file:/etc/x", "bsolute"},
		{"backslash", `{"files":[{"path":"a\\b","content":"x"}]}`, 422, `file:a\b`, `"/"`},
		{"NUL", `{"files":[{"path":"a\u0000b","content":"x"}]}`, 422, "file:a\x00b", "control"},
		{"control", `{"files":[{"path":"a\u0007b","content":"x"}]}`, 422, "file:a\ab", "control"},
		{"too long", `{"files":[{"path":"` + long + `","content":"x"}]}`, 422, "file:" + long, "255"},
		{"file and folder", `{"files":[{"path":"lib","content":"x"},{"path":"lib/a.js","content":"y"}]}`, 422, "file:lib", "both a file and a folder"},
		{"file over a stored folder", `{"files":[{"path":"server.js/x","content":"y"}]}`, 422, "file:server.js", "both a file and a folder"},
		{"duplicate", `{"files":[{"path":"a","content":"x"},{"path":"a","content":"y"}]}`, 422, "file:a", "twice"},
		{"invalid base64", `{"files":[{"path":"img.png","base64":"!!!"}]}`, 422, "file:img.png", "base64"},
		{"both content and base64", `{"files":[{"path":"a","content":"x","base64":"eA=="}]}`, 422, "file:a", "either"},
		{"delete what is not there", `{"delete":["nope.js"]}`, 422, "file:nope.js", "no such file"},
		{"a message too long", `{"message":"` + strings.Repeat("m", 501) + `","files":[{"path":"a","content":"x"}]}`, 422, "message", "500"},
		{"an unknown field", `{"files":[],"mesage":"typo"}`, 400, "", "mesage"},
		{"not JSON", `{"files":`, 400, "", "not valid JSON"},
	}
	before := s.count(t, "SELECT count(*) FROM versions") + s.count(t, "SELECT count(*) FROM blobs")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.Do(http.MethodPost, "/api/projects/"+pid+"/versions", strings.NewReader(tt.body),
				map[string]string{"X-CSRF-Token": c.CSRF(), "Content-Type": "application/json"})
			apptest.RequireStatus(t, r, tt.status)
			var out struct {
				Error  string
				Fields map[string]string
			}
			if err := json.Unmarshal([]byte(r.Body), &out); err != nil {
				t.Fatal(err)
			}
			msg := out.Error
			if tt.field != "" {
				msg = out.Fields[tt.field]
			}
			if !strings.Contains(msg, tt.says) {
				t.Fatalf("the answer %s does not say %q for %q", r.Body, tt.says, tt.field)
			}
		})
	}
	if after := s.count(t, "SELECT count(*) FROM versions") + s.count(t, "SELECT count(*) FROM blobs"); after != before {
		t.Fatalf("refused requests stored something: %d rows, then %d", before, after)
	}
}

// An Idempotency-Key makes a retry safe: the same key and body answer the first answer again,
// another body with it is refused, and a key whose first request still runs is a 409.
func TestVersionsIdempotencyKey(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("keys@example.com")
	pid := newCounter(t, c)
	body := map[string]any{"files": []vfile{text("a.txt", "one")}}
	key := map[string]string{"Idempotency-Key": "k-1"}
	r, first := postVersion(t, c, pid, body, key)
	apptest.RequireStatus(t, r, http.StatusCreated)
	r, again := postVersion(t, c, pid, body, key)
	apptest.RequireStatus(t, r, http.StatusCreated)
	if !again.Replayed || again.Version.Number != first.Version.Number || first.Replayed {
		t.Fatalf("the retry answered %+v after %+v; want the first answer again, replayed", again, first)
	}
	r, other := postVersion(t, c, pid, map[string]any{"files": []vfile{text("a.txt", "two")}}, key)
	apptest.RequireStatus(t, r, http.StatusUnprocessableEntity)
	if other.Code != "key_reused" {
		t.Fatalf("another body with the key: %+v", other)
	}
	// A first request still under way holds its key: claimed for this very request (its
	// content type, query and body), not finished.
	raw, _ := json.Marshal(body)
	sum := sha256.Sum256(append([]byte("application/json\n\n"), raw...))
	if _, err := s.Pool().Exec(t.Context(), `INSERT INTO version_keys (owner_id, key, project_id, request_sha256)
		SELECT owner_id, 'k-2', id, $2 FROM projects WHERE id = $1`, pid, sum[:]); err != nil {
		t.Fatal(err)
	}
	r, inFlight := postVersion(t, c, pid, body, map[string]string{"Idempotency-Key": "k-2"})
	apptest.RequireStatus(t, r, http.StatusConflict)
	if inFlight.Code != "key_in_flight" {
		t.Fatalf("a key in flight: %s", r.Body)
	}
	if n := s.count(t, "SELECT count(*) FROM versions WHERE project_id = $1", pid); n != 2 {
		t.Fatalf("%d versions after one version and its retries, want 2", n)
	}
}

// Ten writers on the same base at once: exactly one makes the next version, the others are
// told the current one.
func TestConcurrentWritersOneWinsEachNumber(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("writers@example.com")
	pid := newCounter(t, c)
	var wg sync.WaitGroup
	statuses := make([]int, 10)
	for i := range statuses {
		wg.Go(func() {
			r, _ := postVersion(t, c, pid, map[string]any{"base": 1, "files": []vfile{text("w.txt", fmt.Sprint("writer ", i))}}, nil)
			statuses[i] = r.Status
		})
	}
	wg.Wait()
	won, lost := 0, 0
	for _, st := range statuses {
		switch st {
		case http.StatusCreated:
			won++
		case http.StatusConflict:
			lost++
		}
	}
	if won != 1 || lost != 9 {
		t.Fatalf("statuses %v: want one 201 and nine 409", statuses)
	}
}

// A zip body is the whole set of files, like replace.
func TestVersionFromZipBody(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("zip-versions@example.com")
	pid := newCounter(t, c)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("server.js")
	w.Write([]byte("require('http').createServer((q, s) => s.end('zipped')).listen(3000)"))
	zw.Close()
	r := c.Do(http.MethodPost, "/api/projects/"+pid+"/versions?message=from+a+zip", &buf,
		map[string]string{"X-CSRF-Token": c.CSRF(), "Content-Type": "application/zip"})
	apptest.RequireStatus(t, r, http.StatusCreated)
	var a versionAnswer
	if err := json.Unmarshal([]byte(r.Body), &a); err != nil {
		t.Fatal(err)
	}
	if v := a.Version; v.Number != 2 || v.FileCount != 1 || v.Removed == 0 || v.Message != "from a zip" {
		t.Fatalf("the zip's version: %+v", v)
	}
}

// The card and the pane say which version runs and which waits: a sleeping preview's newest
// version waits for it to wake, and a version that did not start is shown with what it
// printed and a button that restores the one before it.
func TestPaneSaysWhichVersionRunsAndWaits(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("pane-versions@example.com")
	pid := newCounter(t, c)
	s.forceState(t, c, pid, forcedStates[3]) // sleeping on a memory snapshot, on version 1
	r, _ := postVersion(t, c, pid, map[string]any{"files": []vfile{text("a.txt", "two")}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	page := c.Get("/projects/" + pid)
	if got := apptest.ByTestID(t, page.Body, "version-waiting").Text; got != "Version 2 is waiting: it goes live when the preview wakes." {
		t.Fatalf("the pane says %q", got)
	}
	dash := c.Get("/")
	if live, waiting := apptest.ByTestID(t, dash.Body, "version-live").Text, apptest.ByTestID(t, dash.Body, "version-waiting").Text; live != "v1" || waiting != "v2 waiting" {
		t.Fatalf("the card says %q, %q; want v1, v2 waiting", live, waiting)
	}
	var sb struct {
		ID             string
		Version        int32
		PendingVersion *int32
	}
	var projects []struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &projects), http.StatusOK)
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/sandboxes/"+projects[0].Sandbox.ID, nil, &sb), http.StatusOK)
	if sb.Version != 1 || sb.PendingVersion == nil || *sb.PendingVersion != 2 {
		t.Fatalf("GET /api/sandboxes: version %d, pending %v; want 1 and 2", sb.Version, sb.PendingVersion)
	}

	// Running on version 2, which did not start.
	if _, err := s.Pool().Exec(t.Context(), `UPDATE sandboxes SET status = 'running', deployed_version_id = (SELECT id FROM versions WHERE project_id = $1 AND number = 2)
		WHERE project_id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(t.Context(), `INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, version_number, output)
		SELECT id, 'running', 'running', 'user', 'version_failed', 2, 'Error: broken on purpose' FROM sandboxes WHERE project_id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	page = c.Get("/projects/" + pid)
	failed := apptest.ByTestID(t, page.Body, "version-failed")
	if !strings.Contains(failed.Text, "Version 2 didn't start: Error: broken on purpose") {
		t.Fatalf("the pane says %q", failed.Text)
	}
	if got := apptest.ByTestID(t, page.Body, "restore-previous").Text; got != "Restore version 1" {
		t.Fatalf("the button reads %q", got)
	}
	apptest.RequireStatus(t, c.PostForm("/projects/"+pid+"/versions/1/restore", url.Values{}), http.StatusSeeOther)
	if f := fileOf(t, c, pid, 3, "a.txt"); f.Status != http.StatusNotFound {
		t.Fatalf("version 3 is not version 1 restored: a.txt answers %d", f.Status)
	}
}

// A refusal's size never grows with what was sent: a delete list longer than a version can hold
// is refused whole, before any path of it is checked, and a refusal names at most
// versions.MaxFileErrors files and counts the rest.
func TestARefusalStaysSmallWhateverTheListHolds(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("long-lists@example.com")
	pid := newCounter(t, c)
	paths := func(n int, format string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf(format, i)
		}
		return out
	}
	tests := []struct {
		name      string
		body      map[string]any
		field     string // the field that explains the refusal
		says      string
		fileNamed int // how many "file:" fields the answer holds
	}{
		{"a delete list past the file limit", map[string]any{"delete": paths(100_000, "../gone-%d")},
			"delete", "at most 500 paths; this one lists 100000", 0},
		{"a delete list at the limit, every path missing", map[string]any{"delete": paths(versions.MaxFiles, "missing-%d.js")},
			"files", "the first 20 are listed, and 480 more", versions.MaxFileErrors},
		{"many bad files", map[string]any{"files": func() []vfile {
			var fs []vfile
			for _, p := range paths(300, "../bad-%d") {
				fs = append(fs, text(p, "x"))
			}
			return fs
		}()}, "files", "the first 20 are listed, and 280 more", versions.MaxFileErrors},
	}
	before := s.count(t, "SELECT count(*) FROM versions")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, a := postVersion(t, c, pid, tt.body, nil)
			apptest.RequireStatus(t, r, http.StatusUnprocessableEntity)
			if !strings.Contains(a.Fields[tt.field], tt.says) {
				t.Fatalf("fields[%q] = %q, want it to say %q", tt.field, a.Fields[tt.field], tt.says)
			}
			named := 0
			for k := range a.Fields {
				if strings.HasPrefix(k, "file:") {
					named++
				}
			}
			if named != tt.fileNamed {
				t.Fatalf("the answer names %d files, want %d", named, tt.fileNamed)
			}
			if len(r.Body) > 8<<10 {
				t.Fatalf("the answer is %d bytes: it grows with the list", len(r.Body))
			}
		})
	}
	t.Run("a restore list past the file limit", func(t *testing.T) {
		body, err := json.Marshal(map[string]any{"paths": paths(versions.MaxFiles+100, "gone-%d.js")})
		if err != nil {
			t.Fatal(err)
		}
		r := c.Do(http.MethodPost, "/api/projects/"+pid+"/versions/1/restore", bytes.NewReader(body),
			map[string]string{"X-CSRF-Token": c.CSRF(), "Content-Type": "application/json"})
		apptest.RequireStatus(t, r, http.StatusUnprocessableEntity)
		if !strings.Contains(string(r.Body), "at most 500 paths; this one lists 600") {
			t.Fatalf("the answer does not say what the limit is: %s", r.Body)
		}
		if len(r.Body) > 8<<10 {
			t.Fatalf("the answer is %d bytes: it grows with the list", len(r.Body))
		}
	})
	if after := s.count(t, "SELECT count(*) FROM versions"); after != before {
		t.Fatalf("refused requests stored versions: %d, then %d", before, after)
	}
}

// A version whose stored content is missing is never served short: its file and its archive
// answer 500, never a 200 without the file; the page of its changes too.
func TestAVersionWithMissingContentIsNeverServedShort(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("missing-content@example.com")
	pid := newCounter(t, c)
	r, _ := postVersion(t, c, pid, map[string]any{"files": []vfile{text("kept.txt", "kept\n"), text("gone.txt", "lost content 27\n")}}, nil)
	apptest.RequireStatus(t, r, http.StatusCreated)
	if _, err := s.Pool().Exec(context.Background(), `DELETE FROM blobs WHERE content = convert_to(E'lost content 27\n', 'UTF8')`); err != nil {
		t.Fatal(err)
	}
	apptest.RequireStatus(t, fileOf(t, c, pid, 2, "kept.txt"), http.StatusOK)
	for _, path := range []string{"/api/projects/" + pid + "/versions/2/files/gone.txt", "/api/projects/" + pid + "/versions/2/archive",
		"/projects/" + pid + "/versions/2"} {
		if r := c.Do(http.MethodGet, path, nil, nil); r.Status != http.StatusInternalServerError {
			t.Errorf("GET %s with a file's content missing: %d (%d bytes), want 500", path, r.Status, len(r.Body))
		}
	}
	testkit.Record(t, testkit.Scenario{ID: "content-missing", Times: 3,
		Injected: "a version's stored content of one file deleted under it; its file, its archive and its changes page read",
		Result:   "500 each, never a 200 without the file; another file of the version still served"})
}

// The page of a version whose every file changed whole stays small and cheap: 78 files of
// 131,071 lines replaced by 131,071 others (once 675 MB of HTML and 52 s) give a page within
// 2 MiB that folds the rest behind the archive, allocating a bounded amount to make it.
func TestAHugeChangeMakesABoundedPage(t *testing.T) {
	t.Parallel()
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("huge-diff@example.com")
	pid := newCounter(t, c)
	const files, lines = 78, 131071
	for _, line := range []string{"a\n", "b\n"} {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		content := []byte(strings.Repeat(line, lines))
		for i := range files {
			w, err := zw.Create(fmt.Sprintf("f%02d.txt", i))
			if err != nil {
				t.Fatal(err)
			}
			w.Write(content)
		}
		zw.Close()
		r := c.Do(http.MethodPost, "/api/projects/"+pid+"/versions", &buf, map[string]string{"X-CSRF-Token": c.CSRF(), "Content-Type": "application/zip"})
		apptest.RequireStatus(t, r, http.StatusCreated)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	r := c.Do(http.MethodGet, "/projects/"+pid+"/versions/3", nil, nil)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	apptest.RequireStatus(t, r, http.StatusOK)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("version 3's page: %d bytes in %v, %.1f MiB allocated", len(r.Body), took, float64(allocated)/(1<<20))
	if len(r.Body) > 2<<20 {
		t.Errorf("version 3's page is %d bytes, want at most 2 MiB", len(r.Body))
	}
	if !strings.Contains(r.Body, "This change is too large to show here") || !strings.Contains(r.Body, "/versions/3/archive") {
		t.Errorf("version 3's page does not fold the rest behind the archive")
	}
	// The content read and diffed is bounded (versions.MaxPageReadBytes): a few times that, not
	// the 78 files' 40 MB read, 20 million lines diffed and 675 MB of HTML.
	if allocated > 64<<20 {
		t.Errorf("making version 3's page allocated %.1f MiB, want at most 64", float64(allocated)/(1<<20))
	}
	testkit.Record(t, testkit.Scenario{ID: "diff-page-huge", Times: 1,
		Injected: `a version's changes page where 78 files of "a\n" × 131,071 became "b\n" × 131,071 (two zips of about 40 KB)`,
		Result:   "200 within 2 MiB, the rest folded behind the version's archive; allocated to make it ≤ 64 MiB"})
}
