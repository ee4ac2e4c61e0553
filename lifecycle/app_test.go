package lifecycle_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/overview"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/sandboxd/sandboxdtest"
	"sandman/versions"
	"sandman/views"
)

// The app's own state (docs/states.md, "The app"). Every test here runs with a readiness
// timeout of a minute and waits at most a quarter of it: an exit seen only when the timeout
// ran out fails them.

const appReadyTimeout = time.Minute

// appSeen is how long a test waits for the app's state to follow its process: well under the
// readiness timeout.
const appSeen = 15 * time.Second

// brokenServer exits at once, printing its marker.
const brokenServer = `console.log("run output before the crash"); throw new Error("broken on purpose")`

// appVersions is setupVersions with the readiness timeout of these tests.
func appVersions(t testing.TB, host *sandboxdtest.Host) versioned {
	t.Helper()
	if host == nil {
		host = sandboxdtest.Start(t)
	}
	cfg := fastConfig()
	cfg.IdleTimeout = time.Hour
	cfg.ReadyTimeout = appReadyTimeout
	cfg.WatchScanEvery = 500 * time.Millisecond
	b := setupWith(t, host, cfg, true)
	return versioned{testBundle: b, host: host, v: versions.New(b.pool, b.svc.Hooks().VersionMade)}
}

// waitApp waits until the sandbox's app is in status (its API state, SandboxStatus).
func (b *testBundle) waitApp(t testing.TB, owner, id uuid.UUID, status sandbox.AppStatus, within time.Duration) overview.SandboxStatus {
	t.Helper()
	var st overview.SandboxStatus
	testkit.Eventually(t, within, "the app to be "+string(status), func() error {
		var err error
		if st, err = b.ov.SandboxStatus(context.Background(), owner, id); err != nil {
			return err
		}
		if st.App.Status != status {
			return fmt.Errorf("it is %s (version %d, since %s)", st.App.Status, st.App.Version, st.App.Since)
		}
		return nil
	})
	return st
}

// killDevServer kills the sandbox's dev server through envd, as a crash would end it.
func killDevServer(t testing.TB, host *sandboxdtest.Host, sb db.Sandbox) {
	t.Helper()
	if sb.AppPid == nil {
		t.Fatal("the row holds no dev server process")
	}
	c := providerFor(t, host)
	if err := c.SendSignal(context.Background(), e2b.Sandbox{ID: *sb.ProviderID, EnvdAccessToken: sb.EnvdToken, Domain: sb.ProviderDomain},
		int(*sb.AppPid), e2b.SignalKill); err != nil {
		t.Fatalf("kill the dev server: %v", err)
	}
}

// A version whose server exits is exited as soon as it exits, not when the readiness timeout
// ends, with its exit code, the version it runs and the last good one; the sandbox stays
// running, every read agrees, and the history says why with that run's output.
func TestAVersionWhoseServerExitsIsExitedAtOnceAndTheSandboxRuns(t *testing.T) {
	t.Parallel()
	v := appVersions(t, nil)
	u, p, sb := v.runningPreview(t)
	if st := v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, appSeen); st.App.Version != 1 || st.App.LastGoodVersion == nil || *st.App.LastGoodVersion != 1 {
		t.Fatalf("the built preview's app: %+v, want up on version 1, the last good one", st.App)
	}
	v.change(t, u.ID, p.ID, map[string]string{"server.js": brokenServer})
	st := v.waitApp(t, u.ID, sb.ID, sandbox.AppExited, appSeen)
	if st.Sandbox.Status != sandbox.Running {
		t.Fatalf("the sandbox is %s after its version's server exited, want running", st.Sandbox.Status)
	}
	if st.App.Version != 2 || st.App.ExitCode == nil || *st.App.ExitCode != 1 || st.App.LastGoodVersion == nil || *st.App.LastGoodVersion != 1 {
		t.Fatalf("the app: %+v (exit code %v), want version 2 exited with code 1, version 1 the last good", st.App, st.App.ExitCode)
	}
	text := v.waitHistory(t, u.ID, p.ID, "Version 2 didn't start: ")
	if !strings.Contains(text, "exited with code 1") || !strings.Contains(text, "broken on purpose") ||
		!strings.Contains(text, "run output before the crash") {
		t.Fatalf("the history says %q: not that the server exited, with what it printed", text)
	}
	pv := readEveryWay(t, v.testBundle, u.ID, p.ID, sb.ID)
	if !reflect.DeepEqual(pv.App(), st.App) || !pv.App().DoesNotStart() || pv.FailedVersion != 2 || pv.RestoreTo != 1 {
		t.Fatalf("the project's view: app %+v (status read %+v), failed %d, restore %d", pv.App(), st.App, pv.FailedVersion, pv.RestoreTo)
	}
}

