package lifecycle_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
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

// fastConfig is the tests' lifecycle configuration with an idle pause within seconds and
// the reconciler and sweep every second (the events reader stays off unless a test turns it on).
func fastConfig() lifecycle.Config {
	c := apptest.LifecycleConfig()
	c.IdleTimeout = 4 * time.Second
	c.ReconcileEvery = time.Second
	c.SweepEvery = time.Second
	return c
}

// providerFor is a provider client of its own for the test to act as someone else (the
// provider's dashboard, a crashed worker), configured as the instances' clients are.
func providerFor(t testing.TB, h *sandboxdtest.Host) *e2b.Client {
	t.Helper()
	c, err := e2b.New(apptest.Config(h, "").Provider)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitStatus polls the row until it reaches want (or fails the test after d).
func (b *testBundle) waitStatus(t testing.TB, id uuid.UUID, want sandbox.Status, d time.Duration) db.Sandbox {
	t.Helper()
	var sb db.Sandbox
	testkit.Eventually(t, d, fmt.Sprintf("sandbox %s to be %s", id, want), func() error {
		var err error
		if sb, err = db.New(b.pool).GetSandbox(context.Background(), id); err != nil {
			return err
		}
		if sb.Status == want {
			return nil
		}
		build, _ := db.New(b.pool).GetBuild(context.Background(), sb.BuildID)
		return fmt.Errorf("it is %s (build %s %q: %s)", sb.Status, build.Status, build.Stage, views.BuildError(build))
	})
	return sb
}

var visitsRe = regexp.MustCompile(`Visits: (\d+)`)

// visits loads the counter's page and returns its count.
func visits(t testing.TB, h *sandboxdtest.Host, url string) int {
	t.Helper()
	res, err := h.HTTPClient().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	m := visitsRe.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no visit count at %s (%d): %.300s", url, res.StatusCode, body)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

func TestPreviewLifecycleEndToEnd(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	b := setupWith(t, host, fastConfig(), true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)

	res, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "build-1", false)
	if err != nil {
		t.Fatal(err)
	}
	sb := b.waitStatus(t, res.Sandbox.ID, sandbox.Running, time.Minute)
	if sb.PreviewURL == "" || sb.ProviderID == nil {
		t.Fatalf("running without a preview: %+v", sb)
	}
	build, _ := db.New(b.pool).GetBuild(ctx, sb.BuildID)
	if build.Status != sandbox.BuildReady {
		t.Fatalf("build %s", build.Status)
	}
	first := visits(t, host, sb.PreviewURL)
	if n := visits(t, host, sb.PreviewURL); n != first+1 {
		t.Fatalf("counter went %d → %d", first, n)
	}

	// Idle: nobody reports activity, so the sandbox is paused at its deadline (memory snapshot).
	sb = b.waitStatus(t, sb.ID, sandbox.Paused, 20*time.Second)
	if sb.SnapshotKind == nil || *sb.SnapshotKind != sandbox.PauseMemory {
		t.Fatalf("snapshot kind %v", sb.SnapshotKind)
	}

	// Resume: resuming at once, then running with the count kept by the memory snapshot.
	resumed, err := b.svc.Resume(ctx, u.ID, sb.ID)
	if err != nil || resumed.Status != sandbox.Resuming {
		t.Fatalf("resume: %+v %v", resumed.Status, err)
	}
	sb = b.waitStatus(t, sb.ID, sandbox.Running, 30*time.Second)
	if n := visits(t, host, sb.PreviewURL); n <= first+1 {
		t.Fatalf("count after a memory resume = %d, want > %d", n, first+1)
	}

	// Killed in the provider's dashboard: reconciliation alone finds it (webhooks are off).
	host.KillFromDashboard(t, *sb.ProviderID)
	sb = b.waitStatus(t, sb.ID, sandbox.Killed, 5*time.Second)

	// Rebuild: one credit, a new running sandbox marked Recreated.
	before := credits(t, b.pool, u.ID)
	rb, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "rebuild-1", true)
	if err != nil {
		t.Fatal(err)
	}
	fresh := b.waitStatus(t, rb.Sandbox.ID, sandbox.Running, time.Minute)
	if !fresh.Recreated {
		t.Fatal("rebuilt sandbox not marked recreated")
	}
	if got := credits(t, b.pool, u.ID); got != before-1 {
		t.Fatalf("credits %d → %d", before, got)
	}
	// The readiness check itself is the server's first visit.
	if n := visits(t, host, fresh.PreviewURL); n > 2 {
		t.Fatalf("a fresh build counts from scratch, got %d", n)
	}
	// The killed one stays killed (gone is final).
	if old, _ := db.New(b.pool).GetSandbox(ctx, sb.ID); old.Status != sandbox.Killed {
		t.Fatalf("old sandbox became %s", old.Status)
	}

	// The badge lasts until the rebuilt preview first sleeps, and does not come back with it.
	if _, err := b.svc.RequestPause(ctx, u.ID, fresh.ID); err != nil {
		t.Fatal(err)
	}
	if paused := b.waitStatus(t, fresh.ID, sandbox.Paused, 30*time.Second); paused.Recreated {
		t.Fatal("a paused rebuilt preview still shows Recreated")
	}
	if _, err := b.svc.Resume(ctx, u.ID, fresh.ID); err != nil {
		t.Fatal(err)
	}
	if resumed := b.waitStatus(t, fresh.ID, sandbox.Running, 30*time.Second); resumed.Recreated {
		t.Fatal("the badge came back with the resume")
	}

	// The project's history names every cause, across both sandboxes, newest first. (The
	// idle timeout is short here, so an idle pause may slip in after any running state.)
	hist, err := b.ov.History(ctx, u.ID, p.ID, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	requireHistory(t, b.svc, hist, "Build started (1 credit)", "Preview ready", "Paused after 4 s without activity",
		"Resume started by you", "Resumed by you", "Found gone when checked with the provider",
		"Rebuilt from your saved files (1 credit)", "Preview ready", "Resume started by you", "Resumed by you")
	// Drawn with an older state, the history stops at that state's event.
	if upTo, err := b.ov.History(ctx, u.ID, p.ID, hist[2].ID); err != nil || len(upTo) == 0 || upTo[0].ID != hist[2].ID || historyText(b.svc, upTo[0]) != historyText(b.svc, hist[2]) {
		t.Fatalf("history up to %d starts with %+v (%v)", hist[2].ID, upTo, err)
	}
	if other, err := b.ov.History(ctx, uuid.New(), p.ID, math.MaxInt64); err != nil || len(other) != 0 {
		t.Fatalf("another founder reads this project's history: %v %v", other, err)
	}
}

// historyText is a history entry's sentence, as the build page writes it.
func historyText(svc *lifecycle.Service, e overview.HistoryEntry) string {
	return views.EventText(e.SandboxEvent, e.Kind, svc.Deadlines().IdleTimeout)
}

// requireHistory fails unless the history, read oldest first, holds want in that order, and
// nothing in it but the sentences a founder is meant to read (a fallback means a move no rule
// names).
func requireHistory(t *testing.T, svc *lifecycle.Service, hist []overview.HistoryEntry, want ...string) {
	t.Helper()
	var texts []string
	for i := len(hist) - 1; i >= 0; i-- {
		texts = append(texts, historyText(svc, hist[i]))
		if i > 0 && hist[i].ID >= hist[i-1].ID {
			t.Fatalf("history not newest first: %+v", hist)
		}
	}
	next := 0
	for _, text := range texts {
		if next < len(want) && text == want[next] {
			next++
		} else if text != "Paused after 4 s without activity" && text != "Paused by you" {
			t.Fatalf("unexpected %q in the history %q (want %q in order)", text, texts, want)
		}
	}
	if next < len(want) {
		t.Fatalf("history %q lacks %q (want %q in order)", texts, want[next:], want)
	}
}

func TestFilesystemPauseRestartsDevServer(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	b := setupWith(t, host, fastConfig(), true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	if _, err := b.pool.Exec(ctx, "UPDATE projects SET pause_kind = 'filesystem' WHERE id = $1", p.ID); err != nil {
		t.Fatal(err)
	}
	res, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "k", false)
	if err != nil {
		t.Fatal(err)
	}
	sb := b.waitStatus(t, res.Sandbox.ID, sandbox.Running, time.Minute)
	for range 3 {
		visits(t, host, sb.PreviewURL)
	}
	before := visits(t, host, sb.PreviewURL)
	if _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	sb = b.waitStatus(t, sb.ID, sandbox.Paused, 20*time.Second)
	if *sb.SnapshotKind != sandbox.PauseFilesystem {
		t.Fatalf("snapshot %s", *sb.SnapshotKind)
	}
	if _, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	sb = b.waitStatus(t, sb.ID, sandbox.Running, 30*time.Second)
	// A cold boot: the files were kept and the server was started again, counting afresh
	// (the readiness check is its first visit).
	if n := visits(t, host, sb.PreviewURL); n > 2 || n >= before {
		t.Fatalf("count after a filesystem-only resume = %d (before the pause %d), want a fresh count", n, before)
	}
}

// A preview's idle timeout counts from the moment it became ready, not from when its build
// began: a build that takes longer than the timeout (its install sleeps past it) is not paused
// the moment it is ready, and its first pause is the idle one, a whole timeout after readiness.
func TestIdleTimeoutCountsFromReadiness(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = 3 * time.Second
	b := setupWith(t, host, cfg, true)
	u, _ := founder(t, b.pool, 5)
	var files []versions.File
	for path, content := range healApp {
		files = append(files, versions.File{Path: path, Content: []byte(content)})
	}
	p, err := projects.New(b.pool).CreateFromFiles(context.Background(), u.ID, projects.Settings{Name: "Slow install",
		InstallCommand: "sleep 5", StartCommand: "node server.js", Port: 3000, PauseKind: sandbox.PauseMemory}, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	sb := b.buildRunning(t, u.ID, p.ID)
	sb = b.waitStatus(t, sb.ID, sandbox.Paused, 30*time.Second)

	var created, ready, paused *db.SandboxEvent
	for _, ev := range b.eventsOf(t, sb.ID) {
		switch {
		case ev.ToStatus == sandbox.Starting && created == nil:
			created = &ev
		case ev.ToStatus == sandbox.Running && ready == nil:
			ready = &ev
		case ev.ToStatus == sandbox.Paused && paused == nil:
			paused = &ev
		}
	}
	if created == nil || ready == nil || paused == nil {
		t.Fatalf("events: created %v, ready %v, paused %v", created, ready, paused)
	}
	if took := ready.CreatedAt.Sub(created.CreatedAt); took <= cfg.IdleTimeout {
		t.Fatalf("the build took %v, not longer than the idle timeout %v: the test proves nothing", took, cfg.IdleTimeout)
	}
	if paused.Reason != sandbox.ReasonIdle {
		t.Fatalf("the first pause was %q, want the idle one", paused.Reason)
	}
	if awake := paused.CreatedAt.Sub(ready.CreatedAt); awake < cfg.IdleTimeout {
		t.Fatalf("paused %v after it became ready, before its idle timeout (%v) from readiness", awake, cfg.IdleTimeout)
	}
}
