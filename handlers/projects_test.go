package handlers_test

import (
	"archive/zip"
	"bytes"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

type upFile struct {
	name    string // as the browser sends it, folder included
	content string
}

// multipartBody builds an upload form with raw filenames (mime/multipart's helpers would
// escape them the same way browsers do, which is what we want).
func multipartBody(t testing.TB, fields map[string]string, files []upFile) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
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

func (c *client) upload(fields map[string]string, files []upFile) response {
	c.t.Helper()
	body, ct := multipartBody(c.t, fields, files)
	return c.do(http.MethodPost, "/projects/upload?_csrf="+url.QueryEscape(c.csrf), body, map[string]string{"Content-Type": ct})
}

var projectLinkRe = regexp.MustCompile(`^/projects/([0-9a-f-]{36})$`)

func TestCreateProjectFromStarter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient(t)
	c.signUp("starter@example.com")

	r := c.get("/projects/new")
	requireStatus(t, r, http.StatusOK)
	requireContains(t, r.body, `data-testid="starter-counter"`)
	requireContains(t, r.body, `data-testid="starter-static"`)

	r = c.postForm("/projects", url.Values{"starter": {"counter"}})
	requireStatus(t, r, http.StatusSeeOther)
	m := projectLinkRe.FindStringSubmatch(r.header.Get("Location"))
	if m == nil {
		t.Fatalf("redirect to %q", r.header.Get("Location"))
	}
	r = c.get("/projects/" + m[1])
	requireStatus(t, r, http.StatusOK)
	requireContains(t, r.body, "<code>server.js</code>")
	requireContains(t, r.body, "<code>package.json</code>")
	requireContains(t, r.body, "<code>node server.js</code>")

	r = c.postForm("/projects", url.Values{"starter": {"nope"}})
	requireStatus(t, r, http.StatusUnprocessableEntity)
	requireContains(t, r.body, `Unknown starter &#34;nope&#34;`)

	var p struct {
		ID, Name, PauseKind string
		Port                int
	}
	requireStatus(t, c.api(http.MethodPost, "/api/projects", map[string]string{"name": "My site", "starter": "static"}, &p), http.StatusCreated)
	if p.Name != "My site" || p.Port != 5173 || p.PauseKind != "memory" {
		t.Fatalf("created %+v", p)
	}
	var list []struct {
		ID      string
		Build   any
		Sandbox any
	}
	requireStatus(t, c.api(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	if len(list) != 2 || list[0].ID != p.ID {
		t.Fatalf("list = %+v", list)
	}

	r = c.get("/")
	requireStatus(t, r, http.StatusOK)
	if n := strings.Count(r.body, `data-testid="project-card"`); n != 2 {
		t.Fatalf("dashboard shows %d cards", n)
	}
	requireContains(t, r.body, "My site")
	requireContains(t, r.body, "Not built yet")
}

func TestUploadProject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient(t)
	c.signUp("upload@example.com")
	c.get("/projects/new")
	settings := map[string]string{"name": "Uploaded", "start_command": "node index.js", "port": "8080", "pause_kind": "filesystem"}

	// A folder upload: the browser prefixes every path with the folder's name, which is dropped.
	r := c.upload(settings, []upFile{{"myapp/index.js", "require('http')"}, {"myapp/lib/util.js", "x"}})
	requireStatus(t, r, http.StatusSeeOther)
	page := c.get(r.header.Get("Location"))
	requireContains(t, page.body, "<code>index.js</code>")
	requireContains(t, page.body, "<code>lib/util.js</code>")
	requireContains(t, page.body, "Files only")

	// A zip archive.
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	w, _ := zw.Create("site/server.js")
	w.Write([]byte("// server"))
	zw.Close()
	r = c.upload(map[string]string{"name": "Zipped", "start_command": "node server.js", "port": "3000"}, []upFile{{"site.zip", zbuf.String()}})
	requireStatus(t, r, http.StatusSeeOther)
	requireContains(t, c.get(r.header.Get("Location")).body, "<code>server.js</code>")

	// A rejected upload names each bad file, keeps what was typed and stores nothing.
	r = c.upload(map[string]string{"name": "Bad", "start_command": "", "port": "eighty"},
		[]upFile{{"../escape.js", "x"}, {"/etc/passwd", "x"}, {"good.js", "x"}})
	requireStatus(t, r, http.StatusUnprocessableEntity)
	requireContains(t, r.body, `data-testid="file-errors"`)
	requireContains(t, r.body, "<code>../escape.js</code>")
	requireContains(t, r.body, "<code>/etc/passwd</code>")
	requireContains(t, r.body, `data-testid="err-start_command"`)
	requireContains(t, r.body, `data-testid="err-port"`)
	requireContains(t, r.body, `value="Bad"`)
	requireContains(t, r.body, "nothing was stored")

	var list []struct{ Name string }
	requireStatus(t, c.api(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	if len(list) != 2 {
		t.Fatalf("have %d projects after one rejected upload, want 2: %+v", len(list), list)
	}

	// Over the size limit: a clear 413, nothing stored.
	big := strings.Repeat("x", 21<<20)
	r = c.upload(settings, []upFile{{"big.bin", big}})
	requireStatus(t, r, http.StatusRequestEntityTooLarge)
	requireContains(t, r.body, "larger than 20 MiB")
	requireStatus(t, c.api(http.MethodGet, "/api/projects", nil, &list), http.StatusOK)
	if len(list) != 2 {
		t.Fatalf("have %d projects after an oversized upload", len(list))
	}
}

// Every route that takes a project id answers 404 for another founder's project, exactly as
// for a project that does not exist.
func TestOtherFoundersProjectIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	owner := b.newClient(t)
	owner.signUp("owner@example.com")
	var p struct{ ID string }
	requireStatus(t, owner.api(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)

	var built struct{ Sandbox struct{ ID string } }
	requireStatus(t, owner.api(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "k"}, &built), http.StatusAccepted)

	other := b.newClient(t)
	other.signUp("other@example.com")
	other.get("/")
	routes := map[string][]idRoute{p.ID: projectRoutes, built.Sandbox.ID: sandboxRoutes}
	for _, id := range []string{p.ID, built.Sandbox.ID, "00000000-0000-0000-0000-000000000000", "not-a-uuid"} {
		list, ok := routes[id]
		if !ok {
			list = append(projectRoutes, sandboxRoutes...)
		}
		for _, route := range list {
			t.Run(route.method+" "+route.path+" "+id, func(t *testing.T) {
				path := strings.ReplaceAll(route.path, "{id}", id)
				var r response
				switch {
				case route.method == http.MethodGet:
					r = other.get(path)
				case strings.HasPrefix(path, "/api/"):
					r = other.api(route.method, path, route.body, nil)
				default: // a page's button: a form body, as htmx sends it
					vals := url.Values{}
					for k, v := range route.body {
						vals.Set(k, v)
					}
					r = other.htmx(route.method, path, vals)
				}
				requireStatus(t, r, http.StatusNotFound)
			})
		}
	}
	requireStatus(t, owner.get("/projects/"+p.ID), http.StatusOK)
	requireStatus(t, owner.api(http.MethodGet, "/api/sandboxes/"+built.Sandbox.ID, nil, nil), http.StatusOK)
	if n := owner.credits(); n != 9 {
		t.Fatalf("the other founder's requests changed the owner's credits: %d", n)
	}
}

type idRoute struct {
	method, path string
	body         map[string]string
}

// projectRoutes and sandboxRoutes list every route that takes a project or a sandbox id.
var (
	projectRoutes = []idRoute{
		{http.MethodGet, "/projects/{id}", nil},
		{http.MethodPost, "/projects/{id}/build", map[string]string{"idempotencyKey": "x"}},
		{http.MethodGet, "/projects/{id}/rebuild", nil},
		{http.MethodPost, "/projects/{id}/rebuild", map[string]string{"idempotencyKey": "y"}},
		{http.MethodPost, "/api/projects/{id}/builds", map[string]string{"idempotencyKey": "x"}},
		{http.MethodPost, "/api/projects/{id}/rebuild", map[string]string{"idempotencyKey": "y"}},
	}
	sandboxRoutes = []idRoute{
		{http.MethodPost, "/sandboxes/{id}/resume", nil},
		{http.MethodPost, "/sandboxes/{id}/verify", nil},
		{http.MethodPost, "/sandboxes/{id}/pause", nil},
		{http.MethodGet, "/api/sandboxes/{id}", nil},
		{http.MethodPost, "/api/sandboxes/{id}/pause", nil},
		{http.MethodPost, "/api/sandboxes/{id}/resume", nil},
		{http.MethodPost, "/api/sandboxes/{id}/verify", nil},
		{http.MethodPost, "/api/sandboxes/{id}/activity", nil},
	}
)

func FuzzUpload(f *testing.F) {
	body, ct := multipartBody(f, map[string]string{"name": "n", "start_command": "s", "port": "1"}, []upFile{{"a/b.js", "x"}})
	f.Add(body.Bytes(), ct)
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"files\"; filename=\"../../x\"\r\n\r\nhi\r\n--x--\r\n"), "multipart/form-data; boundary=x")
	b := setup(f)
	logged := b.newClient(f)
	logged.signUp("fuzz@example.com")
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		c := *logged
		c.t = t
		r := c.do(http.MethodPost, "/projects/upload?_csrf="+url.QueryEscape(c.csrf), bytes.NewReader(body), map[string]string{"Content-Type": contentType})
		if r.status >= 500 {
			t.Fatalf("status %d for %q: %s", r.status, body, r.body)
		}
	})
}
