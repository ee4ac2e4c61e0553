package handlers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/views"
)

// healthServer crashes on /crash (exit code 3, once it answered) and prints what follows
// /say/ on its own line.
const healthServer = `const http = require("http");
http.createServer((req, res) => {
  if (req.url === "/crash") { res.end("bye"); return setImmediate(() => process.exit(3)); }
  if (req.url.startsWith("/say/")) { console.log("said " + req.url.slice(5)); return res.end("ok"); }
  res.end("up");
}).listen(Number(process.env.PORT), "0.0.0.0");
`

// healthBench is a running preview of healthServer on sandboxd with the founder's /events
// stream open.
type healthBench struct {
	s      *stack
	c      *apptest.Client
	pid    string // the project
	sid    string // the sandbox
	events <-chan testkit.SSEEvent
	pane   string
	h      e2b.Sandbox
	url    string // the preview's
}

// BENCHMARKS.md, issue 26: the app's health on sandboxd, each figure beside its floor measured
// in the same run. `exits`: a version whose server exits at once, from the API's version to the
// pane saying it doesn't start and the API's read saying exited; floor, the same program run
// alone by envd (`node -e`, start to end). `crash`: the running server exits on a request,
// from the request to the pane saying so; floor, a bare envd client following the same process
// (ConnectProcess) sees its end. `line`: the server prints a line on a request, from the
// request to the line on the build page's log stream (the founder's session) and on an API
// token's (the lines 0 to 100 ms apart); floor, the bare client's chunk holding it. Each checks what it times (every stream
// reached, the API agreeing), also under -short.
func BenchmarkAppHealth(b *testing.B) {
	hb := newHealthBench(b)
	b.Run("exits", hb.exits)
	b.Run("crash", hb.crash)
	b.Run("line", hb.line)
}

