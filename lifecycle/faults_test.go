package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app/apptest"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

const pauseRoute = "POST /sandboxes/{sandboxID}/pause"

// riverJob is what a test needs of a River job row.
type riverJob struct {
	State   string
	Attempt int
	Errors  int
}

// requestedPauses lists the sandbox's pause jobs that a founder asked for (not idle ones).
func requestedPauses(t testing.TB, b *testBundle, id uuid.UUID) []riverJob {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT state::text, attempt, coalesce(array_length(errors, 1), 0)
		FROM river_job WHERE kind = 'pause' AND args->>'sandbox_id' = $1 AND NOT (args->>'idle')::boolean`, id.String())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []riverJob
	for rows.Next() {
		var j riverJob
		if err := rows.Scan(&j.State, &j.Attempt, &j.Errors); err != nil {
			t.Fatal(err)
		}
		out = append(out, j)
	}
	return out
}

// TestProviderFaultsAreRetriedByTheClient pauses a sandbox through injected provider faults:
// the e2b client absorbs them within the one pause job (River's own retry, seconds later, must
// not be what saves it), and a 429 is retried only after its Retry-After.
func TestProviderFaultsAreRetriedByTheClient(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, name string
		fault    sandboxd.Fault
		tweak    func(*e2b.Config)
		// minWait is the least time the pause can take (Retry-After); 0: no bound.
		minWait time.Duration
	}{
		{id: "provider-500-pause", name: "5xx answers", fault: sandboxd.Fault{Status: 500, Count: 3}},
		{
			id: "provider-slow-pause", name: "a call that hangs past the attempt timeout", fault: sandboxd.Fault{LatencyMs: 10_000, Count: 2},
			tweak: func(c *e2b.Config) { c.AttemptTimeout = time.Second },
		},
		{id: "provider-429-pause", name: "429 with Retry-After", fault: sandboxd.Fault{Status: 429, RetryAfterSeconds: 2, Count: 1}, minWait: 2 * time.Second},
		{id: "provider-503-pause", name: "503 with Retry-After", fault: sandboxd.Fault{Status: 503, RetryAfterSeconds: 1, Count: 1}, minWait: time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host := sandboxdtest.Start(t)
			var tweaks []func(*e2b.Config)
			if tt.tweak != nil {
				tweaks = append(tweaks, tt.tweak)
			}
			cfg := fastConfig()
			cfg.IdleTimeout = 10 * time.Minute
			b := setupWith(t, host, cfg, true, tweaks...)
			ctx := context.Background()
			u, p := founder(t, b.pool, 5)
			sb := b.buildRunning(t, u.ID, p.ID)

			f := tt.fault
			f.Route, f.SandboxID = pauseRoute, *sb.ProviderID
			host.InjectFault(t, f)
			start := time.Now()
			if _, err := b.svc.RequestPause(ctx, u.ID, sb.ID); err != nil {
				t.Fatal(err)
			}
			sb = b.waitStatus(t, sb.ID, sandbox.Paused, time.Minute)
			took := time.Since(start)

			if left := remainingUses(t, host, pauseRoute); left != 0 {
				t.Fatalf("%d faulty calls were never made: the pause did not go through the fault", left)
			}
			// River records the job's end just after its work is done.
			var jobs []riverJob
			testkit.Until(t, 30*time.Second, "the pause job to finish", func() bool {
				jobs = requestedPauses(t, b, sb.ID)
				return len(jobs) != 1 || jobs[0].State != "running"
			})
			if len(jobs) != 1 || jobs[0].State != "completed" || jobs[0].Attempt != 1 || jobs[0].Errors != 0 {
				t.Fatalf("pause jobs %+v, want one completed at its first attempt", jobs)
			}
			if took < tt.minWait {
				t.Fatalf("the pause went through after %s, before the provider's Retry-After of %s", took, tt.minWait)
			}
			// The provider agrees: the sandbox is paused there.
			d, err := providerFor(t, host).GetSandbox(ctx, *sb.ProviderID)
			if err != nil || d.State != e2b.StatePaused {
				t.Fatalf("provider state %q (%v), want paused", d.State, err)
			}
			audit := apptest.AuditDB(t, b.pool)
			injected := fmt.Sprintf("the provider's pause route answering %d", f.Status)
			if f.Status == 0 {
				injected = fmt.Sprintf("the provider's pause route hanging %d s, past the client's attempt timeout (1 s)", f.LatencyMs/1000)
			} else if f.RetryAfterSeconds > 0 {
				injected += fmt.Sprintf(" with Retry-After: %d", f.RetryAfterSeconds)
			}
			testkit.Record(t, testkit.Scenario{ID: tt.id, Times: f.Count, Counts: audit,
				Injected: injected,
				Result:   "paused by the one pause job at its first attempt (the client's retries absorb it; a Retry-After is honoured); the provider agrees"})
		})
	}
}

// TestOpenBreakerMarksUnknownThenRecovers: a provider failing every call opens the circuit
// breaker after five failures; reconcile and verifications then mark the sandboxes unknown and
// stop calling the provider, and once it answers again every row returns to the provider's
// truth.
func TestOpenBreakerMarksUnknownThenRecovers(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	// Long enough that the silence below is checked on a loaded machine too (past it, a
	// half-open probe may call the provider, and the check has nothing to say).
	const openFor = 10 * time.Second
	cfg := fastConfig()
	cfg.IdleTimeout = 10 * time.Minute
	b := setupWith(t, host, cfg, true, func(c *e2b.Config) { c.BreakerOpenFor = openFor })
	client := b.Provider() // the instance's own: its breaker is the one under test
	ctx := context.Background()

	u1, p1 := founder(t, b.pool, 5)
	u2, p2 := founder(t, b.pool, 5)
	running := b.buildRunning(t, u1.ID, p1.ID)
	paused := b.buildRunning(t, u2.ID, p2.ID)
	if _, err := b.svc.RequestPause(ctx, u2.ID, paused.ID); err != nil {
		t.Fatal(err)
	}
	b.waitStatus(t, paused.ID, sandbox.Paused, 30*time.Second)

	const uses = 100_000
	host.InjectFault(t, sandboxd.Fault{Route: "*", Status: 500, Count: uses})
	var lastClosed, opened time.Time
	testkit.Eventually(t, 30*time.Second, "the breaker to open", func() error {
		if state := client.CircuitState(); state != "open" {
			lastClosed = time.Now()
			return fmt.Errorf("it is %s", state)
		}
		opened = time.Now()
		return nil
	})
	if failed := uses - remainingUses(t, host, "*"); failed < 5 {
		t.Fatalf("the breaker opened after %d failed calls, want at least 5", failed)
	}
	b.waitStatus(t, running.ID, sandbox.Unknown, 30*time.Second)
	b.waitStatus(t, paused.ID, sandbox.Unknown, 30*time.Second)

	// While it is open, a verification is answered without a provider call.
	before := remainingUses(t, host, "*")
	failures := b.get(t, running.ID).VerificationFailures
	if err := b.svc.Verify(ctx, u1.ID, running.ID); err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 30*time.Second, "the verification to run", func() bool { return b.get(t, running.ID).VerificationFailures > failures })
	after := remainingUses(t, host, "*")
	// A half-open probe may only start openFor after the breaker opened, at the earliest
	// openFor after it was last seen closed: before that, no call may have been made.
	if time.Since(lastClosed) < openFor {
		if after != before {
			t.Fatalf("%d provider calls were made while the breaker was open", before-after)
		}
	} else {
		t.Logf("too slow to check the open breaker's silence (opened %s ago)", time.Since(opened))
	}

	host.ClearFaults(t)
	b.waitStatus(t, running.ID, sandbox.Running, 30*time.Second)
	b.waitStatus(t, paused.ID, sandbox.Paused, 30*time.Second)
	if s := client.CircuitState(); s != "closed" {
		t.Fatalf("breaker %s after recovery", s)
	}
	for id, was := range map[uuid.UUID]sandbox.Status{running.ID: sandbox.Running, paused.ID: sandbox.Paused} {
		evs := b.eventsOf(t, id)
		n := len(evs)
		if n < 2 || evs[n-2].FromStatus != was || evs[n-2].ToStatus != sandbox.Unknown ||
			evs[n-1].FromStatus != sandbox.Unknown || evs[n-1].ToStatus != was ||
			evs[n-2].Source != sandbox.SourceReconciler || evs[n-1].Source != sandbox.SourceReconciler {
			t.Fatalf("want %s→unknown→%s by the reconciler: %s", was, was, history(evs))
		}
	}
	if sb := b.get(t, running.ID); sb.VerificationFailures != 0 || sb.LastVerifiedAt == nil {
		t.Fatalf("recovered sandbox: %d verification failures, verified at %v", sb.VerificationFailures, sb.LastVerifiedAt)
	}
	audit := apptest.AuditDB(t, b.pool)
	testkit.Record(t, testkit.Scenario{ID: "provider-down-breaker", Times: 1, Counts: audit,
		Injected: "an outage: the provider answering 500 to every call until cleared",
		Result:   "the breaker opens after 5 failures; rows go unknown, no call while open; once cleared every row returns to the provider's state"})
}
