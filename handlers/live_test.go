package handlers_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"sandman/db"
	"sandman/e2b"
	"sandman/lifecycle"
)

// sseEvent is one message of the event stream.
type sseEvent struct{ id, event, data string }

// stream opens /events with the client's session and returns its messages as they arrive.
func (c *client) stream(ctx context.Context) <-chan sseEvent {
	c.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/events", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	hc := *c.hc
	hc.Timeout = 0
	res, err := hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		c.t.Fatalf("/events: %d", res.StatusCode)
	}
	out := make(chan sseEvent, 64)
	go func() {
		defer res.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.event != "" || ev.data != "" {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				if ev.data != "" {
					ev.data += "\n"
				}
				ev.data += line[6:]
			}
		}
	}()
	return out
}

// nextMatching waits for a message of the given event name whose data contains want.
func nextMatching(t testing.TB, events <-chan sseEvent, name, want string, within time.Duration) sseEvent {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("stream ended before %s with %q", name, want)
			}
			if ev.event == name && strings.Contains(ev.data, want) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("no %s event with %q within %s", name, want, within)
		}
	}
}

func TestProviderKillReachesTheStreamThroughTheWebhook(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{webhooks: true})
	c := s.newClient(t)
	c.signUp("live@example.com")
	projectID, sandboxID := s.buildCounter(t, c)
	sb := c.waitSandbox(sandboxID, "running", time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.stream(ctx)
	nextMatching(t, events, "card-"+projectID, "Live preview ready", 5*time.Second)

	s.host.KillFromDashboard(t, sb.ProviderID)
	nextMatching(t, events, "pane-"+projectID, "Sandbox not found", 5*time.Second)
	c.waitSandbox(sandboxID, "killed", time.Second)
}

// pause asks for the founder's sandbox to be paused and waits until it is.
func (c *client) pause(sandboxID string) {
	c.t.Helper()
	if r := c.api(http.MethodPost, "/api/sandboxes/"+sandboxID+"/pause", nil, nil); r.status != http.StatusOK && r.status != http.StatusAccepted {
		c.t.Fatalf("pause: %d %s", r.status, r.body)
	}
	c.waitSandbox(sandboxID, "paused", 30*time.Second)
}

// waitClients waits until the instance has n open streams.
func (s *stack) waitClients(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.hub.Clients() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams open, want %d", s.hub.Clients(), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const sleeping = "Your preview is sleeping."

func TestStreamCarriesOnlyTheFoundersOwnChanges(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	alice, bob := s.newClient(t), s.newClient(t)
	alice.signUp("alice-live@example.com")
	bob.signUp("bob-live@example.com")
	aliceProject, aliceSandbox := s.buildCounter(t, alice)
	bobProject, bobSandbox := s.buildCounter(t, bob)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	aliceEvents, bobEvents := alice.stream(ctx), bob.stream(ctx)
	nextMatching(t, aliceEvents, "pane-"+aliceProject, "Live preview ready", 10*time.Second)
	nextMatching(t, bobEvents, "pane-"+bobProject, "Live preview ready", 10*time.Second)

	alice.pause(aliceSandbox)
	nextMatching(t, aliceEvents, "pane-"+aliceProject, sleeping, 10*time.Second)
	// Every change goes through one feed in commit order: once bob sees his own later change,
	// anything of alice's would already have reached him.
	bob.pause(bobSandbox)
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-bobEvents:
			if !ok {
				t.Fatal("bob's stream ended")
			}
			if !strings.HasSuffix(ev.event, "-"+bobProject) || strings.Contains(ev.data, aliceProject) {
				t.Fatalf("bob received %s: %.200s", ev.event, ev.data)
			}
			if ev.event == "pane-"+bobProject && strings.Contains(ev.data, sleeping) {
				return
			}
		case <-timeout:
			t.Fatal("bob never saw his own pause")
		}
	}
}

