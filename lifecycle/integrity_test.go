package lifecycle_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/db"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
	"sandman/versions"
	"sandman/views"
)

// healApp is a small app whose pages are its stored files, read from disk at every request, so
// that what it serves is what its directory holds. /boot names the server process (a restart
// shows), /write makes the app change one of its stored files and add one of its own.
var healApp = map[string]string{
	"server.js": `const http = require("http"), fs = require("fs");
const boot = process.pid + "-" + Date.now();
http.createServer((req, res) => {
  if (req.url === "/boot") return res.end(boot);
  if (req.url === "/write") {
    fs.writeFileSync("notes.json", '{"notes":["written by the app"]}');
    fs.mkdirSync("cache", { recursive: true });
    fs.writeFileSync("cache/own.txt", "the app's own file");
    return res.end("written");
  }
  const file = req.url === "/" ? "page.html" : decodeURIComponent(req.url.slice(1));
  fs.readFile(file, (err, data) => {
    if (err) { res.writeHead(404); return res.end("missing " + file); }
    res.end(data);
  });
}).listen(Number(process.env.PORT), "0.0.0.0");
`,
	"page.html":             "<h1>The stored page</h1>\n",
	"lib/data.txt":          "the stored data\n",
	"odd name's [1] $x.txt": "a stored file with an odd name\n",
	"notes.json":            `{"notes":[]}` + "\n",
	"config.json":           `{"mode":"dev"}` + "\n",
}

