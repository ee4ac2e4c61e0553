package sandboxd_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// waitGone polls until a sandbox answers 404.
func (c *client) waitGone(id string, within time.Duration) {
	c.t.Helper()
	waitFor(c.t, id+" to be gone", within, func() bool {
		status, _, _ := c.do("GET", "/sandboxes/"+id, nil)
		return status == http.StatusNotFound
	})
}

func (c *client) waitState(id, state string, within time.Duration) {
	c.t.Helper()
	waitFor(c.t, id+" to be "+state, within, func() bool {
		status, b, _ := c.do("GET", "/sandboxes/"+id, nil)
		return status == http.StatusOK && strings.Contains(string(b), `"state":"`+state+`"`)
	})
}

func TestTimeoutKills(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(map[string]any{"timeout": 1})
	c.waitGone(sb.SandboxID, 3*time.Second)
	evs := c.events("/" + sb.SandboxID)
	if len(evs) != 2 || evs[0].Type != "sandbox.lifecycle.killed" || evs[0].EventData["kill_reason"] != "timeout" {
		t.Fatalf("events: %s", mustJSON(t, evs))
	}
	exec, _ := evs[0].EventData["execution"].(map[string]any)
	if ms, _ := exec["execution_time"].(float64); ms < 900 || ms > 3000 {
		t.Fatalf("execution: %v", exec)
	}
}

func TestTimeoutAutoPause(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		keepMem   any
		wantCount string // after resume; "" means the app is gone
	}{
		{"memory", nil, "Visits: 3"},
		{"filesystem", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t)
			// A long first lifetime: a slow machine must not time out while the app starts.
			body := map[string]any{"timeout": 60, "autoPause": true}
			if tt.keepMem != nil {
				body["autoPauseMemory"] = tt.keepMem
			}
			sb := c.create(body)
			if d := c.info(sb.SandboxID); d.Lifecycle.OnTimeout != "pause" {
				t.Fatalf("lifecycle: %+v", d.Lifecycle)
			}
			port := appPort(t, c.h)
			c.startCounter(sb, port)
			c.waitPreview(sb.SandboxID, port)
			c.must(204, "POST", "/sandboxes/"+sb.SandboxID+"/timeout", map[string]any{"timeout": 1}, nil)
			c.waitState(sb.SandboxID, "paused", 5*time.Second)
			evs := c.events("/" + sb.SandboxID)
			if evs[0].Type != "sandbox.lifecycle.paused" {
				t.Fatalf("events: %s", mustJSON(t, evs))
			}
			c.must(201, "POST", "/sandboxes/"+sb.SandboxID+"/connect", map[string]any{"timeout": 60}, nil)
			if tt.wantCount == "" {
				if status, _ := c.preview(sb.SandboxID, port); status != 502 {
					t.Fatalf("app survived a filesystem snapshot: %d", status)
				}
				if res := c.run(sb, "wc -c < server.js"); res.stdout == "0\n" || res.exitCode != 0 {
					t.Fatalf("files lost: %+v", res)
				}
				return
			}
			if got := c.waitPreview(sb.SandboxID, port); got != tt.wantCount {
				t.Fatalf("after resume %q, want %q", got, tt.wantCount)
			}
		})
	}
}

func TestTimeoutMovesWithSetTimeoutAndConnect(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	shortened := c.create(map[string]any{"timeout": 3600})
	extended := c.create(map[string]any{"timeout": 1})
	c.must(204, "POST", "/sandboxes/"+shortened.SandboxID+"/timeout", map[string]any{"timeout": 1}, nil)
	c.must(200, "POST", "/sandboxes/"+extended.SandboxID+"/connect", map[string]any{"timeout": 60}, nil)
	c.waitGone(shortened.SandboxID, 3*time.Second)
	// A paused sandbox has no timeout: its endAt is the pause time.
	paused := c.create(map[string]any{"timeout": 1})
	c.must(204, "POST", "/sandboxes/"+paused.SandboxID+"/pause", nil, nil)
	// A witness whose timeout ends a second after both of theirs would have: once its own
	// timer has killed it, theirs would have fired too, however slow the machine (a sleep of
	// a fixed length passes by luck there).
	witness := c.create(map[string]any{"timeout": 2})
	c.waitGone(witness.SandboxID, 10*time.Second)
	if status, b, _ := c.do("GET", "/sandboxes/"+extended.SandboxID, nil); status != http.StatusOK || !strings.Contains(string(b), `"state":"running"`) {
		t.Fatalf("the sandbox a connect extended to 60 s ended at its first timeout: %d %s", status, b)
	}
	if status, b, _ := c.do("GET", "/sandboxes/"+paused.SandboxID, nil); status != http.StatusOK || !strings.Contains(string(b), `"state":"paused"`) {
		t.Fatalf("a paused sandbox's timeout still ran: %d %s", status, b)
	}
}