func TestReconnectStartsWithTheCurrentState(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackOptions{})
	c := s.newClient(t)
	c.signUp("reconnect@example.com")
	projectID, sandboxID := s.buildCounter(t, c)

	ctx, cancel := context.WithCancel(context.Background())
	events := c.stream(ctx)
	nextMatching(t, events, "pane-"+projectID, "Live preview ready", 10*time.Second)
	cancel()
	s.waitClients(t, 0)

	c.pause(sandboxID) // missed: nobody is connected

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	events = c.stream(ctx)
	for _, name := range []string{"card-" + projectID, "pane-" + projectID} {
		select {
		case ev := <-events:
			if ev.event != name || !strings.Contains(ev.data, sleeping) {
				t.Fatalf("reconnected stream began with %s %.300q, want %s showing the pause", ev.event, ev.data, name)
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
	err := s.pool.QueryRow(context.Background(), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		WHERE datname = current_database() AND query ILIKE 'LISTEN %' AND query LIKE '%' || $1 || '%'`, db.SandboxChannel).Scan(&pid)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func TestFeedResyncsAfterItsConnectionIsKilled(t *testing.T) {
	t.Parallel()
	// No reconciler: it would correct the silent change below and announce that instead.
	s := newStack(t, stackOptions{config: func(c *lifecycle.Config) { c.ReconcileEvery = 0 }})
	c := s.newClient(t)
	c.signUp("listener@example.com")
	projectID, sandboxID := s.buildCounter(t, c)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := c.stream(ctx)
	nextMatching(t, events, "pane-"+projectID, "Live preview ready", 10*time.Second)
	old := s.listenerPID(t)
	if old == 0 {
		t.Fatal("no LISTEN connection found")
	}

	// A change whose NOTIFY the feed misses (as one committed while it reconnects would be):
	// written without one, so only a resync can bring it to the client.
	if _, err := s.pool.Exec(context.Background(), `WITH u AS (
			UPDATE sandboxes SET status = 'paused', version = version + 1, state_changed_at = now() WHERE id = $1 RETURNING id)
		INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) SELECT id, 'running', 'paused', 'user', 'test' FROM u`,
		sandboxID); err != nil {
		t.Fatal(err)
	}
	var killed bool
	if err := s.pool.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", old).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate the listener: %v %v", killed, err)
	}
	nextMatching(t, events, "pane-"+projectID, sleeping, 20*time.Second)
	if pid := s.listenerPID(t); pid == 0 || pid == old {
		t.Fatalf("listener backend %d after killing %d", pid, old)
	}

	// And the feed is live again: a real change arrives by NOTIFY.
	requireStatus(t, c.api(http.MethodPost, "/api/sandboxes/"+sandboxID+"/resume", nil, nil), http.StatusAccepted)
	nextMatching(t, events, "pane-"+projectID, "Live preview ready", 30*time.Second)
}

func TestWebhookOnOneInstanceReachesAClientOnAnother(t *testing.T) {
	t.Parallel()
	// Only webhooks carry the kill: no reconciler or events reader on either instance.
	quiet := func(c *lifecycle.Config) { c.ReconcileEvery = 0 }
	a := newStack(t, stackOptions{webhooks: true, config: quiet})
	b := newStack(t, stackOptions{host: a.host, databaseURL: a.url, config: quiet})
	c := a.newClient(t)
	c.signUp("two-instances@example.com")
	projectID, sandboxID := a.buildCounter(t, c)
	sb := c.waitSandbox(sandboxID, "running", time.Second)

	// The session lives in the shared database, so the same cookies work on instance B.
	onB := *c
	onB.base = b.srv.URL
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := onB.stream(ctx)
	nextMatching(t, events, "pane-"+projectID, "Live preview ready", 10*time.Second)
	b.waitClients(t, 1)
	a.waitClients(t, 0)

	a.host.KillFromDashboard(t, sb.ProviderID)
	nextMatching(t, events, "pane-"+projectID, "Sandbox not found", 30*time.Second)
	// The worker records a delivery's outcome just after the change it applied went out.
	var deliveries int
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		err = a.pool.QueryRow(context.Background(), "SELECT count(*) FROM webhook_deliveries WHERE event_type = $1 AND outcome = 'applied'",
			e2b.EventKilled).Scan(&deliveries)
		if err == nil && deliveries == 1 {
			break
		}
	}
	if err != nil || deliveries != 1 {
		t.Fatalf("%d applied kill deliveries (%v), want 1", deliveries, err)
	}
}