// A dev server that crashes while the preview runs is seen: the app is exited with the signal's
// code, the history tells it with its last lines, and the sandbox stays running.
func TestACrashWhileThePreviewRunsIsSeen(t *testing.T) {
	t.Parallel()
	v := appVersions(t, nil)
	u, p, sb := v.runningPreview(t)
	v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, appSeen)
	killDevServer(t, v.host, v.get(t, sb.ID))
	st := v.waitApp(t, u.ID, sb.ID, sandbox.AppExited, appSeen)
	if st.Sandbox.Status != sandbox.Running || st.App.Version != 1 {
		t.Fatalf("after the crash: sandbox %s, app %+v; want running, version 1 exited", st.Sandbox.Status, st.App)
	}
	v.waitHistory(t, u.ID, p.ID, "Version 1 stopped (exit code ")
}

// Waking a sleeping preview whose version's server exits is a wake that worked: the sandbox
// runs, its app is exited, the history says which version doesn't start, and no resume failed.
func TestWakingWithAVersionThatDoesNotStartWorks(t *testing.T) {
	t.Parallel()
	v := appVersions(t, nil)
	ctx := context.Background()
	u, p, sb := v.runningPreview(t)
	v.change(t, u.ID, p.ID, map[string]string{"server.js": brokenServer})
	v.waitApp(t, u.ID, sb.ID, sandbox.AppExited, appSeen)
	if _, err := v.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	v.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)
	if st := v.waitApp(t, u.ID, sb.ID, sandbox.AppStopped, time.Second); st.App.Version != 2 {
		t.Fatalf("the sleeping preview's app: %+v, want stopped on version 2", st.App)
	}
	if _, err := v.svc.Resume(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, appSeen, "the wake to end", func() error {
		if now := v.get(t, sb.ID); now.Status != sandbox.Running {
			return fmt.Errorf("it is %s", now.Status)
		}
		return nil
	})
	st := v.waitApp(t, u.ID, sb.ID, sandbox.AppExited, time.Second)
	if st.App.Version != 2 || st.Sandbox.FailureCause != nil {
		t.Fatalf("after the wake: app %+v, failure cause %v; want version 2 exited and no failure", st.App, st.Sandbox.FailureCause)
	}
	if evs := v.eventsOf(t, sb.ID); len(transitionsTo(evs, sandbox.ResumeFailed)) > 0 {
		t.Fatalf("a resume failed: %s", history(evs))
	}
	if text := v.waitHistory(t, u.ID, p.ID, "Woke with version 2, which doesn't start: "); !strings.Contains(text, "broken on purpose") {
		t.Fatalf("the history says %q, without what the server printed", text)
	}
	if pv := readEveryWay(t, v.testBundle, u.ID, p.ID, sb.ID); pv.FailedVersion != 2 || pv.RestoreTo != 1 {
		t.Fatalf("after the wake the project offers to restore %d for version %d, want 1 for 2", pv.RestoreTo, pv.FailedVersion)
	}
}