// healProject creates the heal app as a project. Its install command changes one of its stored
// files (config.json), as installers do; pauseKind is memory or filesystem.
func healProject(t testing.TB, b *testBundle, owner uuid.UUID, pauseKind sandbox.PauseKind, start string) db.Project {
	t.Helper()
	var files []versions.File
	for path, content := range healApp {
		files = append(files, versions.File{Path: path, Content: []byte(content)})
	}
	if start == "" {
		start = "node server.js"
	}
	p, err := projects.New(b.pool).CreateFromFiles(context.Background(), owner,
		projects.Settings{Name: "Heal", InstallCommand: `printf '{"mode":"installed"}\n' > config.json`, StartCommand: start,
			Port: 3000, PauseKind: pauseKind}, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// get fetches a path of the preview: its status and body.
func get(t testing.TB, h *sandboxdtest.Host, preview, path string) (int, string) {
	t.Helper()
	res, err := h.HTTPClient().Get(strings.TrimSuffix(preview, "/") + (&url.URL{Path: path}).EscapedPath())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// serves fails unless the preview answers 200 with want at path.
func serves(t testing.TB, h *sandboxdtest.Host, preview, path, want string) {
	t.Helper()
	if status, body := get(t, h, preview, path); status != http.StatusOK || body != want {
		t.Fatalf("%s%s answered %d %q, want 200 %q", preview, path, status, body, want)
	}
}

func integrity(t testing.TB, b *testBundle, outcome string) float64 {
	t.Helper()
	return testkit.MetricValue(t, b.Registry(), "sandman_resume_integrity_total", map[string]string{"outcome": outcome})
}

func filesRestored(t testing.TB, b *testBundle, after string) float64 {
	t.Helper()
	return testkit.MetricValue(t, b.Registry(), "sandman_integrity_files_restored_total", map[string]string{"after": after})
}

// historyTexts is the project's history, oldest first, with the files each entry names.
func historyTexts(t testing.TB, b *testBundle, owner, project uuid.UUID) ([]string, map[string][]string) {
	t.Helper()
	hist, err := b.ov.History(context.Background(), owner, project, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	files := map[string][]string{}
	for i := len(hist) - 1; i >= 0; i-- {
		texts = append(texts, historyText(b.svc, hist[i]))
		if len(hist[i].Files) > 0 {
			files[historyText(b.svc, hist[i])] = hist[i].Files
		}
	}
	return texts, files
}

// TestResumeHealsWhatTheProviderLost resumes the heal app after sandboxd's files fault damaged
// it while it slept: the damaged stored files are uploaded again, the dev server is restarted on
// them (a memory snapshot's server still runs on the old ones) or started (a filesystem
// snapshot), the preview serves the stored content, the history names the files, and what the
// app wrote itself (a stored file its installer changed, one it rewrote while running, one of
// its own) is left as the app left it.
func TestResumeHealsWhatTheProviderLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, name  string
		pauseKind sandbox.PauseKind
		damage    string
		files     []string
		injected  string
	}{
		{id: "resume-files-deleted", name: "two files deleted, memory snapshot", pauseKind: sandbox.PauseMemory,
			damage: sandboxd.DamageDelete, files: []string{"page.html", "lib/data.txt"},
			injected: "two of the app's stored files deleted while it slept (sandboxd's files fault at resume, memory snapshot)"},
		{id: "resume-file-corrupted", name: "one file corrupted, memory snapshot", pauseKind: sandbox.PauseMemory,
			damage: sandboxd.DamageCorrupt, files: []string{"page.html"},
			injected: "one stored file corrupted while it slept: the same size, other bytes (memory snapshot)"},
		{id: "resume-files-deleted-cold", name: "two files deleted, filesystem snapshot", pauseKind: sandbox.PauseFilesystem,
			damage: sandboxd.DamageDelete, files: []string{"page.html", "odd name's [1] $x.txt"},
			injected: "two stored files deleted while it slept, one with quotes, brackets and a $ in its name (filesystem snapshot)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host := sandboxdtest.Start(t)
			cfg := fastConfig()
			cfg.IdleTimeout = time.Hour // the test pauses when it means to
			b := setupWith(t, host, cfg, true)
			ctx := context.Background()
			u, _ := founder(t, b.pool, 5)
			p := healProject(t, b, u.ID, tt.pauseKind, "")
			sb := b.buildRunning(t, u.ID, p.ID)
			if lc, err := providerFor(t, host).GetSandbox(ctx, *sb.ProviderID); err != nil || lc.Lifecycle == nil ||
				*lc.Lifecycle != (e2b.Lifecycle{OnTimeout: e2b.OnTimeoutKill, AutoResume: false}) {
				t.Fatalf("the provider holds lifecycle %+v (%v); Sandman creates with kill on timeout, no auto-resume", lc.Lifecycle, err)
			}
			serves(t, host, sb.PreviewURL, "/", healApp["page.html"])
			serves(t, host, sb.PreviewURL, "/write", "written")
			_, boot := get(t, host, sb.PreviewURL, "/boot")

			if _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
				t.Fatal(err)
			}
			sb = b.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)
			// Sandman's look before the pause: the installer's and the running app's changes.
			if !slices.Equal(sb.AppChangedFiles, []string{"config.json", "notes.json"}) || sb.FilesSeenAt == nil {
				t.Fatalf("files the app changed, seen at the pause: %q at %v; want config.json and notes.json", sb.AppChangedFiles, sb.FilesSeenAt)
			}
			var paths []string
			for _, f := range tt.files {
				paths = append(paths, "app/"+f)
			}
			host.DamageAtResume(t, *sb.ProviderID, tt.damage, paths...)
			healedBefore := integrity(t, b, "healed")
			if _, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil {
				t.Fatal(err)
			}
			sb = b.waitStatus(t, sb.ID, sandbox.Running, time.Minute)

			for path, content := range healApp {
				if path != "server.js" && path != "notes.json" && path != "config.json" {
					serves(t, host, sb.PreviewURL, "/"+path, content)
				}
			}
			serves(t, host, sb.PreviewURL, "/", healApp["page.html"])
			serves(t, host, sb.PreviewURL, "/notes.json", `{"notes":["written by the app"]}`)
			serves(t, host, sb.PreviewURL, "/config.json", `{"mode":"installed"}`+"\n")
			serves(t, host, sb.PreviewURL, "/cache/own.txt", "the app's own file")
			if _, now := get(t, host, sb.PreviewURL, "/boot"); now == boot {
				t.Fatalf("the dev server was not restarted on the restored files (still %s)", now)
			}

			texts, named := historyTexts(t, b, u.ID, p.ID)
			sentence := fmt.Sprintf("Restored %d files the provider lost", len(tt.files))
			if len(tt.files) == 1 {
				sentence = "Restored 1 file the provider lost"
			}
			if n := len(texts); n < 2 || texts[n-2] != sentence || texts[n-1] != "Resumed by you" {
				t.Fatalf("history %q; want it to end %q, \"Resumed by you\"", texts, sentence)
			}
			want := slices.Sorted(slices.Values(tt.files))
			if !slices.Equal(named[sentence], want) {
				t.Fatalf("the history names %q, want %q", named[sentence], want)
			}
			if got := integrity(t, b, "healed") - healedBefore; got != 1 {
				t.Fatalf("sandman_resume_integrity_total{outcome=healed} rose by %v, want 1", got)
			}
			if got := filesRestored(t, b, "resume"); got != float64(len(tt.files)) {
				t.Fatalf("sandman_integrity_files_restored_total{after=resume} = %v, want %d", got, len(tt.files))
			}

			// The next sleep and wake find it whole: nothing restored, the server left running
			// (memory) and the app's own changes still its own.
			_, boot = get(t, host, sb.PreviewURL, "/boot")
			if _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
				t.Fatal(err)
			}
			b.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)
			intactBefore := integrity(t, b, "intact")
			if _, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil {
				t.Fatal(err)
			}
			sb = b.waitStatus(t, sb.ID, sandbox.Running, time.Minute)
			serves(t, host, sb.PreviewURL, "/notes.json", `{"notes":["written by the app"]}`)
			if got := integrity(t, b, "intact") - intactBefore; got != 1 {
				t.Fatalf("an undamaged resume counted intact %v times, want 1", got)
			}
			if after, _ := historyTexts(t, b, u.ID, p.ID); len(slices.DeleteFunc(after, func(s string) bool { return s != sentence })) != 1 {
				t.Fatalf("a second heal was recorded: %q", after)
			}
			if _, now := get(t, host, sb.PreviewURL, "/boot"); tt.pauseKind == sandbox.PauseMemory && now != boot {
				t.Fatal("an intact memory resume restarted the dev server")
			}

			audit := apptest.AuditDB(t, b.pool)
			result := "restored from storage before running; the dev server restarted on them; the preview serves the stored content; " +
				"the history names the files; the app's own changes kept"
			if tt.pauseKind == sandbox.PauseFilesystem {
				result = "restored from storage before running; the dev server started on them (cold boot); the preview serves the stored content; " +
					"the history names the files; the app's own changes kept"
			}
			testkit.Record(t, testkit.Scenario{ID: tt.id, Times: 1, Counts: audit,
				Injected: tt.injected, Result: result})
		})
	}
}

