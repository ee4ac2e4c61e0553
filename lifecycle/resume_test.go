package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/sandbox"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
	"sandman/views"
)

const connectRoute = "POST /sandboxes/{sandboxID}/connect"

// TestResumeFailsAfterTwoAttempts drives the resume worker against a misbehaving provider:
// two failed attempts end in resume_failed with the cause the founder reads, one failed
// attempt is forgiven.
func TestResumeFailsAfterTwoAttempts(t *testing.T) {
	t.Parallel()
	// One resume attempt's connect is at most this many calls: the first and its retries.
	callsPerAttempt := len(apptest.RetryDelays) + 1
	tests := []struct {
		id, name string
		// fault is injected on the sandbox's connect calls (Route and SandboxID are filled in);
		// without one, a fault that only counts them is.
		fault *sandboxd.Fault
		// killed removes the sandbox at the provider before the resume.
		killed bool
		tweak  func(*e2b.Config)
		want   sandbox.Status
		cause  sandbox.Cause
		// minCalls..maxCalls is how many connects must have reached the provider.
		minCalls, maxCalls int
	}{
		{
			id: "provider-502-connect", name: "the provider answers 5xx to every connect",
			fault: &sandboxd.Fault{Status: 502, Count: 50},
			want:  sandbox.ResumeFailed, cause: sandbox.CauseUnreachable,
			// More than one attempt's worth: the worker tried a second time.
			minCalls: callsPerAttempt + 1, maxCalls: 2 * callsPerAttempt,
		},
		{
			id: "provider-slow-connect", name: "every connect times out",
			fault: &sandboxd.Fault{LatencyMs: 10_000, Count: 50},
			tweak: func(c *e2b.Config) { c.AttemptTimeout = time.Second },
			want:  sandbox.ResumeFailed, cause: sandbox.CauseUnreachable,
			minCalls: callsPerAttempt + 1, maxCalls: 2 * callsPerAttempt,
		},
		{
			id: "provider-lost-before-resume", name: "the sandbox is gone at the provider",
			killed: true,
			want:   sandbox.ResumeFailed, cause: sandbox.CauseNotFound,
			// One connect, answered 404: no second attempt at a sandbox that is gone.
			minCalls: 1, maxCalls: 1,
		},
		{
			id: "provider-500-first-resume", name: "the first attempt fails, the second succeeds",
			// Exactly one attempt's worth of failures, retries included.
			fault: &sandboxd.Fault{Status: 500, Count: callsPerAttempt},
			want:  sandbox.Running,
			// Every use consumed: the first attempt really failed before the second ran.
			minCalls: callsPerAttempt, maxCalls: callsPerAttempt,
		},
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
			cfg.PauseAfterReady = "immediate"
			// Nothing but the resume worker may look at the provider: a reconcile would find
			// the killed sandbox first, and its successful calls would reset the breaker's count.
			cfg.ReconcileEvery, cfg.EventsEvery = 0, 0
			b := setupWith(t, host, cfg, true, tweaks...)
			ctx := context.Background()
			u, p := founder(t, b.pool, 5)
			res, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "k", false)
			if err != nil {
				t.Fatal(err)
			}
			sb := b.waitStatus(t, res.Sandbox.ID, sandbox.Paused, time.Minute)

			if tt.killed {
				host.KillFromDashboard(t, *sb.ProviderID)
			}
			counted := sandboxd.Fault{LatencyMs: 1, Count: 50} // delays each connect by 1 ms: counts them
			if tt.fault != nil {
				counted = *tt.fault
			}
			counted.Route, counted.SandboxID = connectRoute, *sb.ProviderID
			host.InjectFault(t, counted)
			if got, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil || got.Status != sandbox.Resuming {
				t.Fatalf("resume: %s %v", got.Status, err)
			}
			sb = b.waitStatus(t, sb.ID, tt.want, time.Minute)
			if failureCause(sb) != tt.cause {
				t.Fatalf("failure cause %q, want %q", failureCause(sb), tt.cause)
			}
			if calls := counted.Count - remainingUses(t, host, connectRoute); calls < tt.minCalls || calls > tt.maxCalls {
				t.Fatalf("%d connects reached the provider, want %d..%d", calls, tt.minCalls, tt.maxCalls)
			}
			evs := b.eventsOf(t, sb.ID)
			if n := len(transitionsTo(evs, sandbox.Resuming)); n != 1 {
				t.Fatalf("%d moves to resuming, want 1: %s", n, history(evs))
			}
			last := evs[len(evs)-1]
			if last.FromStatus != sandbox.Resuming || last.ToStatus != tt.want || last.Source != sandbox.SourceUser {
				t.Fatalf("want the resume to end resuming→%s: %s", tt.want, history(evs))
			}
			if tt.want == sandbox.Running {
				if len(transitionsTo(evs, sandbox.ResumeFailed)) != 0 {
					t.Fatalf("a forgiven failure was recorded: %s", history(evs))
				}
				visits(t, host, sb.PreviewURL)
			}
			audit := apptest.AuditDB(t, b.pool)
			injected, times, result := "the sandbox killed at the provider, then resumed", 1, "resume_failed at once (no second attempt), cause: "+views.CauseText(&tt.cause, "")
			if tt.fault != nil {
				// Every call of the two attempts, retries included, meets the fault (the test
				// checks how many reached the provider).
				times = tt.maxCalls
				injected = fmt.Sprintf("the provider's connect answering %d to every call", tt.fault.Status)
				if tt.fault.Status == 0 {
					injected = fmt.Sprintf("the provider's connect hanging %d s on every call, past the attempt timeout (1 s)", tt.fault.LatencyMs/1000)
				}
				result = "two attempts, then resume_failed, cause: " + views.CauseText(&tt.cause, "")
				if tt.want == sandbox.Running {
					injected = fmt.Sprintf("the provider's connect answering %d for one whole attempt (%d calls, retries included)", tt.fault.Status, tt.fault.Count)
					result = "the second attempt resumes it: running, no failure recorded"
				}
			}
			testkit.Record(t, testkit.Scenario{ID: tt.id, Times: times, Counts: audit,
				Injected: injected, Result: result})
		})
	}
}
