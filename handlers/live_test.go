package handlers_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
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
func nextMatching(t *testing.T, events <-chan sseEvent, name, want string, within time.Duration) sseEvent {
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