// TestResumeFailsWhenFilesCannotBeRestored: when the heal cannot work, the resume fails at once
// (no second attempt brings files back) with its own cause, and the founder is offered Rebuild.
func TestResumeFailsWhenFilesCannotBeRestored(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, name, injected, result string
		// start is the project's start command: one that runs once only stands for a server
		// that does not come back.
		start  string
		damage []string
	}{
		{id: "resume-app-dir-gone", name: "the app directory is gone",
			damage:   []string{"app"},
			injected: "the app's whole directory deleted while it slept (sandboxd's files fault at resume)",
			result:   "resume_failed after one attempt, with the cause \"" + views.CauseText(new(sandbox.CauseFilesLost), "") + "\""},
		{id: "resume-server-not-back", name: "the dev server does not come back on the restored files",
			start:    "sh -c 'test ! -e ../started && touch ../started && exec node server.js'",
			damage:   []string{"app/page.html"},
			injected: "a stored file deleted while it slept, and a dev server that cannot start a second time",
			result:   "the file restored, the server stopped and not answering again: resume_failed after one attempt, with the cause \"" + views.CauseText(new(sandbox.CauseFilesLost), "") + "\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host := sandboxdtest.Start(t)
			cfg := fastConfig()
			cfg.IdleTimeout = time.Hour
			cfg.ResumeTimeout = 10 * time.Second
			b := setupWith(t, host, cfg, true)
			ctx := context.Background()
			u, _ := founder(t, b.pool, 5)
			p := healProject(t, b, u.ID, sandbox.PauseMemory, tt.start)
			sb := b.buildRunning(t, u.ID, p.ID)
			if _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
				t.Fatal(err)
			}
			sb = b.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)
			host.DamageAtResume(t, *sb.ProviderID, sandboxd.DamageDelete, tt.damage...)
			connects := providerCalls(t, b.Registry(), "connect")
			if _, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil {
				t.Fatal(err)
			}
			sb = b.waitStatus(t, sb.ID, sandbox.ResumeFailed, time.Minute)
			if sb.FailureCause == nil || *sb.FailureCause != sandbox.CauseFilesLost {
				t.Fatalf("failure cause %v, want %q", sb.FailureCause, sandbox.CauseFilesLost)
			}
			if n := providerCalls(t, b.Registry(), "connect") - connects; n != 1 {
				t.Fatalf("%v connects: lost files must not be tried a second time", n)
			}
			if got := integrity(t, b, "failed"); got != 1 {
				t.Fatalf("sandman_resume_integrity_total{outcome=failed} = %v, want 1", got)
			}
			texts, _ := historyTexts(t, b, u.ID, p.ID)
			if texts[len(texts)-1] != "Resume failed: the provider lost its files and they couldn't be restored" {
				t.Fatalf("history %q", texts)
			}
			// Rebuild is offered as for any failed resume, and brings the preview back.
			rb, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "rebuild", true)
			if err != nil {
				t.Fatal(err)
			}
			fresh := b.waitStatus(t, rb.Sandbox.ID, sandbox.Running, time.Minute)
			serves(t, host, fresh.PreviewURL, "/", healApp["page.html"])

			audit := apptest.AuditDB(t, b.pool)
			testkit.Record(t, testkit.Scenario{ID: tt.id, Times: 1, Counts: audit,
				Injected: tt.injected, Result: tt.result + "; Rebuild brings it back"})
		})
	}
}

