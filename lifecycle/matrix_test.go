package lifecycle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/apperr"
	"sandman/db"
	"sandman/db/dbtest"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/projects"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// runningSandboxes builds n projects of one founder and waits until their sandboxes run.
func (b *testBundle) runningSandboxes(t testing.TB, n int) (uuid.UUID, []db.Sandbox) {
	t.Helper()
	u, first := founder(t, b.pool, int32(n+5))
	out := make([]db.Sandbox, n)
	for i := range n {
		p := first
		if i > 0 {
			var err error
			if p, err = projects.New(b.pool).CreateFromStarter(context.Background(), u.ID, "", "counter"); err != nil {
				t.Fatal(err)
			}
		}
		res, err := b.svc.StartBuild(context.Background(), lifecycle.Actor{Founder: u.ID}, p.ID, "build-"+p.ID.String(), false)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = res.Sandbox
	}
	for i := range out {
		out[i] = b.waitStatus(t, out[i].ID, sandbox.Running, time.Minute)
	}
	return u.ID, out
}

// trail checks a sandbox's history is one unbroken chain (each event starts where the last one
// ended) that ends in its current state, and returns how many changes moved it into to.
func (b *testBundle) trail(t testing.TB, sb db.Sandbox, to sandbox.Status) int {
	t.Helper()
	evs := b.eventsOf(t, sb.ID)
	for i := 1; i < len(evs); i++ {
		if evs[i].FromStatus != evs[i-1].ToStatus {
			t.Fatalf("the history breaks at event %d: %s", i, history(evs))
		}
	}
	if cur := b.get(t, sb.ID); len(evs) == 0 || evs[len(evs)-1].ToStatus != cur.Status {
		t.Fatalf("the history does not end in the row's state %s: %s", cur.Status, history(evs))
	}
	return len(transitionsTo(evs, to))
}

