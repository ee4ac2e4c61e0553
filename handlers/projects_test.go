package handlers_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sandman/app/apptest"
	"sandman/handlers"
	"sandman/versions"
)

type upFile struct {
	name    string // as the browser sends it, folder included
	content string
}

// multipartBody builds an upload form with raw filenames (mime/multipart's helpers would
// escape them the same way browsers do, which is what we want). A CSRF token, when given, is
// the first field, as the page's form sends it.
func multipartBody(t testing.TB, csrf string, fields map[string]string, files []upFile) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if csrf != "" {
		w.WriteField("_csrf", csrf)
	}
	for k, v := range fields {
		w.WriteField(k, v)
	}
	for _, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="files"; filename=%q`, f.name))
		h.Set("Content-Type", "application/octet-stream")
		pw, _ := w.CreatePart(h)
		pw.Write([]byte(f.content))
	}
	w.Close()
	return &buf, w.FormDataContentType()
}

// upload posts the new-project form with files, as the browser does.
func upload(t testing.TB, c *apptest.Client, fields map[string]string, files []upFile) apptest.Response {
	t.Helper()
	body, ct := multipartBody(t, c.CSRF(), fields, files)
	return c.Do(http.MethodPost, "/projects/upload", body, map[string]string{"Content-Type": ct})
}

var projectLinkRe = regexp.MustCompile(`^/projects/([0-9a-f-]{36})$`)

func TestCreateProjectFromStarter(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	c := b.NewClient(t)
	c.SignUp("starter@example.com")

	r := c.Get("/projects/new")
	apptest.RequireStatus(t, r, http.StatusOK)
	apptest.RequireContains(t, r.Body, `data-testid="starter-counter"`)
	apptest.RequireContains(t, r.Body, `data-testid="starter-static"`)

	r = c.PostForm("/projects", url.Values{"starter": {"counter"}})
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	m := projectLinkRe.FindStringSubmatch(r.Header.Get("Location"))
	if m == nil {
		t.Fatalf("redirect to %q", r.Header.Get("Location"))
	}
	r = c.Get("/projects/" + m[1])
	apptest.RequireStatus(t, r, http.StatusOK)
	apptest.RequireContains(t, r.Body, "<code>server.js</code>")
	apptest.RequireContains(t, r.Body, "<code>package.json</code>")
	apptest.RequireContains(t, r.Body, "<code>node server.js</code>")

	r = c.PostForm("/projects", url.Values{"starter": {"nope"}})
	apptest.RequireStatus(t, r, http.StatusUnprocessableEntity)
	apptest.RequireContains(t, r.Body, `Unknown starter &#34;nope&#34;`)

	var p struct {
		ID, Name, PauseKind string
		Port                int
	}
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": "My site", "starter": "static"}, &p), http.StatusCreated)
	if p.Name != "My site" || p.Port != 5173 || p.PauseKind != "memory" {
		t.Fatalf("created %+v", p)
	}
	var list []struct {
		ID      string
		Build   any
		Sandbox any
	}
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	if len(list) != 2 || list[0].ID != p.ID {
		t.Fatalf("list = %+v", list)
	}

	r = c.Get("/")
	apptest.RequireStatus(t, r, http.StatusOK)
	if n := strings.Count(r.Body, `data-testid="project-card"`); n != 2 {
		t.Fatalf("dashboard shows %d cards", n)
	}
	apptest.RequireContains(t, r.Body, "My site")
	apptest.RequireContains(t, r.Body, "Not built yet")
}