// TestSandboxLostWithoutAnEvent: a sandbox the provider drops with no event (E2B#1381), running
// or paused, is found missing by the reconcile and declared "lost by the provider" once no
// killed event came within the catch-up window, not left as it was nor as unknown.
func TestSandboxLostWithoutAnEvent(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = time.Hour
	b := setupWith(t, host, cfg, true)
	ctx := context.Background()
	uid, sbs := b.runningSandboxes(t, 2)
	running, paused := sbs[0], sbs[1]
	if _, err := b.svc.RequestPause(ctx, uid, paused.ID); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, paused.ID, sandbox.Paused, 30*time.Second)
	// The window: the events reader's interval (off here) and the margin it re-reads, 5 s.
	const window = 5 * time.Second
	lost := time.Now()
	for _, sb := range sbs {
		host.Lose(t, *sb.ProviderID)
	}
	for _, sb := range []db.Sandbox{running, paused} {
		sb = b.waitStatus(t, sb.ID, sandbox.Killed, time.Minute)
		if killedReason(sb) != sandbox.ReasonLost {
			t.Fatalf("killed with reason %q, want lost", killedReason(sb))
		}
		if sb.KilledAt == nil || sb.KilledAt.Sub(lost) < window {
			t.Fatalf("declared lost at %v, %v after it went: within the catch-up window (%v) a killed event could still have come", sb.KilledAt, sb.KilledAt.Sub(lost), window)
		}
		evs := b.eventsOf(t, sb.ID)
		if last := evs[len(evs)-1]; last.Source != sandbox.SourceReconciler || len(transitionsTo(evs, sandbox.Unknown)) != 0 {
			t.Fatalf("history %s", history(evs))
		}
	}
	hist, err := b.ov.History(ctx, uid, running.ProjectID, math.MaxInt64)
	if err != nil || historyText(b.svc, hist[0]) != "The provider lost this preview" {
		t.Fatalf("history %+v (%v)", hist, err)
	}
	audit := apptest.AuditDB(t, b.pool)
	testkit.Record(t, testkit.Scenario{ID: "sandbox-lost-without-event", Times: 2, Counts: audit,
		Injected: "a running and a paused sandbox dropped by the provider with no event and no webhook (sandboxd's lose)",
		Result:   `killed, reason "lost by the provider", once no killed event came within the catch-up window; history "The provider lost this preview"; never unknown`})
}

// TestUnknownEventTypesAreIgnored: an event type Sandman does not know (a snapshot's
// checkpointed) changes nothing.
func TestUnknownEventTypesAreIgnored(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	_, sbs := b.runningSandboxes(t, 1)
	before := b.eventsOf(t, sbs[0].ID)
	for _, typ := range []string{e2b.EventCheckpointed, "sandbox.lifecycle.teleported"} {
		changed, err := b.svc.ApplyProviderEvent(context.Background(), lifecycle.ProviderEvent{ID: uuid.NewString(), Type: typ,
			SandboxID: *sbs[0].ProviderID, Timestamp: time.Now()}, sandbox.SourceEventsAPI)
		if err != nil || changed {
			t.Fatalf("%s: changed %v, %v", typ, changed, err)
		}
	}
	if after := b.eventsOf(t, sbs[0].ID); len(after) != len(before) || b.get(t, sbs[0].ID).Status != sandbox.Running {
		t.Fatalf("unknown types changed the sandbox: %s", history(after))
	}
}
