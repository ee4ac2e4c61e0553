package lifecycle_test

import (
	"context"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/db"
	"sandman/e2b"
	"sandman/lifecycle"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
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
		name string
		// fault is injected on the sandbox's connect calls (Route and SandboxID are filled in).
		fault *sandboxd.Fault
		// killed removes the sandbox at the provider before the resume.
		killed bool
		tweak  func(*e2b.Config)
		want   db.SandboxStatus
		cause  string
		// minCalls is how many faulty connects must have reached the provider (0: no check).
		minCalls, maxCalls int
	}{
		{
			name:  "the provider answers 5xx to every connect",
			fault: &sandboxd.Fault{Status: 502, Count: 50},
			want:  lifecycle.ResumeFailed, cause: lifecycle.CauseUnreachable,
			// More than one attempt's worth: the worker tried a second time.
			minCalls: callsPerAttempt + 1, maxCalls: 2 * callsPerAttempt,
		},
		{
			name:  "every connect times out",
			fault: &sandboxd.Fault{LatencyMs: 10_000, Count: 50},
			tweak: func(c *e2b.Config) { c.AttemptTimeout = time.Second },
			want:  lifecycle.ResumeFailed, cause: lifecycle.CauseUnreachable,
			minCalls: callsPerAttempt + 1, maxCalls: 2 * callsPerAttempt,
		},
		{
			name:   "the sandbox is gone at the provider",
			killed: true,
			want:   lifecycle.ResumeFailed, cause: lifecycle.CauseNotFound,
		},
		{
			name: "the first attempt fails, the second succeeds",
			// Exactly one attempt's worth of failures, retries included.
			fault: &sandboxd.Fault{Status: 500, Count: callsPerAttempt},
			want:  lifecycle.Running,
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
			res, err := b.svc.StartBuild(ctx, u.ID, p.ID, "k", false)
			if err != nil {
				t.Fatal(err)
			}
			sb := b.waitStatus(t, res.Sandbox.ID, lifecycle.Paused, time.Minute)

			if tt.killed {
				host.KillFromDashboard(t, *sb.ProviderID)
			}
			if tt.fault != nil {
				f := *tt.fault
				f.Route, f.SandboxID = connectRoute, *sb.ProviderID
				host.InjectFault(t, f)
			}
			if got, err := b.svc.Resume(ctx, u.ID, sb.ID); err != nil || got.Status != lifecycle.Resuming {
				t.Fatalf("resume: %s %v", got.Status, err)
			}
			sb = b.waitStatus(t, sb.ID, tt.want, time.Minute)
			if sb.FailureCause != tt.cause {
				t.Fatalf("failure cause %q, want %q", sb.FailureCause, tt.cause)
			}
			if tt.fault != nil && tt.minCalls > 0 {
				calls := tt.fault.Count - remainingUses(t, host, connectRoute)
				if calls < tt.minCalls || calls > tt.maxCalls {
					t.Fatalf("%d connects reached the provider, want %d..%d", calls, tt.minCalls, tt.maxCalls)
				}
			}
			evs := b.eventsOf(t, sb.ID)
			if n := len(transitionsTo(evs, lifecycle.Resuming)); n != 1 {
				t.Fatalf("%d moves to resuming, want 1: %s", n, history(evs))
			}
			last := evs[len(evs)-1]
			if last.FromStatus != lifecycle.Resuming || last.ToStatus != tt.want || last.Source != db.EventSourceUser {
				t.Fatalf("want the resume to end resuming→%s: %s", tt.want, history(evs))
			}
			if tt.want == lifecycle.Running {
				if len(transitionsTo(evs, lifecycle.ResumeFailed)) != 0 {
					t.Fatalf("a forgiven failure was recorded: %s", history(evs))
				}
				visits(t, host, sb.PreviewURL)
			}
		})
	}
}
