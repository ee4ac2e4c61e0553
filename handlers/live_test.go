package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/db"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/views"
)

// nextMatching waits for a message of the given event name whose data contains want.
func nextMatching(t testing.TB, events <-chan testkit.SSEEvent, name, want string, within time.Duration) testkit.SSEEvent {
	t.Helper()
	return testkit.NextSSE(t, events, within, name+" with "+strconv.Quote(want), func(ev testkit.SSEEvent) bool {
		return ev.Event == name && strings.Contains(ev.Data, want)
	})
}

func TestProviderKillReachesTheStreamThroughTheWebhook(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("live@example.com")
	projectID, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.Stream(ctx)
	nextMatching(t, events, views.DOMID(views.Card, projectID), "Live preview ready", 5*time.Second)

	s.Host.KillFromDashboard(t, sb.ProviderID)
	nextMatching(t, events, views.DOMID(views.Pane, projectID), "Sandbox not found", 5*time.Second)
	c.WaitSandbox(sandboxID, "killed", time.Second)
	// By its webhook, not by the reconcile or the events reader catching up.
	if evs := s.events(t, sandboxID); !strings.HasPrefix(evs[len(evs)-1], "running→killed webhook") {
		t.Fatalf("the kill was not applied by its webhook: %q", evs)
	}
}

// waitClients waits until the instance has n open streams.
func (s *stack) waitClients(t *testing.T, n int) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d open streams", n), func() error {
		if got := s.Hub().Clients(); got != n {
			return fmt.Errorf("%d are open", got)
		}
		return nil
	})
}

const sleeping = "Your preview is sleeping."

func TestStreamCarriesOnlyTheFoundersOwnChanges(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	alice, bob := s.NewClient(t), s.NewClient(t)
	alice.SignUp("alice-live@example.com")
	bob.SignUp("bob-live@example.com")
	aliceProject, aliceSandbox := alice.BuildCounter()
	bobProject, bobSandbox := bob.BuildCounter()
	// Each message carries its founder's balance (views.CreditsEvent): alice's differs from bob's,
	// so hers reaching him would show.
	if _, err := s.Pool().Exec(context.Background(), "UPDATE users SET credits = 42 WHERE email = 'alice-live@example.com'"); err != nil {
		t.Fatal(err)
	}
	bobBalance := strconv.Itoa(bob.Credits()) + " credits"

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	aliceEvents, bobEvents := alice.Stream(ctx), bob.Stream(ctx)
	nextMatching(t, aliceEvents, views.DOMID(views.Pane, aliceProject), "Live preview ready", 10*time.Second)
	nextMatching(t, bobEvents, views.DOMID(views.Pane, bobProject), "Live preview ready", 10*time.Second)

	alice.Pause(aliceSandbox)
	nextMatching(t, aliceEvents, views.DOMID(views.Pane, aliceProject), sleeping, 10*time.Second)
	// Every change goes through one feed in commit order: once bob sees his own later change,
	// anything of alice's would already have reached him.
	bob.Pause(bobSandbox)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-bobEvents:
			if !ok {
				t.Fatal("bob's stream ended")
			}
			own := strings.HasSuffix(ev.Event, "-"+bobProject) || ev.Event == views.CreditsEvent && strings.TrimSpace(ev.Data) == bobBalance
			if !own || strings.Contains(ev.Data, aliceProject) {
				t.Fatalf("bob received %s: %.200s", ev.Event, ev.Data)
			}
			if ev.Event == views.DOMID(views.Pane, bobProject) && strings.Contains(ev.Data, sleeping) {
				return
			}
		case <-timeout:
			t.Fatal("bob never saw his own pause")
		}
	}
}

