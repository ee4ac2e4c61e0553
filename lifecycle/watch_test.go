package lifecycle_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/sandboxd/sandboxdtest"
	"sandman/versions"
)

// The watch of dev servers told true in every corner (docs/architecture.md, "The watch of dev
// servers", "The app's health").

// quietServer answers on its port and prints one line, marker, when it listens: then nothing.
func quietServer(marker string) string {
	return `const http = require("http");
http.createServer((req, res) => res.end("ok")).listen(process.env.PORT || 3000, "0.0.0.0",
  () => console.log("` + marker + ` listening"));`
}

// waitWatchedUp waits until the sandbox's app is up on version and this instance's watch
// follows its process.
func waitWatchedUp(t testing.TB, v versioned, sandboxID uuid.UUID, version int32) {
	t.Helper()
	testkit.Eventually(t, time.Minute, fmt.Sprintf("version %d up and watched", version), func() error {
		now := v.get(t, sandboxID)
		if now.AppStatus == nil || *now.AppStatus != sandbox.AppUp || now.AppVersion == nil || *now.AppVersion != version || now.AppPid == nil {
			return fmt.Errorf("the app is %v on version %v (pid %v)", now.AppStatus, now.AppVersion, now.AppPid)
		}
		if !v.svc.Watches(sandboxID) {
			return fmt.Errorf("the watch does not follow it")
		}
		return nil
	})
}

// exitProblem is the app problem of a version as stored, with the transaction that wrote it and
// the one that wrote the sandbox's newest event of reason.
type exitProblem struct {
	problemTx, eventTx string
	detail             string
	open               bool
}

func readExitProblem(t testing.TB, b *testBundle, sb db.Sandbox, version int32, reason sandbox.Reason) (exitProblem, error) {
	t.Helper()
	var p exitProblem
	err := b.pool.QueryRow(context.Background(), `
		SELECT p.xmin::text, coalesce((SELECT e.xmin::text FROM sandbox_events e
		        WHERE e.sandbox_id = $1 AND e.reason = $4 ORDER BY e.id DESC LIMIT 1), ''),
		       p.detail, p.closed_at IS NULL
		FROM app_problems p WHERE p.project_id = $2 AND p.version = $3 AND p.source = 'app'`,
		sb.ID, sb.ProjectID, version, reason).Scan(&p.problemTx, &p.eventTx, &p.detail, &p.open)
	return p, err
}

// An exit's problem is committed in the transaction that records the exit, whoever records it
// (the job that started the server, the watch that saw it crash), with that run's last lines:
// the one announcement of the change draws the card's count and the pane's detail.
func TestAnExitIsStoredWithItsProblemInOneTransaction(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		reason sandbox.Reason
		// exit makes version 2's server exit, its marker printed first.
		exit func(t *testing.T, v versioned, owner, project uuid.UUID, sb db.Sandbox, marker string)
	}{
		{"a version whose server exits at its start, recorded by its job", sandbox.ReasonVersionFailed,
			func(t *testing.T, v versioned, owner, project uuid.UUID, _ db.Sandbox, marker string) {
				v.change(t, owner, project, map[string]string{"server.js": `console.log("` + marker + `"); process.exit(1)`})
			}},
		{"a crash while the preview runs, recorded by the watch", sandbox.ReasonAppExited,
			func(t *testing.T, v versioned, owner, project uuid.UUID, sb db.Sandbox, marker string) {
				v.change(t, owner, project, map[string]string{"server.js": quietServer(marker)})
				waitWatchedUp(t, v, sb.ID, 2)
				killDevServer(t, v.host, v.get(t, sb.ID))
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			v := appVersions(t, nil)
			u, p, sb := v.runningPreview(t)
			v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, appSeen)
			marker := "exit-marker-" + uuid.NewString()[:8]
			c.exit(t, v, u.ID, p.ID, sb, marker)
			v.waitApp(t, u.ID, sb.ID, sandbox.AppExited, appSeen)
			var got exitProblem
			testkit.Eventually(t, appSeen, "version 2's problem", func() (err error) {
				got, err = readExitProblem(t, v.testBundle, sb, 2, c.reason)
				return err
			})
			if got.problemTx != got.eventTx {
				t.Fatalf("the exit's problem was written by transaction %s, its exit by %s: the card may be drawn without it",
					got.problemTx, got.eventTx)
			}
			if !got.open || !strings.Contains(got.detail, marker) {
				t.Fatalf("version 2's problem (open %v) has the detail %q, without its run's last line %q", got.open, got.detail, marker)
			}
		})
	}
}

