package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sandman/apperr"
	"sandman/db"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/overview"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
	"sandman/versions"
)

// versioned is an instance with the versions service production wires to it.
type versioned struct {
	*testBundle
	host *sandboxdtest.Host
	v    *versions.Service
}

func setupVersions(t testing.TB) versioned {
	t.Helper()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = time.Hour // the tests pause when they mean to
	b := setupWith(t, host, cfg, true)
	return versioned{testBundle: b, host: host, v: versions.New(b.pool, b.svc.Hooks().VersionMade)}
}

// runningPreview is a new founder's project with a preview running its version 1.
func (v versioned) runningPreview(t testing.TB) (db.User, db.Project, db.Sandbox) {
	t.Helper()
	u, _ := founder(t, v.pool, 5)
	p := healProject(t, v.testBundle, u.ID, sandbox.PauseMemory, "")
	return u, p, v.buildRunning(t, u.ID, p.ID)
}

// change makes a version of the project from files written over the current one (and deleted
// paths), failing the test on any error.
func (v versioned) change(t testing.TB, owner, project uuid.UUID, files map[string]string, del ...string) db.Version {
	t.Helper()
	c := versions.Change{Source: versions.SourceAPI, Delete: del}
	for p, content := range files {
		c.Files = append(c.Files, versions.File{Path: p, Content: []byte(content)})
	}
	res, err := v.v.Create(context.Background(), owner, project, c)
	if err != nil || res.Unchanged {
		t.Fatalf("make a version: %v (unchanged %v)", err, res.Unchanged)
	}
	return res.Version
}

// waitHistory waits until the project's history has an entry starting with prefix.
func (v versioned) waitHistory(t testing.TB, owner, project uuid.UUID, prefix string) string {
	t.Helper()
	var found string
	testkit.Eventually(t, time.Minute, "the history to say "+prefix, func() error {
		texts, _ := historyTexts(t, v.testBundle, owner, project)
		for _, s := range texts {
			if strings.HasPrefix(s, prefix) {
				found = s
				return nil
			}
		}
		return fmt.Errorf("it says %q", texts)
	})
	return found
}

// A running Counter shows version 2's change in its preview, restarted in place: it never
// leaves running, no credit is spent, and its history says the version is live.
func TestRunningPreviewTakesANewVersionInPlace(t *testing.T) {
	t.Parallel()
	v := setupVersions(t)
	u, p := founder(t, v.pool, 5)
	sb := v.buildRunning(t, u.ID, p.ID)
	balance := credits(t, v.pool, u.ID)
	files, err := projects.StarterFiles("counter")
	if err != nil {
		t.Fatal(err)
	}
	var server string
	for _, f := range files {
		if f.Path == "server.js" {
			server = strings.Replace(string(f.Content), "Counted in memory", "Version two counts in memory", 1)
		}
	}
	v2 := v.change(t, u.ID, p.ID, map[string]string{"server.js": server})
	text := v.waitHistory(t, u.ID, p.ID, "Version 2 is live")
	if !strings.HasPrefix(text, "Version 2 is live (1 file changed, ") {
		t.Fatalf("history %q", text)
	}
	_, body := get(t, v.host, sb.PreviewURL, "/")
	if !strings.Contains(body, "Version two counts in memory") {
		t.Fatalf("the preview shows %q, not version 2", body)
	}
	now := v.get(t, sb.ID)
	if now.Status != sandbox.Running || now.DeployedVersionID != v2.ID || now.DeployingVersionID != nil {
		t.Fatalf("after the apply: %s, runs %v (want %v), applying %v", now.Status, now.DeployedVersionID, v2.ID, now.DeployingVersionID)
	}
	if evs := v.eventsOf(t, sb.ID); len(transitionsTo(evs, sandbox.Running)) != 1 || slices.ContainsFunc(evs, func(e db.SandboxEvent) bool {
		return e.FromStatus == sandbox.Running && e.ToStatus != sandbox.Running
	}) {
		t.Fatalf("the preview left running: %s", history(evs))
	}
	if got := credits(t, v.pool, u.ID); got != balance {
		t.Fatalf("credits %d after the version, %d before: a version is free", got, balance)
	}
}

