package handlers_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/views"
)

// fileApp is a 100-file app whose pages are its files, read from disk at every request, as a
// dev server that reloads changed files serves them.
func fileApp() []upFile {
	files := []upFile{{"server.js", `const http = require("http"), fs = require("fs");
http.createServer((req, res) => {
  const file = req.url === "/" ? "public/f00.txt" : req.url.slice(1);
  fs.readFile(file, (err, data) => { if (err) { res.writeHead(404); return res.end(); } res.end(data); });
}).listen(Number(process.env.PORT), "0.0.0.0");
`}}
	for i := range 99 {
		files = append(files, upFile{fmt.Sprintf("public/f%02d.txt", i), fmt.Sprintf("file %d, version 1\n%0512d\n", i, i)})
	}
	return files
}

var createdRe = regexp.MustCompile(`^/projects/([0-9a-f-]{36})$`)

// BENCHMARKS.md: a 3-file change to a running 100-file app on sandboxd → "Version N is live" on
// the founder's stream, p50 and p99: the whole path of the API's version, the job, the upload
// and removal in the sandbox, the dev server restarted and probed (restart) or left to reload
// the files itself (reload), the history's event, NOTIFY, render and stream.
func BenchmarkVersionLive(b *testing.B) {
	for _, reloads := range []bool{false, true} {
		name := "restart"
		if reloads {
			name = "reload"
		}
		b.Run(name, func(b *testing.B) {
			s := start(b, apptest.Options{})
			c := s.NewClient(b)
			c.SignUp("bench-versions@example.com")
			c.Get("/projects/new")
			r := upload(b, c, map[string]string{"name": "Files", "start_command": "node server.js", "port": "3000"}, fileApp())
			m := createdRe.FindStringSubmatch(r.Header.Get("Location"))
			if r.Status != http.StatusSeeOther || m == nil {
				b.Fatalf("create: %d %s", r.Status, r.Body)
			}
			pid := m[1]
			if reloads {
				c.Get("/projects/" + pid)
				apptest.RequireStatus(b, c.PostForm("/projects/"+pid+"/settings", url.Values{"reloads_itself": {"true"}}), http.StatusSeeOther)
			}
			var res struct{ Sandbox struct{ ID string } }
			apptest.RequireStatus(b, c.API(http.MethodPost, "/api/projects/"+pid+"/builds", map[string]string{"idempotencyKey": "b-" + pid}, &res), http.StatusAccepted)
			c.WaitSandbox(res.Sandbox.ID, "running", 2*time.Minute)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			events := c.Stream(ctx)
			pane := views.DOMID(views.Pane, pid)
			nextMatching(b, events, pane, `data-status="running"`, 5*time.Second)
			var samples []time.Duration
			b.ResetTimer()
			for i := range b.N {
				files := []vfile{}
				for j := range 3 {
					files = append(files, text(fmt.Sprintf("public/f%02d.txt", (i*3+j)%99), fmt.Sprintf("changed in iteration %d\n", i)))
				}
				start := time.Now()
				r, a := postVersion(b, c, pid, map[string]any{"files": files}, nil)
				apptest.RequireStatus(b, r, http.StatusCreated)
				nextMatching(b, events, pane, fmt.Sprintf("Version %d is live", a.Version.Number), time.Minute)
				samples = append(samples, time.Since(start))
			}
			b.StopTimer()
			reportQuantiles(b, "version-live", samples)
		})
	}
}

// BENCHMARKS.md: GET /api/projects/{id}/versions (its first page, 100 versions) of a project
// with 1,000 versions, p99.
func BenchmarkVersionsList(b *testing.B) {
	s := webOnly(b)
	c := s.NewClient(b)
	c.SignUp("bench-list@example.com")
	pid := newCounter(b, c)
	for i := 2; i <= 1000; i++ {
		r, _ := postVersion(b, c, pid, map[string]any{"message": fmt.Sprint("change ", i), "files": []vfile{text("n.txt", fmt.Sprint(i))}}, nil)
		apptest.RequireStatus(b, r, http.StatusCreated)
	}
	var samples []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r := c.Do(http.MethodGet, "/api/projects/"+pid+"/versions", nil, nil)
		samples = append(samples, time.Since(start))
		if r.Status != http.StatusOK {
			b.Fatalf("list: %d %s", r.Status, r.Body)
		}
	}
	b.StopTimer()
	reportQuantiles(b, "versions-list", samples)
}

// BENCHMARKS.md: a variable changed on a running preview → the preview serving its new value,
// p50 and p99: the API's PUT, the apply job, the dev server restarted with the new environment
// and probed, seen by asking the preview every 5 ms (the version's figure, beside, is to
// "Version N is live" on the stream).
func BenchmarkEnvLive(b *testing.B) {
	s := start(b, apptest.Options{})
	c := s.NewClient(b)
	c.SignUp("bench-env@example.com")
	pid, sid := c.BuildCounter()
	r, _ := postVersion(b, c, pid, map[string]any{"files": []vfile{text("server.js", envServer)}}, nil)
	apptest.RequireStatus(b, r, http.StatusCreated)
	sb := c.WaitSandbox(sid, "running", time.Minute)
	hc := s.Host.HTTPClient()
	serves := func(want string) bool {
		res, err := hc.Get(sb.PreviewURL)
		if err != nil {
			return false
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return strings.Contains(string(body), want)
	}
	for !serves("GREETING=undefined") {
		time.Sleep(5 * time.Millisecond)
	}
	var samples []time.Duration
	b.ResetTimer()
	for i := range b.N {
		want := fmt.Sprintf("hello-%d", i)
		start := time.Now()
		apptest.RequireStatus(b, c.API(http.MethodPut, "/api/projects/"+pid+"/env/GREETING", map[string]any{"value": want}, nil), http.StatusNoContent)
		deadline := start.Add(time.Minute)
		for !serves("GREETING=" + want + " ") {
			if time.Now().After(deadline) {
				b.Fatalf("the preview does not serve %s after a minute", want)
			}
			time.Sleep(5 * time.Millisecond)
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	reportQuantiles(b, "env-live", samples)
}