// The dashboard and the API's list show every project, newest first, each built one with its
// sandbox, whether all, some or none were built, and the dashboard's header the balance as it
// is after each build (the page reads all of it in one query when every project was built,
// lifecycle.Projects; the session does not read the balance for it).
func TestProjectListShowsBuiltAndUnbuiltProjectsAndTheBalance(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	c := b.NewClient(t)
	c.SignUp("some-built@example.com")
	var ids []string // oldest first
	for _, name := range []string{"First", "Second", "Third"} {
		var p struct{ ID string }
		apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"name": name, "starter": "counter"}, &p), http.StatusCreated)
		ids = append(ids, p.ID)
	}
	sandboxes := map[string]string{} // project → sandbox
	check := func(when string) {
		t.Helper()
		var list []struct {
			ID      string
			Sandbox *struct{ ID string }
		}
		apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
		var got, want []string
		for _, p := range list {
			sb := ""
			if p.Sandbox != nil {
				sb = p.Sandbox.ID
			}
			got = append(got, p.ID+" "+sb)
		}
		for i := range ids {
			id := ids[len(ids)-1-i]
			want = append(want, id+" "+sandboxes[id])
		}
		if g, w := strings.Join(got, "; "), strings.Join(want, "; "); g != w {
			t.Fatalf("%s: GET /api/projects lists (project sandbox) %s, want %s", when, g, w)
		}
		page := c.Get("/").Body
		var cards []string
		for _, m := range regexp.MustCompile(`id="card-([0-9a-f-]{36})"`).FindAllStringSubmatch(page, -1) {
			cards = append(cards, m[1])
		}
		for i := range ids {
			if i >= len(cards) || cards[i] != ids[len(ids)-1-i] {
				t.Fatalf("%s: the dashboard's cards are %v, want the projects newest first", when, cards)
			}
		}
		if n := strings.Count(page, "Not built yet"); n != len(ids)-len(sandboxes) {
			t.Fatalf("%s: %d cards say Not built yet, want %d", when, n, len(ids)-len(sandboxes))
		}
		if got, want := apptest.ByTestID(t, page, "credits").Text, fmt.Sprintf("%d credits", c.Credits()); got != want {
			t.Fatalf("%s: the dashboard's header says %q, want %q", when, got, want)
		}
	}
	check("none built")
	for _, i := range []int{1, 0, 2} {
		var res struct{ Sandbox struct{ ID string } }
		apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+ids[i]+"/builds", map[string]string{"idempotencyKey": ids[i]}, &res), http.StatusAccepted)
		sandboxes[ids[i]] = res.Sandbox.ID
		check(fmt.Sprintf("%d of %d built", len(sandboxes), len(ids)))
	}
}

// A dashboard that fails answers with the error page, whose header shows the founder and the
// balance as every page's does: the dashboard reads the balance with its projects (ownBalance),
// so its error page reads it then.
func TestFailedDashboardsErrorPageShowsTheBalance(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	c := b.NewClient(t)
	c.SignUp("failed-dashboard@example.com")
	newCounter(t, c)
	// The dashboard's statement reads the view project_states; the balance's does not. (The
	// test's own database. A table renamed would not do: the view follows it.)
	if _, err := b.Pool().Exec(t.Context(), "ALTER VIEW project_states RENAME TO project_states_hidden"); err != nil {
		t.Fatal(err)
	}
	r := c.Get("/")
	apptest.RequireStatus(t, r, http.StatusInternalServerError)
	if got, want := apptest.ByTestID(t, r.Body, "credits").Text, fmt.Sprintf("%d credits", c.Credits()); got != want {
		t.Fatalf("the failed dashboard's error page says %q in its header, want %q", got, want)
	}
}