// A paused preview stays paused when a version is made, and wakes with it: the check applies
// it, the preview serves it, and the history says so.
func TestPausedPreviewWakesWithTheNewestVersion(t *testing.T) {
	t.Parallel()
	v := setupVersions(t)
	ctx := context.Background()
	u, p, sb := v.runningPreview(t)
	if _, err := v.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	sb = v.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)
	eventsBefore := len(v.eventsOf(t, sb.ID))
	v.change(t, u.ID, p.ID, map[string]string{"page.html": "<h1>Version two</h1>\n"})
	v3 := v.change(t, u.ID, p.ID, map[string]string{"page.html": "<h1>Version three</h1>\n", "lib/new.txt": "new\n"}, "lib/data.txt")
	var jobs int
	if err := v.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'deploy'`).Scan(&jobs); err != nil || jobs != 0 {
		t.Fatalf("%d apply jobs for a paused preview (%v), want none", jobs, err)
	}
	if now := v.get(t, sb.ID); now.Status != sandbox.Paused || len(v.eventsOf(t, sb.ID)) != eventsBefore {
		t.Fatalf("a version woke the paused preview: %s, %s", now.Status, history(v.eventsOf(t, sb.ID)[eventsBefore:]))
	}
	pv, err := v.ov.Project(ctx, u.ID, p.ID)
	if err != nil || pv.Waiting() != 3 || pv.DeployedVersion != 1 {
		t.Fatalf("the page's view: waiting %d, runs %d (%v); want version 3 waiting on version 1", pv.Waiting(), pv.DeployedVersion, err)
	}
	if _, err := v.svc.Resume(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	sb = v.waitStatus(t, sb.ID, sandbox.Running, time.Minute)
	serves(t, v.host, sb.PreviewURL, "/", "<h1>Version three</h1>\n")
	serves(t, v.host, sb.PreviewURL, "/lib/new.txt", "new\n")
	if status, _ := get(t, v.host, sb.PreviewURL, "/lib/data.txt"); status != http.StatusNotFound {
		t.Fatalf("a file version 3 removed answers %d, want it gone (404)", status)
	}
	if sb.DeployedVersionID != v3.ID {
		t.Fatalf("it runs %v, want version 3 (%v)", sb.DeployedVersionID, v3.ID)
	}
	v.waitHistory(t, u.ID, p.ID, "Woke with version 3 (3 files changed since it slept)")
}

// A file deleted behind Sandman's back comes back with the current version's content, not the
// content of the version the preview was built from.
func TestLostFileComesBackAsTheCurrentVersion(t *testing.T) {
	t.Parallel()
	v := setupVersions(t)
	ctx := context.Background()
	u, p, sb := v.runningPreview(t)
	v.change(t, u.ID, p.ID, map[string]string{"page.html": "<h1>Version two</h1>\n"})
	v.waitHistory(t, u.ID, p.ID, "Version 2 is live")
	if _, err := v.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	sb = v.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)
	v.host.DamageAtResume(t, *sb.ProviderID, sandboxd.DamageDelete, "app/page.html")
	if _, err := v.svc.Resume(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	sb = v.waitStatus(t, sb.ID, sandbox.Running, time.Minute)
	serves(t, v.host, sb.PreviewURL, "/", "<h1>Version two</h1>\n")
}

// A version that changes package.json runs the install command before the server restarts.
func TestVersionChangingDependenciesRunsTheInstall(t *testing.T) {
	t.Parallel()
	v := setupVersions(t)
	ctx := context.Background()
	u, _ := founder(t, v.pool, 5)
	files := []versions.File{{Path: "server.js", Content: []byte(healApp["server.js"])}, {Path: "package.json", Content: []byte(`{"name":"a"}`)}}
	p, err := projects.New(v.pool).CreateFromFiles(ctx, u.ID, projects.Settings{Name: "Installs",
		InstallCommand: "echo installed >> installs.txt", StartCommand: "node server.js", Port: 3000}, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := v.buildRunning(t, u.ID, p.ID)
	serves(t, v.host, sb.PreviewURL, "/installs.txt", "installed\n")
	v.change(t, u.ID, p.ID, map[string]string{"notes.txt": "no dependency changed"})
	v.waitHistory(t, u.ID, p.ID, "Version 2 is live")
	serves(t, v.host, sb.PreviewURL, "/installs.txt", "installed\n")
	v.change(t, u.ID, p.ID, map[string]string{"package.json": `{"name":"a","dependencies":{}}`})
	v.waitHistory(t, u.ID, p.ID, "Version 3 is live")
	serves(t, v.host, sb.PreviewURL, "/installs.txt", "installed\ninstalled\n")
}

// A version whose server cannot start says so with what the server printed, the preview stays
// running, and restoring the version before it brings the preview back.
func TestVersionThatDoesNotStartIsUndoneByARestore(t *testing.T) {
	t.Parallel()
	v := setupVersions(t)
	ctx := context.Background()
	u, p, sb := v.runningPreview(t)
	v.change(t, u.ID, p.ID, map[string]string{"server.js": `throw new Error("broken on purpose in version 2")`})
	text := v.waitHistory(t, u.ID, p.ID, "Version 2 didn't start: ")
	if !strings.Contains(text, "broken on purpose in version 2") {
		t.Fatalf("the failure %q does not show what the server printed", text)
	}
	if pv := readEveryWay(t, v.testBundle, u.ID, p.ID, sb.ID); pv.FailedVersion != 2 || pv.RestoreTo != 1 {
		t.Fatalf("the project offers to restore %d after version %d failed, want 1 after 2", pv.RestoreTo, pv.FailedVersion)
	}
	if now := v.get(t, sb.ID); now.Status != sandbox.Running {
		t.Fatalf("the preview is %s after its version failed, want still running", now.Status)
	}
	res, err := v.v.Restore(ctx, u.ID, p.ID, 1, nil)
	if err != nil || res.Version.Number != 3 {
		t.Fatalf("restore version 1: %+v, %v", res.Version, err)
	}
	v.waitHistory(t, u.ID, p.ID, "Version 3 is live")
	serves(t, v.host, sb.PreviewURL, "/", healApp["page.html"])
}

// A rebuild builds the project's current version.
func TestRebuildBuildsTheCurrentVersion(t *testing.T) {
	t.Parallel()
	v := setupVersions(t)
	ctx := context.Background()
	u, p, sb := v.runningPreview(t)
	if _, err := v.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	v.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)
	v2 := v.change(t, u.ID, p.ID, map[string]string{"page.html": "<h1>Rebuilt on version two</h1>\n"})
	res, err := v.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "rebuild-"+uuid.NewString(), true)
	if err != nil {
		t.Fatal(err)
	}
	if res.Build.FilesVersionID != v2.ID {
		t.Fatalf("the rebuild builds %v, want version 2 (%v)", res.Build.FilesVersionID, v2.ID)
	}
	nsb := v.waitStatus(t, res.Sandbox.ID, sandbox.Running, time.Minute)
	serves(t, v.host, nsb.PreviewURL, "/", "<h1>Rebuilt on version two</h1>\n")
	if pv := readEveryWay(t, v.testBundle, u.ID, p.ID, sb.ID); pv.Sandbox.ID != nsb.ID {
		t.Fatalf("the project of the old sandbox shows sandbox %v, want the rebuild's %v", pv.Sandbox.ID, nsb.ID)
	}
}

// readEveryWay reads a project's state by its id (Project, two queries), by one of its
// sandboxes' (ProjectOfSandbox, one query: the live feed's) and in the founder's list (Projects,
// the dashboard's and the API's list), and that sandbox's status (SandboxStatus, the JSON status
// read's); it fails t unless all read the same, and returns the state.
func readEveryWay(t *testing.T, v *testBundle, owner, projectID, sandboxID uuid.UUID) overview.ProjectView {
	t.Helper()
	ctx := context.Background()
	// A write between two reads (the reconcile marks the row verified every second in these
	// tests) makes them differ rightly: they are all read again, a few times, until they agree.
	var byID overview.ProjectView
	var disagree error
	for try := 0; try < 5; try++ {
		if byID, disagree = readAllWays(ctx, v, owner, projectID, sandboxID); disagree == nil {
			break
		}
	}
	if disagree != nil {
		t.Fatal(disagree)
	}
	var ae *apperr.Error
	if _, err := v.ov.ProjectOfSandbox(ctx, uuid.New(), sandboxID); !errors.As(err, &ae) || ae.Kind != apperr.KindNotFound {
		t.Fatalf("another founder's read of the sandbox's project: %v, want not found", err)
	}
	if _, err := v.ov.SandboxStatus(ctx, uuid.New(), sandboxID); !errors.As(err, &ae) || ae.Kind != apperr.KindNotFound {
		t.Fatalf("another founder's status read of the sandbox: %v, want not found", err)
	}
	return byID
}

// Ten writers at once on a running preview: every version is numbered once, and the preview
// ends on the newest, each applied at most once.
func TestPreviewEndsOnTheNewestOfManyVersions(t *testing.T) {
	t.Parallel()
	v := setupVersions(t)
	u, p, sb := v.runningPreview(t)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { v.change(t, u.ID, p.ID, map[string]string{fmt.Sprintf("w%d.txt", i): "x"}) })
	}
	wg.Wait()
	cur, err := db.New(v.pool).GetCurrentVersion(context.Background(), p.ID)
	if err != nil || cur.Number != 11 {
		t.Fatalf("current version %d (%v), want 11", cur.Number, err)
	}
	testkit.Eventually(t, time.Minute, "the preview to run version 11", func() error {
		if now := v.get(t, sb.ID); now.DeployedVersionID != cur.ID || now.DeployingVersionID != nil {
			return fmt.Errorf("it runs %v, applying %v", now.DeployedVersionID, now.DeployingVersionID)
		}
		return nil
	})
	for i := range 10 {
		serves(t, v.host, sb.PreviewURL, fmt.Sprintf("/w%d.txt", i), "x")
	}
	live := map[int32]int{}
	for _, e := range v.eventsOf(t, sb.ID) {
		if e.Reason == sandbox.ReasonVersionLive {
			live[*e.VersionNumber]++
		}
	}
	for n, times := range live {
		if times > 1 {
			t.Fatalf("version %d applied %d times: %v", n, times, live)
		}
	}
	if live[11] != 1 {
		t.Fatalf("the newest version was not applied: %v", live)
	}
}

// A version's writer holds the project's lock when it takes the sandbox's; an apply recording
// its outcome holds the sandbox's and writes its row twice, which checks the row's reference to
// the project again. The project's lock must let that check through, or the two deadlock
// (PostgreSQL kills one: a version the founder made fails).
func TestProjectLockLetsAnApplyRecordItsOutcome(t *testing.T) {
	t.Parallel()
	v := setupVersions(t)
	ctx := context.Background()
	u, p, sb := v.runningPreview(t)
	writer := holdProjectLock(t, v, u.ID, p.ID)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := db.InTx(rctx, v.pool, func(tx db.Tx) error {
		if _, err := tx.GetSandboxForUpdate(rctx, sb.ID); err != nil {
			return err
		}
		if err := tx.SetSandboxDeployed(rctx, db.SetSandboxDeployedParams{ID: sb.ID, VersionID: sb.DeployedVersionID}); err != nil {
			return err
		}
		return tx.EndSandboxDeploy(rctx, db.EndSandboxDeployParams{ID: sb.ID})
	})
	if err != nil {
		t.Fatalf("an apply recording its outcome waited on the project's lock: %v", err)
	}
	if _, err := db.New(writer).GetCurrentSandboxByProjectForUpdate(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
}

// A new version's writer holds the project's lock and waits for the sandbox's (versionMade);
// the app's writer holds the sandbox's. An app seen up records its last good version without
// waiting for the project's lock: when it wrote the project's row, ten versions made at once
// while the app came up deadlocked with it (docs/architecture.md, "Data and SQL").
func TestAnAppSeenUpNeverWaitsForTheProjectsLock(t *testing.T) {
	t.Parallel()
	v := setupVersions(t)
	ctx := context.Background()
	u, p, sb := v.runningPreview(t)
	st := v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, time.Minute)
	run := st.Sandbox.AppRunID
	if run == nil {
		t.Fatal("the running preview's row holds no run")
	}
	writer := holdProjectLock(t, v, u.ID, p.ID)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, to := range []sandbox.AppStatus{sandbox.AppNotAnswering, sandbox.AppUp} {
		if err := v.svc.SetAppStatus(rctx, sb.ID, *run, to); err != nil {
			t.Fatalf("the app's writer, recording %s, waited on the project's lock: %v", to, err)
		}
	}
	if _, err := db.New(writer).GetCurrentSandboxByProjectForUpdate(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if err := writer.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if st := v.waitApp(t, u.ID, sb.ID, sandbox.AppUp, time.Minute); st.App.LastGoodVersion == nil || *st.App.LastGoodVersion != 1 {
		t.Fatalf("the last good version is %v, want 1", st.App.LastGoodVersion)
	}
}

// holdProjectLock takes the project's lock as a version's writer does, in a transaction the
// test ends (rolled back at its end if the test does not end it first).
func holdProjectLock(t *testing.T, v versioned, owner, projectID uuid.UUID) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	writer, err := v.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = writer.Rollback(ctx) })
	if _, err := db.New(writer).LockProjectByOwner(ctx, db.LockProjectByOwnerParams{ID: projectID, OwnerID: owner}); err != nil {
		t.Fatal(err)
	}
	return writer
}

// readAllWays is readEveryWay's reads, once: an error says which two disagree.
func readAllWays(ctx context.Context, v *testBundle, owner, projectID, sandboxID uuid.UUID) (overview.ProjectView, error) {
	byID, err := v.ov.Project(ctx, owner, projectID)
	if err != nil {
		return byID, err
	}
	bySandbox, err := v.ov.ProjectOfSandbox(ctx, owner, sandboxID)
	if err != nil {
		return byID, err
	}
	if !reflect.DeepEqual(byID, bySandbox) {
		return byID, fmt.Errorf("the project's state read by its sandbox differs from the one read by its id:\n%+v\n%+v\nsandboxes:\n%+v\n%+v",
			bySandbox, byID, deref(bySandbox.Sandbox), deref(byID.Sandbox))
	}
	list, credits, err := v.ov.Projects(ctx, owner)
	if err != nil {
		return byID, err
	}
	if want, err := db.New(v.pool).GetUserCredits(ctx, owner); err != nil || credits != want {
		return byID, fmt.Errorf("the founder's list says %d credits, want %d (%v)", credits, want, err)
	}
	i := slices.IndexFunc(list, func(pv overview.ProjectView) bool { return pv.Project.ID == projectID })
	if i < 0 {
		return byID, fmt.Errorf("the founder's list has no project %v", projectID)
	}
	// The list leaves out the version to restore and its problem (its cards tell only the
	// count of open problems).
	want := byID
	want.FailedVersion, want.RestoreTo, want.Problem = 0, 0, nil
	if !reflect.DeepEqual(list[i], want) {
		return byID, fmt.Errorf("the project's state in the founder's list differs from the one read by its id:\n%+v\n%+v", list[i], want)
	}
	st, err := v.ov.SandboxStatus(ctx, owner, sandboxID)
	if err != nil {
		return byID, err
	}
	row, err := v.ov.OwnedSandbox(ctx, owner, sandboxID)
	if err != nil {
		return byID, err
	}
	current := byID.Sandbox.ID == sandboxID
	if !reflect.DeepEqual(st.Sandbox, row) || st.Current != current ||
		current && (st.DeployedVersion != byID.DeployedVersion || st.Waiting != byID.Waiting() || !reflect.DeepEqual(st.App, byID.App())) {
		return byID, fmt.Errorf("the sandbox's status read (current %v, version %d, waiting %d, app %+v) differs from its project's state (sandbox %v, version %d, waiting %d, app %+v):\n%+v\n%+v",
			st.Current, st.DeployedVersion, st.Waiting, st.App, byID.Sandbox.ID, byID.DeployedVersion, byID.Waiting(), byID.App(), st.Sandbox, row)
	}
	return byID, nil
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
