package sandboxd_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

func TestRouteFaults(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	a, b := c.create(nil).SandboxID, c.create(nil).SandboxID

	c.h.InjectFault(t, sandboxd.Fault{Route: "POST /sandboxes/{id}/pause", SandboxID: a, Status: 500, Count: 2})
	c.must(204, "POST", "/sandboxes/"+b+"/pause", nil, nil) // another sandbox: unaffected
	for range 2 {
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		c.must(500, "POST", "/sandboxes/"+a+"/pause", nil, &e)
		if e.Code != 500 || e.Message == "" {
			t.Fatalf("fault body: %+v", e)
		}
	}
	c.must(204, "POST", "/sandboxes/"+a+"/pause", nil, nil)
	if d := c.info(a); d.State != "paused" {
		t.Fatalf("faulted calls must not act: %+v", d)
	}

	c.h.InjectFault(t, sandboxd.Fault{Route: "*", Status: 429, RetryAfterSeconds: 7, Count: 1})
	status, _, hdr := c.do("GET", "/v2/sandboxes", nil)
	if status != 429 || hdr.Get("Retry-After") != "7" {
		t.Fatalf("rate limit fault: %d %v", status, hdr)
	}
	c.must(200, "GET", "/v2/sandboxes", nil, nil)

	c.h.InjectFault(t, sandboxd.Fault{Route: "GET /v2/sandboxes", LatencyMs: 300, Count: 1})
	start := time.Now()
	c.must(200, "GET", "/v2/sandboxes", nil, nil)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("latency fault took %v", d)
	}
	start = time.Now()
	c.must(200, "GET", "/v2/sandboxes", nil, nil)
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("latency fault outlived its count: %v", d)
	}

	// Count 0: every call until cleared. Health is never affected.
	c.h.InjectFault(t, sandboxd.Fault{Route: "GET /sandboxes/{sandboxID}", Status: 503})
	for range 3 {
		c.must(503, "GET", "/sandboxes/"+a, nil, nil)
	}
	var active []struct {
		ID        string `json:"id"`
		Remaining int    `json:"remaining"`
		Route     string `json:"route"`
	}
	c.must(200, "GET", "/_sandboxd/faults", nil, &active)
	if len(active) != 1 || active[0].Remaining != -1 {
		t.Fatalf("active faults: %+v", active)
	}
	if resp, err := http.Get(c.h.APIURL + "/health"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health under faults: %v %v", resp, err)
	}
	c.must(204, "DELETE", "/_sandboxd/faults/"+active[0].ID, nil, nil)
	c.must(404, "DELETE", "/_sandboxd/faults/"+active[0].ID, nil, nil)
	c.must(200, "GET", "/sandboxes/"+a, nil, nil)

	for _, bad := range []sandboxd.Fault{
		{},
		{Route: "*"},
		{Route: "*", Status: 200},
		{Route: "*", Webhook: "drop"},
		{Webhook: "explode"},
		{Webhook: "delay"},
		{Route: "*", Status: 500, Count: -1},
	} {
		c.must(400, "POST", "/_sandboxd/faults", bad, nil)
	}
	// The admin endpoint needs the API key like everything else.
	req, _ := http.NewRequest("POST", c.h.APIURL+"/_sandboxd/faults", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("admin without key: %v %v", resp, err)
	}
}

// TestAProductionSandboxdTakesNoFaults: without Config.FaultInjection (as
// cmd/sandboxd runs unless told otherwise) no endpoint adds a fault, kills
// as the dashboard or loses a sandbox, and every call acts.
func TestAProductionSandboxdTakesNoFaults(t *testing.T) {
	t.Parallel()
	c := newClient(t, sandboxdtest.WithConfig(func(cfg *sandboxd.Config) { cfg.FaultInjection = false }))
	sb := c.create(nil)
	for _, call := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/_sandboxd/faults", sandboxd.Fault{Route: "*", Status: 500}},
		{"POST", "/_sandboxd/faults", sandboxd.Fault{Webhook: sandboxd.WebhookDrop}},
		{"GET", "/_sandboxd/faults", nil},
		{"DELETE", "/_sandboxd/faults", nil},
		{"POST", "/_sandboxd/sandboxes/" + sb.SandboxID + "/kill", nil},
		{"POST", "/_sandboxd/sandboxes/" + sb.SandboxID + "/lose", nil},
	} {
		c.must(404, call.method, call.path, call.body, nil)
	}
	c.must(200, "GET", "/sandboxes/"+sb.SandboxID, nil, nil)
	c.must(204, "POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, nil)
	// The isolation report is no fault: production answers it.
	c.must(200, "GET", "/_sandboxd/isolation", nil, nil)
}

func TestWebhookFaults(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "f")
	c := newClient(t, sandboxdtest.WithWebhook(rcv.srv.URL, "f"))
	c.h.InjectFault(t, sandboxd.Fault{Webhook: sandboxd.WebhookDrop, Count: 1})
	dropped := c.create(nil)
	delivered := c.create(nil)
	// One webhook's deliveries go out in event order, one at a time: once
	// the second event is in, the first was dealt with, and dropped.
	got := rcv.waitEvents(1)
	if len(rcv.received()) != 1 || got[0].SandboxID != delivered.SandboxID {
		t.Fatalf("drop: got %s", mustJSON(t, rcv.received()))
	}
	// The dropped event is still in the events API, for catch-up readers.
	if evs := c.events("/" + dropped.SandboxID); len(evs) != 1 {
		t.Fatalf("events of the dropped delivery: %s", mustJSON(t, evs))
	}

	c.h.InjectFault(t, sandboxd.Fault{Webhook: sandboxd.WebhookDelay, LatencyMs: 400, Count: 1})
	start := time.Now()
	c.must(204, "DELETE", "/sandboxes/"+delivered.SandboxID, nil, nil)
	rcv.waitEvents(2)
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("delayed delivery arrived after %v", d)
	}
}

func TestKillFromDashboard(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "d")
	c := newClient(t, sandboxdtest.WithWebhook(rcv.srv.URL, "d"))
	sb := c.create(nil)
	c.h.KillFromDashboard(t, sb.SandboxID)
	c.must(404, "GET", "/sandboxes/"+sb.SandboxID, nil, nil)
	got := rcv.waitEvents(2)
	if got[1].Type != "sandbox.lifecycle.killed" || got[1].EventData["kill_reason"] != "request" {
		t.Fatalf("dashboard kill: %s", mustJSON(t, got))
	}
	other := c.create(nil)
	body, _ := json.Marshal(map[string]string{"reason": "admin"})
	c.must(204, "POST", "/_sandboxd/sandboxes/"+other.SandboxID+"/kill", string(body), nil)
	if evs := c.events("/" + other.SandboxID); evs[0].EventData["kill_reason"] != "admin" {
		t.Fatalf("reason: %s", mustJSON(t, evs))
	}
	c.must(404, "POST", "/_sandboxd/sandboxes/inotthere/kill", nil, nil)
}