func TestUploadProject(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	c := b.NewClient(t)
	c.SignUp("upload@example.com")
	c.Get("/projects/new")
	settings := map[string]string{"name": "Uploaded", "start_command": "node index.js", "port": "8080", "pause_kind": "filesystem"}

	// A folder upload: the browser prefixes every path with the folder's name, which is dropped.
	r := upload(t, c, settings, []upFile{{"myapp/index.js", "require('http')"}, {"myapp/lib/util.js", "x"}})
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	page := c.Get(r.Header.Get("Location"))
	apptest.RequireContains(t, page.Body, "<code>index.js</code>")
	apptest.RequireContains(t, page.Body, "<code>lib/util.js</code>")
	apptest.RequireContains(t, page.Body, "Files only")

	// A zip archive.
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, _ := zw.Create("site/server.js")
	w.Write([]byte("// server"))
	zw.Close()
	r = upload(t, c, map[string]string{"name": "Zipped", "start_command": "node server.js", "port": "3000"}, []upFile{{"site.zip", zbuf.String()}})
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	apptest.RequireContains(t, c.Get(r.Header.Get("Location")).Body, "<code>server.js</code>")

	// A rejected upload names each bad file, keeps what was typed and stores nothing.
	r = upload(t, c, map[string]string{"name": "Bad", "start_command": "", "port": "eighty"},
		[]upFile{{"../escape.js", "x"}, {"/etc/passwd", "x"}, {"good.js", "x"}})
	apptest.RequireStatus(t, r, http.StatusUnprocessableEntity)
	apptest.RequireContains(t, r.Body, `data-testid="file-errors"`)
	apptest.RequireContains(t, r.Body, "<code>../escape.js</code>")
	apptest.RequireContains(t, r.Body, "<code>/etc/passwd</code>")
	apptest.RequireContains(t, r.Body, `data-testid="err-start_command"`)
	apptest.RequireContains(t, r.Body, `data-testid="err-port"`)
	apptest.RequireContains(t, r.Body, `value="Bad"`)
	apptest.RequireContains(t, r.Body, "nothing was stored")

	var list []struct{ Name string }
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	if len(list) != 2 {
		t.Fatalf("have %d projects after one rejected upload, want 2: %+v", len(list), list)
	}

	// Over the size limit: a clear 413, nothing stored.
	big := strings.Repeat("x", 21<<20)
	r = upload(t, c, settings, []upFile{{"big.bin", big}})
	apptest.RequireStatus(t, r, http.StatusRequestEntityTooLarge)
	apptest.RequireContains(t, r.Body, "larger than 21 MiB, the limit")
	apptest.RequireStatus(t, c.API(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	if len(list) != 2 {
		t.Fatalf("have %d projects after an oversized upload", len(list))
	}
}

// FuzzUpload sends the upload whatever body the fuzzer makes: never a 5xx; a 303 stores one
// project whose every file has a valid path (versions.CheckPath), and any other answer stores
// nothing.
func FuzzUpload(f *testing.F) {
	body, ct := multipartBody(f, "", map[string]string{"name": "n", "start_command": "s", "port": "1"}, []upFile{{"a/b.js", "x"}})
	f.Add(body.Bytes(), ct)
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"files\"; filename=\"../../x\"\r\n\r\nhi\r\n--x--\r\n"), "multipart/form-data; boundary=x")
	body, ct = multipartBody(f, "", map[string]string{"name": "n", "start_command": "s", "port": "1"}, []upFile{{"ok.js", "x"}, {"../up.js", "x"}})
	f.Add(body.Bytes(), ct)
	b := webOnly(f)
	logged := b.NewClient(f)
	logged.SignUp("fuzz@example.com")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		c := logged.For(t)
		projectsBefore := b.count(t, "SELECT count(*) FROM projects")
		files := b.count(t, "SELECT count(*) FROM version_files")
		// The token in the header, as a script sends it: the body is the fuzzer's.
		r := c.Do(http.MethodPost, "/projects/upload", bytes.NewReader(body), map[string]string{"Content-Type": contentType, "X-CSRF-Token": c.CSRF()})
		if r.Status >= 500 {
			t.Fatalf("status %d for %q: %s", r.Status, body, r.Body)
		}
		newProjects := b.count(t, "SELECT count(*) FROM projects") - projectsBefore
		if r.Status != http.StatusSeeOther {
			if newFiles := b.count(t, "SELECT count(*) FROM version_files") - files; newProjects != 0 || newFiles != 0 {
				t.Fatalf("answered %d but stored %d projects and %d files", r.Status, newProjects, newFiles)
			}
			return
		}
		if newProjects != 1 {
			t.Fatalf("answered 303 but stored %d projects", newProjects)
		}
		id := strings.TrimPrefix(r.Header.Get("Location"), "/projects/")
		rows, err := b.Pool().Query(context.Background(), "SELECT path FROM version_files WHERE project_id = $1", id)
		if err != nil {
			t.Fatalf("the 303's project %q: %v", r.Header.Get("Location"), err)
		}
		paths, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) == 0 {
			t.Fatalf("the project the 303 names (%s) has no files", r.Header.Get("Location"))
		}
		for _, p := range paths {
			if err := versions.CheckPath(p); err != nil {
				t.Fatalf("stored a file whose path is invalid, %q: %v", p, err)
			}
		}
	})
}

