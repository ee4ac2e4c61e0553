package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"sandman/db"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/sandbox"
	"sandman/sandboxd/sandboxdtest"
)

// goneConfig watches the provider through both of its channels that need no webhook: the
// list-based reconcile and the events reader, each every second, racing as they do in
// production. The idle pause is out of the way: a paused sandbox never expires.
func goneConfig() lifecycle.Config {
	c := fastConfig()
	c.IdleTimeout = 10 * time.Minute
	c.EventsEvery = time.Second
	return c
}

// TestWhyASandboxIsGone ends a running sandbox in each of the ways docs/states.md tells apart and
// checks the row, its killed_reason and that exactly one event recorded the end, whichever of
// reconcile and the events reader saw it first.
func TestWhyASandboxIsGone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// end makes the provider sandbox go away.
		end        func(t *testing.T, host *sandboxdtest.Host, client *e2b.Client, providerID string)
		want       sandbox.Status
		wantReason sandbox.Reason
	}{
		{
			name: "its lifetime ends",
			end: func(t *testing.T, _ *sandboxdtest.Host, client *e2b.Client, providerID string) {
				if err := client.SetTimeout(context.Background(), providerID, 1); err != nil {
					t.Fatal(err)
				}
			},
			want: sandbox.Expired, wantReason: sandbox.ReasonProviderTimeout,
		},
		{
			name: "killed from the provider's dashboard before its end",
			end: func(t *testing.T, host *sandboxdtest.Host, _ *e2b.Client, providerID string) {
				host.KillFromDashboard(t, providerID)
			},
			want: sandbox.Killed, wantReason: sandbox.ReasonProviderRequest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			host := sandboxdtest.Start(t)
			b := setupWith(t, host, goneConfig(), true)
			u, p := founder(t, b.pool, 5)
			sb := b.buildRunning(t, u.ID, p.ID)
			if sb.EndAt == nil || time.Until(*sb.EndAt) < 5*time.Minute {
				t.Fatalf("a fresh sandbox should live SandboxTimeout, end_at = %v", sb.EndAt)
			}

			tt.end(t, host, providerFor(t, host), *sb.ProviderID)
			sb = b.waitStatus(t, sb.ID, tt.want, 30*time.Second)
			if killedReason(sb) != tt.wantReason || sb.KilledAt == nil {
				t.Fatalf("killed_reason %q (killed_at %v), want %q", killedReason(sb), sb.KilledAt, tt.wantReason)
			}
			// Both watchers keep running: give them time to see the end again, then check that
			// it was recorded once and never overwritten.
			ctx := context.Background()
			if err := b.svc.Reconcile(ctx); err != nil {
				t.Fatal(err)
			}
			if err := b.svc.CatchUpEvents(ctx); err != nil {
				t.Fatal(err)
			}
			evs := b.eventsOf(t, sb.ID)
			ends := transitionsTo(evs, tt.want)
			if len(ends) != 1 || (ends[0].Source != sandbox.SourceReconciler && ends[0].Source != sandbox.SourceEventsAPI) {
				t.Fatalf("want one running→%s event from the reconciler or the events reader, got %s", tt.want, history(evs))
			}
			if last := evs[len(evs)-1]; last.ToStatus != tt.want {
				t.Fatalf("the end was followed by more changes: %s", history(evs))
			}
			if got := b.get(t, sb.ID); got.Status != tt.want || killedReason(got) != tt.wantReason {
				t.Fatalf("later sweeps changed the row to %s (%q)", got.Status, killedReason(got))
			}
		})
	}
}

// TestSandmansOwnKillStaysTerminated: a rebuild ends the old sandbox as terminated at once;
// the provider's killed event (kill_reason "request") and later reconciles must not turn it
// into killed, because Sandman made that request.
func TestSandmansOwnKillStaysTerminated(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t)
	client := providerFor(t, host)
	b := setupWith(t, host, goneConfig(), true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	old := b.buildRunning(t, u.ID, p.ID)

	rb, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "rebuild", true)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.get(t, old.ID); got.Status != sandbox.Terminated || killedReason(got) != sandbox.ReasonReplaced || !got.KillRequested {
		t.Fatalf("the replaced sandbox is %s (%q, kill requested %v), want terminated at once", got.Status, killedReason(got), got.KillRequested)
	}
	// The kill job reaches the provider, which then reports the kill as an event.
	var killedAt time.Time
	testkit.Eventually(t, 30*time.Second, "the provider to report the replaced sandbox killed", func() error {
		evs, err := client.ListEvents(ctx, e2b.EventsParams{SandboxID: *old.ProviderID, Types: []string{lifecycle.EventKilled}})
		if err != nil || len(evs) == 0 {
			return fmt.Errorf("no killed event (%v)", err)
		}
		killedAt = evs[0].Timestamp
		if evs[0].KillReason != "request" {
			return fmt.Errorf("kill reason %q", evs[0].KillReason)
		}
		return nil
	})
	if _, err := client.GetSandbox(ctx, *old.ProviderID); !errors.Is(err, e2b.ErrNotFound) {
		t.Fatalf("the replaced sandbox still exists at the provider: %v", err)
	}

	// The events reader has read past the kill, and a reconcile ran after it.
	testkit.Until(t, 30*time.Second, "the events reader to read past the kill event", func() bool {
		raw, err := db.New(b.pool).GetProviderCursor(ctx, "events_api")
		if err != nil {
			return false
		}
		cur, _ := time.Parse(time.RFC3339Nano, raw)
		return !cur.Before(killedAt)
	})
	if err := b.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}

	got := b.get(t, old.ID)
	evs := b.eventsOf(t, old.ID)
	if got.Status != sandbox.Terminated || killedReason(got) != sandbox.ReasonReplaced {
		t.Fatalf("the replaced sandbox became %s (%q): %s", got.Status, killedReason(got), history(evs))
	}
	if ends := transitionsTo(evs, sandbox.Terminated); len(ends) != 1 || ends[0].Source != sandbox.SourceUser || ends[0].Reason != sandbox.ReasonReplaced {
		t.Fatalf("want one terminated event from the founder's rebuild: %s", history(evs))
	}
	if last := evs[len(evs)-1]; last.ToStatus != sandbox.Terminated {
		t.Fatalf("events after the end: %s", history(evs))
	}
	b.waitStatus(t, rb.Sandbox.ID, sandbox.Running, time.Minute)
}