func newHealthBench(b *testing.B) *healthBench {
	s := start(b, apptest.Options{})
	c := s.NewClient(b)
	c.SignUp("bench-health@example.com")
	c.Get("/projects/new")
	r := upload(b, c, map[string]string{"name": "Health", "start_command": "node server.js", "port": "3000"},
		[]upFile{{"server.js", healthServer}})
	m := createdRe.FindStringSubmatch(r.Header.Get("Location"))
	if r.Status != http.StatusSeeOther || m == nil {
		b.Fatalf("create: %d %s", r.Status, r.Body)
	}
	hb := &healthBench{s: s, c: c, pid: m[1], pane: views.DOMID(views.Pane, m[1])}
	var res struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(b, c.API(http.MethodPost, "/api/projects/"+hb.pid+"/builds", map[string]string{"idempotencyKey": "b-" + hb.pid}, &res), http.StatusAccepted)
	hb.sid = res.Sandbox.ID
	c.WaitSandbox(hb.sid, "running", 2*time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	hb.events = c.Stream(ctx)
	nextMatching(b, hb.events, hb.pane, `data-status="running"`, 5*time.Second)
	if err := s.Pool().QueryRow(ctx, `SELECT provider_id, envd_token, provider_domain, preview_url FROM sandboxes WHERE id = $1`, hb.sid).
		Scan(&hb.h.ID, &hb.h.EnvdAccessToken, &hb.h.Domain, &hb.url); err != nil {
		b.Fatal(err)
	}
	return hb
}

// restore makes a version of the good server (a comment apart) and waits until it is live.
func (hb *healthBench) restore(b *testing.B) {
	r, a := postVersion(b, hb.c, hb.pid, map[string]any{"files": []vfile{text("server.js", healthServer+"// "+uuid.NewString()+"\n")}}, nil)
	apptest.RequireStatus(b, r, http.StatusCreated)
	nextMatching(b, hb.events, hb.pane, fmt.Sprintf("Version %d is live", a.Version.Number), time.Minute)
}

// appIs fails unless the API's read of the sandbox says its app is status on version.
func (hb *healthBench) appIs(b *testing.B, status string, version int32) {
	var sb struct{ App *appAnswer }
	apptest.RequireStatus(b, hb.c.API(http.MethodGet, "/api/sandboxes/"+hb.sid, nil, &sb), http.StatusOK)
	if sb.App == nil || sb.App.Status != status || sb.App.Version == nil || *sb.App.Version != version {
		b.Fatalf("the API says the app is %+v once the page was told, want %s on version %d", sb.App, status, version)
	}
}

// follow connects a bare envd client to the preview's dev server; its channels get the time
// the first chunk holding marker arrived (when marker is set) and the time the process ended.
func (hb *healthBench) follow(b *testing.B, marker string) (said, ended <-chan time.Time, stop func()) {
	var pid int
	if err := hb.s.Pool().QueryRow(context.Background(), `SELECT app_pid FROM sandboxes WHERE id = $1`, hb.sid).Scan(&pid); err != nil {
		b.Fatal(err)
	}
	p, err := hb.s.Provider().ConnectProcess(context.Background(), hb.h, pid)
	if err != nil {
		b.Fatal(err)
	}
	saidC, endedC := make(chan time.Time, 1), make(chan time.Time, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	go func() {
		defer cancel()
		_, _ = p.Follow(ctx, func(stdout, _ []byte) {
			if marker != "" && strings.Contains(string(stdout), marker) {
				select {
				case saidC <- time.Now():
				default:
				}
			}
		})
		endedC <- time.Now()
	}()
	b.Cleanup(cancel)
	return saidC, endedC, cancel
}

func (hb *healthBench) get(b *testing.B, path string) {
	res, err := hb.s.Host.HTTPClient().Get(strings.TrimSuffix(hb.url, "/") + path)
	if err != nil {
		b.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %d", path, res.StatusCode)
	}
}

func (hb *healthBench) exits(b *testing.B) {
	var samples, floor []time.Duration
	for range b.N {
		start := time.Now()
		r, a := postVersion(b, hb.c, hb.pid, map[string]any{"files": []vfile{text("server.js",
			`console.log("starting `+uuid.NewString()+`"); throw new Error("broken on purpose")`)}}, nil)
		apptest.RequireStatus(b, r, http.StatusCreated)
		nextMatching(b, hb.events, hb.pane, fmt.Sprintf("Version %d doesn", a.Version.Number), time.Minute)
		hb.appIs(b, "exited", a.Version.Number)
		samples = append(samples, time.Since(start))
		b.StopTimer()
		hb.restore(b)
		b.StartTimer()
	}
	b.StopTimer()
	for range b.N {
		start := time.Now()
		p, err := hb.s.Provider().StartProcess(context.Background(), hb.h, e2b.ProcessParams{
			Argv: []string{"node", "-e", `console.log("starting"); throw new Error("broken on purpose")`}, Cwd: "/home/user/app"})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := p.Wait(context.Background()); err != nil || res.ExitCode != 1 {
			b.Fatalf("node alone: %+v, %v; want exit code 1", res, err)
		}
		floor = append(floor, time.Since(start))
	}
	reportQuantiles(b, "exited", samples)
	reportQuantiles(b, "floor-node", floor)
}

func (hb *healthBench) crash(b *testing.B) {
	var samples, floor []time.Duration
	for range b.N {
		_, ended, _ := hb.follow(b, "")
		var version int32
		if err := hb.s.Pool().QueryRow(context.Background(), `SELECT app_version FROM sandboxes WHERE id = $1`, hb.sid).Scan(&version); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		hb.get(b, "/crash")
		nextMatching(b, hb.events, hb.pane, fmt.Sprintf("Version %d doesn", version), time.Minute)
		samples = append(samples, time.Since(start))
		hb.appIs(b, "exited", version)
		select {
		case at := <-ended:
			floor = append(floor, at.Sub(start))
		case <-time.After(time.Minute):
			b.Fatal("the bare client did not see the server end within a minute")
		}
		b.StopTimer()
		hb.restore(b)
		b.StartTimer()
	}
	b.StopTimer()
	reportQuantiles(b, "seen", samples)
	reportQuantiles(b, "floor-envd", floor)
}

func (hb *healthBench) line(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	token := hb.c.MakeToken("bench-logs")
	var after string // both streams from the newest line stored, not the project's whole log
	if err := hb.s.Pool().QueryRow(ctx, `SELECT coalesce(max(seq), 0)::text FROM app_log_lines`).Scan(&after); err != nil {
		b.Fatal(err)
	}
	page := testkit.OpenSSE(b, ctx, hb.c.HTTP(), hb.c.URL("/api/projects/"+hb.pid+"/logs/stream?after="+after))
	api := openLogStream(b, ctx, hb.c, token, uuid.MustParse(hb.pid), map[string]string{"Last-Event-ID": after})
	said := func(marker string) func(testkit.SSEEvent) bool {
		return func(ev testkit.SSEEvent) bool {
			var l struct{ Text string }
			return ev.Event == "log" && json.Unmarshal([]byte(ev.Data), &l) == nil && l.Text == "said "+marker
		}
	}
	var onPage, onAPI, floor []time.Duration
	b.ResetTimer()
	for range b.N {
		marker := uuid.NewString()
		bare, _, stop := hb.follow(b, marker)
		// An app prints when something happens, not in step with the Writer's batches: an
		// untimed pause of 0 to 100 ms, or each sample would wait for the same tick.
		b.StopTimer()
		time.Sleep(time.Duration(rand.Int64N(int64(100 * time.Millisecond))))
		b.StartTimer()
		start := time.Now()
		hb.get(b, "/say/"+marker)
		testkit.NextSSE(b, page, time.Minute, "the line on the page's log stream", said(marker))
		onPage = append(onPage, time.Since(start))
		testkit.NextSSE(b, api, time.Minute, "the line on the token's log stream", said(marker))
		onAPI = append(onAPI, time.Since(start))
		select {
		case at := <-bare:
			floor = append(floor, at.Sub(start))
		case <-time.After(time.Minute):
			b.Fatal("the bare client did not get the line within a minute")
		}
		stop()
	}
	b.StopTimer()
	reportQuantiles(b, "page", onPage)
	reportQuantiles(b, "token", onAPI)
	reportQuantiles(b, "floor-envd", floor)
}