// Only a page the founder opens asks the provider about a stale sandbox; rendering the same
// card for the live feed (a NOTIFY, a reconnect's snapshot) reads and nothing more.
func TestOnlyOpeningAPageQueuesAVerification(t *testing.T) {
	t.Parallel()
	s := webOnly(t) // no workers: queued jobs stay in the table to be counted
	c := s.NewClient(t)
	c.SignUp("verify@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	var built struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "k"}, &built), http.StatusAccepted)
	ctx := context.Background()
	// Fixture: a running sandbox never verified, as a build leaves it before any check.
	var owner uuid.UUID
	if err := s.Pool().QueryRow(ctx, `UPDATE sandboxes SET status = 'running', provider_id = 'i-fixture', last_verified_at = NULL
		WHERE id = $1 RETURNING owner_id`, built.Sandbox.ID).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	verifies := func() int {
		return s.count(t, "SELECT count(*) FROM river_job WHERE kind = 'verify' AND args->>'sandbox_id' = $1", built.Sandbox.ID)
	}

	if _, err := handlers.RenderSandbox(s.Lifecycle(), s.Overview())(ctx, owner, uuid.MustParse(built.Sandbox.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := handlers.RenderSnapshot(s.Lifecycle(), s.Overview())(ctx, owner); err != nil {
		t.Fatal(err)
	}
	if n := verifies(); n != 0 {
		t.Fatalf("rendering for the live feed queued %d verifications", n)
	}
	apptest.RequireStatus(t, c.Get("/projects/"+p.ID), http.StatusOK)
	if n := verifies(); n != 1 {
		t.Fatalf("opening the build page of a stale sandbox queued %d verifications, want 1", n)
	}
	// Verified a moment ago: opening the dashboard asks nothing more.
	if _, err := s.Pool().Exec(ctx, "UPDATE sandboxes SET last_verified_at = now() WHERE id = $1", built.Sandbox.ID); err != nil {
		t.Fatal(err)
	}
	apptest.RequireStatus(t, c.Get("/"), http.StatusOK)
	if n := verifies(); n != 1 {
		t.Fatalf("opening the dashboard of a fresh sandbox queued more: %d verifications", n)
	}
}

// The upload page keeps a file's executable bit, as the API does: a zip's run.sh, under the
// folder the page drops, is stored executable, whether it makes a project or a new version.
func TestTheUploadPageKeepsExecutableBits(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	c := b.NewClient(t)
	c.SignUp("exec-bits@example.com")
	c.Get("/projects/new")
	zipped := func(marker string) string {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, f := range []struct {
			name string
			mode fs.FileMode
		}{{"myapp/run.sh", 0o755}, {"myapp/index.js", 0o644}} {
			h := &zip.FileHeader{Name: f.name, Method: zip.Store}
			h.SetMode(f.mode)
			w, err := zw.CreateHeader(h)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(w, "%s %s\n", f.name, marker)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	r := upload(t, c, map[string]string{"name": "Scripted", "start_command": "./run.sh", "port": "3000"}, []upFile{{"app.zip", zipped("first")}})
	apptest.RequireStatus(t, r, http.StatusSeeOther)
	m := projectLinkRe.FindStringSubmatch(r.Header.Get("Location"))
	if m == nil {
		t.Fatalf("the upload went to %q, not a project", r.Header.Get("Location"))
	}
	pid := m[1]
	body, ct := multipartBody(t, c.CSRF(), map[string]string{"base": "1", "message": "again"}, []upFile{{"app.zip", zipped("second")}})
	apptest.RequireStatus(t, c.Do(http.MethodPost, "/projects/"+pid+"/versions", body, map[string]string{"Content-Type": ct}), http.StatusSeeOther)

	for _, n := range []int{1, 2} {
		var v struct {
			Files []struct {
				Path       string
				Executable bool
			}
		}
		apptest.RequireStatus(t, c.API(http.MethodGet, fmt.Sprintf("/api/projects/%s/versions/%d", pid, n), nil, &v), http.StatusOK)
		got := map[string]bool{}
		for _, f := range v.Files {
			got[f.Path] = f.Executable
		}
		if want := map[string]bool{"run.sh": true, "index.js": false}; !maps.Equal(got, want) {
			t.Fatalf("version %d's files and executable bits are %v, want %v", n, got, want)
		}
	}
}