// An app that did not answer within the readiness timeout is up once it answers, seen by the
// watch's holder, and is the last good version.
func TestANotAnsweringAppIsUpOnceItAnswers(t *testing.T) {
	t.Parallel()
	cfg := fastConfig()
	cfg.IdleTimeout, cfg.ReadyTimeout, cfg.WatchScanEvery = time.Hour, 5*time.Second, 500*time.Millisecond
	cfg.AnswerProbeEvery = 200 * time.Millisecond
	host := sandboxdtest.Start(t)
	b := setupWith(t, host, cfg, true)
	v := versioned{testBundle: b, host: host, v: versions.New(b.pool, b.svc.Hooks().VersionMade)}
	u, p, sb := v.runningPreview(t)
	v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, appSeen)
	// It listens well after the readiness timeout.
	v.change(t, u.ID, p.ID, map[string]string{"server.js": `const http = require("http");
setTimeout(() => http.createServer((req, res) => res.end("late")).listen(process.env.PORT || 3000, "0.0.0.0"), 8000);`})
	testkit.Eventually(t, time.Minute, "version 2 not answering", func() error {
		st, err := v.ov.SandboxStatus(context.Background(), u.ID, sb.ID)
		if err != nil {
			return err
		}
		if st.App.Version != 2 || st.App.Status != sandbox.AppNotAnswering {
			return fmt.Errorf("the app is %s on version %d", st.App.Status, st.App.Version)
		}
		return nil
	})
	st := v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, 30*time.Second)
	if st.App.Version != 2 || st.App.LastGoodVersion == nil || *st.App.LastGoodVersion != 2 {
		t.Fatalf("once it answers: %+v, want version 2 up and the last good one", st.App)
	}
}

// A process stream that brings nothing for longer than the watch's silence bound is broken and
// followed again by the process's pid: the server's end is still seen, with its exit code.
func TestASilentStreamIsFollowedAgainAndTheEndIsSeen(t *testing.T) {
	t.Parallel()
	var logs testkit.LogRecorder
	cfg := fastConfig()
	cfg.IdleTimeout, cfg.ReadyTimeout, cfg.WatchScanEvery = time.Hour, appReadyTimeout, 500*time.Millisecond
	cfg.WatchSilence = 500 * time.Millisecond
	host := sandboxdtest.Start(t)
	b := instance(t, instanceOptions{host: host, config: cfg, work: true, logger: logs.Logger()})
	v := versioned{testBundle: b, host: host, v: versions.New(b.pool, b.svc.Hooks().VersionMade)}
	u, p, sb := v.runningPreview(t)
	v.change(t, u.ID, p.ID, map[string]string{"server.js": quietServer("silent")})
	waitWatchedUp(t, v, sb.ID, 2)
	silent := func() int {
		n := 0
		for _, r := range logs.Records("watch: a dev server's stream broke; connecting again") {
			if r["sandbox_id"] == sb.ID.String() && strings.Contains(r["err"], "silent") {
				n++
			}
		}
		return n
	}
	testkit.Until(t, appSeen, "the silent stream to be broken twice", func() bool { return silent() >= 2 })
	testkit.Until(t, appSeen, "the watch to follow it again", func() bool { return v.svc.Watches(sb.ID) })
	killDevServer(t, host, v.get(t, sb.ID))
	st := v.waitApp(t, u.ID, sb.ID, sandbox.AppExited, appSeen)
	if st.App.ExitCode == nil {
		t.Fatalf("the killed server's end was not read from its stream followed again: %+v", st.App)
	}
	// Sandman's own log tells the problem the exit opened, as an event (INFO).
	testkit.Until(t, appSeen, "the exit's problem told at INFO", func() bool {
		for _, r := range logs.Records("problem opened") {
			if r["project_id"] == p.ID.String() && r["version"] == "2" && r["level"] == "INFO" {
				return true
			}
		}
		return false
	})
}