func TestReconnectStartsWithTheCurrentState(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{})
	c := s.NewClient(t)
	c.SignUp("reconnect@example.com")
	projectID, sandboxID := c.BuildCounter()

	ctx, cancel := context.WithCancel(context.Background())
	events := c.Stream(ctx)
	nextMatching(t, events, views.DOMID(views.Pane, projectID), "Live preview ready", 10*time.Second)
	cancel()
	s.waitClients(t, 0)

	c.Pause(sandboxID) // missed: nobody is connected

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	events = c.Stream(ctx)
	for _, name := range []string{views.DOMID(views.Card, projectID), views.DOMID(views.Pane, projectID)} {
		select {
		case ev := <-events:
			if ev.Event != name || !strings.Contains(ev.Data, sleeping) {
				t.Fatalf("reconnected stream began with %s %.300q, want %s showing the pause", ev.Event, ev.Data, name)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("nothing on the reconnected stream")
		}
	}
}

// listenerPID is the backend of the instance's LISTEN connection (none: 0).
func (s *stack) listenerPID(t *testing.T) int {
	t.Helper()
	var pid int
	err := s.Pool().QueryRow(context.Background(), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = $1`, db.FeedApplicationName).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestFeedResyncsAfterItsConnectionIsKilled(t *testing.T) {
	t.Parallel()
	// No reconciler: it would correct the silent change below and announce that instead.
	s := start(t, apptest.Options{Config: func(c *app.Config) { c.Lifecycle.ReconcileEvery = 0 }})
	c := s.NewClient(t)
	c.SignUp("listener@example.com")
	projectID, sandboxID := c.BuildCounter()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.Stream(ctx)
	nextMatching(t, events, views.DOMID(views.Pane, projectID), "Live preview ready", 10*time.Second)
	old := s.listenerPID(t)
	if old == 0 {
		t.Fatal("no LISTEN connection found")
	}

	// A change whose NOTIFY the feed misses (as one committed while it reconnects would be):
	// written without one, so only a resync can bring it to the client.
	if _, err := s.Pool().Exec(context.Background(), `WITH u AS (
			UPDATE sandboxes SET status = 'paused', version = version + 1, state_changed_at = now() WHERE id = $1 RETURNING id)
		INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) SELECT id, 'running', 'paused', 'user', 'requested' FROM u`,
		sandboxID); err != nil {
		t.Fatal(err)
	}
	var killed bool
	if err := s.Pool().QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", old).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listener: %v %v", killed, err)
	}
	nextMatching(t, events, views.DOMID(views.Pane, projectID), sleeping, 20*time.Second)
	if pid := s.listenerPID(t); pid == 0 || pid == old {
		t.Fatalf("listener backend %d after killing %d", pid, old)
	}

	// And the feed is live again: a real change arrives by NOTIFY.
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
	nextMatching(t, events, views.DOMID(views.Pane, projectID), "Live preview ready", 30*time.Second)
}

func TestWebhookOnOneInstanceReachesAClientOnAnother(t *testing.T) {
	t.Parallel()
	// Only webhooks carry the kill: no reconciler or events reader on either instance.
	quiet := func(c *app.Config) { c.Lifecycle.ReconcileEvery = 0 }
	a := start(t, apptest.Options{Webhooks: true, Config: quiet})
	b := start(t, apptest.Options{Host: a.Host, DatabaseURL: a.DatabaseURL, Config: quiet})
	c := a.NewClient(t)
	c.SignUp("two-instances@example.com")
	projectID, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)

	// The session lives in the shared database, so the same cookies work on instance B.
	onB := c.On(b.Instance)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := onB.Stream(ctx)
	nextMatching(t, events, views.DOMID(views.Pane, projectID), "Live preview ready", 10*time.Second)
	b.waitClients(t, 1)
	a.waitClients(t, 0)

	a.Host.KillFromDashboard(t, sb.ProviderID)
	nextMatching(t, events, views.DOMID(views.Pane, projectID), "Sandbox not found", 30*time.Second)
	// The worker records a delivery's outcome just after the change it applied went out.
	testkit.Eventually(t, 10*time.Second, "one applied kill delivery", func() error {
		var n int
		if err := a.Pool().QueryRow(context.Background(), "SELECT count(*) FROM webhook_deliveries WHERE event_type = $1 AND outcome = 'applied'",
			e2b.EventKilled).Scan(&n); err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("%d applied kill deliveries", n)
		}
		return nil
	})
}