// A build whose app exits fails as soon as it exits, saying so.
func TestABuildWhoseAppExitsFailsAtOnce(t *testing.T) {
	t.Parallel()
	v := appVersions(t, nil)
	ctx := context.Background()
	u, _ := founder(t, v.pool, 5)
	p, err := projects.New(v.pool).CreateFromFiles(ctx, u.ID, projects.Settings{Name: "Broken", StartCommand: "node server.js", Port: 3000},
		[]versions.File{{Path: "server.js", Content: []byte(brokenServer)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := v.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "build-"+uuid.NewString(), false)
	if err != nil {
		t.Fatal(err)
	}
	var b db.Build
	testkit.Eventually(t, appSeen, "the build to fail", func() error {
		if b, err = db.New(v.pool).GetBuild(ctx, res.Build.ID); err != nil {
			return err
		}
		if b.Status != sandbox.BuildFailed {
			return fmt.Errorf("it is %s (%s)", b.Status, b.Stage)
		}
		return nil
	})
	if !strings.Contains(views.BuildError(b), `The start command "node server.js" exited with code 1 before it answered on port 3000`) ||
		!strings.Contains(views.BuildError(b), "broken on purpose") {
		t.Fatalf("the build failed with %q: not that the app exited, with what it printed", views.BuildError(b))
	}
}

// A Sandman restart while a preview runs keeps watching it: the new instance, on the same
// database, takes the watch over and sees a crash after the restart.
func TestARestartedSandmanKeepsWatchingThePreview(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	a := appVersions(t, host)
	u, p, sb := a.runningPreview(t)
	a.waitApp(t, u.ID, sb.ID, sandbox.AppUp, appSeen)
	a.Stop(t)
	cfg := fastConfig()
	cfg.IdleTimeout, cfg.ReadyTimeout, cfg.WatchScanEvery = time.Hour, appReadyTimeout, 500*time.Millisecond
	b := instance(t, instanceOptions{host: host, databaseURL: a.DatabaseURL, config: cfg, work: true})
	testkit.Until(t, appSeen, "the new instance to watch the preview", func() bool { return b.svc.Watches(sb.ID) })
	killDevServer(t, host, b.get(t, sb.ID))
	b.waitApp(t, u.ID, sb.ID, sandbox.AppExited, appSeen)
	bv := versioned{testBundle: b, host: host}
	bv.waitHistory(t, u.ID, p.ID, "Version 1 stopped (exit code ")
}

// When the instance that watches a preview dies, another one takes the watch over (its scan
// finds the lock let go) and sees a crash.
func TestAnotherInstanceTakesOverADeadWatcher(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	a := appVersions(t, host)
	cfg := fastConfig()
	cfg.IdleTimeout, cfg.ReadyTimeout, cfg.WatchScanEvery = time.Hour, appReadyTimeout, 500*time.Millisecond
	b := instance(t, instanceOptions{host: host, databaseURL: a.DatabaseURL, config: cfg, work: true})
	u, _, sb := a.runningPreview(t)
	a.waitApp(t, u.ID, sb.ID, sandbox.AppUp, appSeen)
	holder, other := a.testBundle, b
	testkit.Until(t, appSeen, "an instance to watch the preview", func() bool {
		if b.svc.Watches(sb.ID) {
			holder, other = b, a.testBundle
		}
		return a.svc.Watches(sb.ID) || b.svc.Watches(sb.ID)
	})
	// The holder dies: its watch's session ends with it (terminated, as a lost connection is),
	// and the instance stops.
	if _, err := holder.pool.Exec(context.Background(), `SELECT pg_terminate_backend(l.pid) FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.classid = 21335 AND l.objsubid = 2
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
		t.Fatal(err)
	}
	holder.Stop(t)
	testkit.Until(t, appSeen, "the other instance to take the watch over", func() bool { return other.svc.Watches(sb.ID) })
	killDevServer(t, host, other.get(t, sb.ID))
	other.waitApp(t, u.ID, sb.ID, sandbox.AppExited, appSeen)
}