// An install's lines reach the log store as the install's, and a failing install is its
// version's install problem with that run's lines.
func TestAFailingInstallIsAProblemWithItsLines(t *testing.T) {
	t.Parallel()
	v := appVersions(t, nil)
	ctx := context.Background()
	u, _ := founder(t, v.pool, 5)
	marker := "install-marker-" + uuid.NewString()[:8]
	p, err := projects.New(v.pool).CreateFromFiles(ctx, u.ID, projects.Settings{Name: "Install", StartCommand: "node server.js",
		InstallCommand: `echo "` + marker + ` out"; echo "` + marker + ` err" >&2; exit 7`, Port: 3000},
		[]versions.File{{Path: "server.js", Content: []byte(quietServer("never"))}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := v.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "build-"+uuid.NewString(), false)
	if err != nil {
		t.Fatal(err)
	}
	q := db.New(v.pool)
	testkit.Eventually(t, time.Minute, "the build to fail", func() error {
		b, err := q.GetBuild(ctx, res.Build.ID)
		if err != nil {
			return err
		}
		if b.Status != sandbox.BuildFailed {
			return fmt.Errorf("it is %s (%s)", b.Status, b.Stage)
		}
		return nil
	})
	lines, err := q.ListAppLogLines(ctx, db.ListAppLogLinesParams{ProjectID: p.ID, After: 0, MaxLines: 1000})
	if err != nil {
		t.Fatal(err)
	}
	streams := map[string]bool{}
	for _, l := range lines {
		if l.Source == "install" && strings.HasPrefix(l.Text, marker) {
			streams[l.Stream] = true
		}
	}
	if !streams["stdout"] || !streams["stderr"] {
		t.Fatalf("the install's lines in the log store: %d lines, the install's marker on %v, want stdout and stderr", len(lines), streams)
	}
	problems, err := q.ListAppProblems(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Source != "install" || problems[0].ClosedAt != nil ||
		!strings.Contains(problems[0].Detail, marker+" out") || !strings.Contains(problems[0].Detail, marker+" err") ||
		!strings.Contains(problems[0].Detail, "exited with code 7") {
		t.Fatalf("the project's problems: %+v; want one open install problem with the run's lines and its exit code", problems)
	}
}

// A server that exits right after it first answered keeps its exit code, however the job's hand
// over and the watch's holding of the previous run meet: tried a few times, each a good version
// then one that exits 100 ms after its first answer.
func TestACrashRightAfterTheAppIsUpKeepsItsExitCode(t *testing.T) {
	t.Parallel()
	v := appVersions(t, nil)
	u, p, sb := v.runningPreview(t)
	v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, appSeen)
	for round := range 3 {
		good := v.change(t, u.ID, p.ID, map[string]string{"server.js": quietServer(fmt.Sprintf("good-%d", round))})
		waitWatchedUp(t, v, sb.ID, good.Number)
		flaky := v.change(t, u.ID, p.ID, map[string]string{"server.js": fmt.Sprintf(`const http = require("http"); let once = false;
http.createServer((req, res) => {
  res.end("up %d");
  if (!once) { once = true; setTimeout(() => process.exit(3), 100); }
}).listen(process.env.PORT || 3000, "0.0.0.0");`, round)})
		testkit.Eventually(t, time.Minute, fmt.Sprintf("version %d exited", flaky.Number), func() error {
			st, err := v.ov.SandboxStatus(context.Background(), u.ID, sb.ID)
			if err != nil {
				return err
			}
			if st.App.Version != flaky.Number || st.App.Status != sandbox.AppExited {
				return fmt.Errorf("the app is %s on version %d", st.App.Status, st.App.Version)
			}
			if st.App.ExitCode == nil || *st.App.ExitCode != 3 {
				t.Fatalf("round %d: version %d exited with code %v, want 3 (its stream told it)", round, flaky.Number, st.App.ExitCode)
			}
			return nil
		})
	}
}