// TestPostgresRestartWhileWebhooksArrive stops the database while the provider kills sandboxes
// and delivers the webhooks: the deliveries fail (5xx) until it is back, the provider retries
// them, and each kill is applied exactly once, by its webhook.
func TestPostgresRestartWhileWebhooksArrive(t *testing.T) {
	t.Parallel()
	pg := dbtest.NewCluster(t)
	host := sandboxdtest.Start(t, sandboxdtest.WithConfig(func(c *sandboxd.Config) {
		c.WebhookRetries, c.WebhookRetryDelay = 12, 250*time.Millisecond // retries span the outage
	}))
	cfg := fastConfig()
	cfg.IdleTimeout = 10 * time.Minute
	cfg.ReconcileEvery, cfg.EventsEvery = 0, 0 // only the webhooks may carry the kills
	b := instance(t, instanceOptions{host: host, databaseURL: pg.URL, config: cfg, work: true, webhooks: true})
	_, sandboxes := b.runningSandboxes(t, 3)

	pg.Stop(t)
	for _, sb := range sandboxes {
		host.KillFromDashboard(t, *sb.ProviderID)
	}
	// Deliveries are refused while the database is away (each is retried).
	testkit.Until(t, 30*time.Second, "a webhook refused during the outage", func() bool {
		return testkit.MetricValue(t, b.Registry(), "sandman_http_request_duration_seconds",
			map[string]string{"route": "/webhooks/e2b", "status": "500"}) > 0
	})
	pg.Start(t)

	for _, sb := range sandboxes {
		got := b.waitStatus(t, sb.ID, sandbox.Killed, time.Minute)
		if n := b.trail(t, got, sandbox.Killed); n != 1 {
			t.Fatalf("one kill applied %d times: %s", n, history(b.eventsOf(t, sb.ID)))
		}
		evs := b.eventsOf(t, sb.ID)
		if last := evs[len(evs)-1]; last.Source != sandbox.SourceWebhook {
			t.Fatalf("the kill was applied by %s, not its webhook", last.Source)
		}
	}
	var stored, applied int
	if err := b.pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE outcome = 'applied')
		FROM webhook_deliveries WHERE event_type = $1`, lifecycle.EventKilled).Scan(&stored, &applied); err != nil {
		t.Fatal(err)
	}
	if stored != len(sandboxes) || applied != len(sandboxes) {
		t.Fatalf("%d kill deliveries stored, %d applied; want %d of each", stored, applied, len(sandboxes))
	}
	audit := apptest.AuditDB(t, b.pool)
	testkit.Record(t, testkit.Scenario{ID: "postgres-restart-webhooks", Times: len(sandboxes), Counts: audit,
		Injected: "PostgreSQL stopped, 3 sandboxes killed at the provider (their webhooks refused with 500 and retried by the provider), PostgreSQL started again",
		Result:   "each kill stored once and applied exactly once, by its webhook; every history unbroken"})
}

// TestDroppedWebhooksConverge: the provider loses every webhook; the events reader and the
// reconcile still bring every row to the provider's truth, each change recorded once.
func TestDroppedWebhooksConverge(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = 10 * time.Minute
	cfg.EventsEvery = time.Second
	b := instance(t, instanceOptions{host: host, config: cfg, work: true, webhooks: true})
	_, sandboxes := b.runningSandboxes(t, 3)
	host.InjectFault(t, sandboxd.Fault{Webhook: sandboxd.WebhookDrop}) // every delivery, until cleared
	for _, sb := range sandboxes {
		host.KillFromDashboard(t, *sb.ProviderID)
	}
	for _, sb := range sandboxes {
		got := b.waitStatus(t, sb.ID, sandbox.Killed, 30*time.Second)
		if n := b.trail(t, got, sandbox.Killed); n != 1 {
			t.Fatalf("one kill recorded %d times: %s", n, history(b.eventsOf(t, sb.ID)))
		}
		evs := b.eventsOf(t, sb.ID)
		if src := evs[len(evs)-1].Source; src != sandbox.SourceEventsAPI && src != sandbox.SourceReconciler {
			t.Fatalf("the kill came by %s with every webhook dropped", src)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_deliveries WHERE event_type = $1", lifecycle.EventKilled); n != 0 {
		t.Fatalf("%d kill webhooks arrived though every one was dropped", n)
	}
	audit := apptest.AuditDB(t, b.pool)
	testkit.Record(t, testkit.Scenario{ID: "webhooks-dropped", Times: len(sandboxes), Counts: audit,
		Injected: "every webhook dropped by the provider; 3 sandboxes killed at the provider",
		Result:   "each row killed by the events reader or the reconcile, once; every history unbroken"})
}

// count runs a counting query.
func (b *testBundle) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSandboxdRestartMidResume restarts the provider while a resume waits on its connect: the
// connect in flight is cut, the resume tries again once the provider is back, and the preview
// runs (booted on its files: a restart keeps no memory).
func TestSandboxdRestartMidResume(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.PauseAfterReady = "immediate"
	cfg.ReconcileEvery, cfg.EventsEvery = 0, 0 // nobody else calls the provider meanwhile
	cfg.ResumeRetryWait = 2 * time.Second      // the restart's length, on a quiet machine
	b := setupWith(t, host, cfg, true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	res, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "k", false)
	if err != nil {
		t.Fatal(err)
	}
	sb := b.waitStatus(t, res.Sandbox.ID, sandbox.Paused, time.Minute)
	host.InjectFault(t, sandboxd.Fault{Route: connectRoute, SandboxID: *sb.ProviderID, LatencyMs: 5000, Count: 1})
	if _, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 30*time.Second, "the resume's connect to be in flight", func() bool { return remainingUses(t, host, connectRoute) == 0 })
	host.Restart(t)

	// The resume's second attempt finds the provider back, unless the restart outlasted it;
	// then the resume failed cleanly, and the founder's next click resumes it.
	testkit.Eventually(t, time.Minute, "the resume to end", func() error {
		if sb = b.get(t, sb.ID); sb.Status == sandbox.Resuming {
			return fmt.Errorf("it is %s", sb.Status)
		}
		return nil
	})
	resumes := 1
	switch sb.Status {
	case sandbox.Running:
	case sandbox.ResumeFailed:
		t.Logf("the restart outlasted the resume's two attempts: resume_failed (%s); resuming again", failureCause(sb))
		if sb.FailureCause == nil || *sb.FailureCause != sandbox.CauseUnreachable {
			t.Fatalf("failure cause %v", sb.FailureCause)
		}
		if _, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil {
			t.Fatal(err)
		}
		resumes++
	default:
		t.Fatalf("the resume ended %s: %s", sb.Status, history(b.eventsOf(t, sb.ID)))
	}
	sb = b.waitStatus(t, sb.ID, sandbox.Running, time.Minute)
	visits(t, host, sb.PreviewURL)
	if n := b.trail(t, sb, sandbox.Resuming); n != resumes {
		t.Fatalf("%d moves to resuming for %d resumes: %s", n, resumes, history(b.eventsOf(t, sb.ID)))
	}
	audit := apptest.AuditDB(t, b.pool)
	testkit.Record(t, testkit.Scenario{ID: "sandboxd-restart-mid-resume", Times: 1, Counts: audit,
		Injected: "sandboxd restarted while a resume's connect was in flight (held 5 s by a fault)",
		Result:   "running, the preview answering: by the resume's second attempt, or (when the restart outlasts both attempts) resume_failed and the next click; every resume recorded once"})
}

// TestConcurrentPauseResumeAndWebhooks races a founder's pause and resume clicks against each
// other and against the provider's webhooks of those very changes, some delivered late: whatever
// the order, the row ends in the provider's state, with an unbroken history.
func TestConcurrentPauseResumeAndWebhooks(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	cfg := fastConfig()
	cfg.IdleTimeout = 10 * time.Minute
	cfg.ReconcileEvery, cfg.EventsEvery = 0, 0 // no correction from outside the race
	b := instance(t, instanceOptions{host: host, config: cfg, work: true, webhooks: true})
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	sb := b.buildRunning(t, u.ID, p.ID)
	provider := providerFor(t, host)
	const rounds = 12
	ended := map[sandbox.Status]int{}
	for round := range rounds {
		// A delivery held back a random while, so a webhook may land after the next change.
		host.InjectFault(t, sandboxd.Fault{Webhook: sandboxd.WebhookDelay, LatencyMs: 50 + rand.IntN(400), Count: 1})
		var wg sync.WaitGroup
		for _, act := range []func() error{
			func() error { _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); return err },
			func() error { _, err := b.svc.Resume(ctx, u.ID, sb.ID); return err },
			func() error { _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); return err },
		} {
			wg.Go(func() {
				// A click the current state forbids (resume of a running preview, pause of one
				// resuming) is refused as the founder would see it: not a failure here.
				if err := act(); err != nil && !isConflict(err) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		// Settled: no pause, resume or webhook job left to run, nothing in flight.
		var cur db.Sandbox
		testkit.Eventually(t, time.Minute, fmt.Sprintf("round %d to settle", round), func() error {
			n := b.count(t, `SELECT count(*) FROM river_job WHERE kind IN ('pause', 'resume', 'webhook')
				AND state IN ('available', 'running', 'retryable', 'pending') OR (kind = 'pause' AND state = 'scheduled')`)
			cur = b.get(t, sb.ID)
			if n > 0 || cur.Status == sandbox.Resuming {
				return fmt.Errorf("%d jobs left, the sandbox %s", n, cur.Status)
			}
			return nil
		})
		d, err := provider.GetSandbox(ctx, *sb.ProviderID)
		if err != nil {
			t.Fatal(err)
		}
		want := map[e2b.State]sandbox.Status{e2b.StateRunning: sandbox.Running, e2b.StatePaused: sandbox.Paused}[d.State]
		if cur.Status != want {
			t.Fatalf("round %d: the row says %s, the provider %s: %s", round, cur.Status, d.State, history(b.eventsOf(t, sb.ID)))
		}
		b.trail(t, cur, want)
		ended[cur.Status]++
	}
	t.Logf("rounds ended: %v", ended)
	audit := apptest.AuditDB(t, b.pool)
	testkit.Record(t, testkit.Scenario{ID: "pause-resume-webhook-race", Times: rounds, Counts: audit,
		Injected: "per round: two pause clicks and a resume click at once, the provider's webhooks of those changes racing them (one held back 50–450 ms)",
		Result:   "every round ends with the row in the provider's state and an unbroken history"})
}

func isConflict(err error) bool {
	ae, ok := apperr.As(err)
	return ok && ae.Kind == apperr.KindConflict
}
