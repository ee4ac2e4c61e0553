package sandboxd_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestHealthAndAuth(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	resp, err := http.Get(c.h.APIURL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %d", resp.StatusCode)
	}
	tests := []struct {
		name, key, message string
	}{
		{"missing", "", "Missing API key"},
		{"bad format", "sk-123", "Invalid API key format"},
		{"unknown key", "e2b_" + strings.Repeat("0", 40), "Cannot get the team for the given API key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", c.h.APIURL+"/v2/sandboxes", nil)
			if tt.key != "" {
				req.Header.Set("X-API-Key", tt.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != 401 || body.Code != 401 || !strings.Contains(body.Message, tt.message) {
				t.Fatalf("got %d %+v, want 401 %q", resp.StatusCode, body, tt.message)
			}
		})
	}
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	tests := []struct {
		name   string
		body   any
		status int
	}{
		{"malformed json", "{", 400},
		{"no template", map[string]any{"timeout": 10}, 400},
		{"unknown template", map[string]any{"templateID": "nope"}, 404},
		{"zero timeout", map[string]any{"templateID": "base", "timeout": 0}, 400},
		{"negative timeout", map[string]any{"templateID": "base", "timeout": -5}, 400},
		{"timeout above plan", map[string]any{"templateID": "base", "timeout": 25 * 3600}, 400},
		{"fs auto-pause without autoPause", map[string]any{"templateID": "base", "autoPauseMemory": false}, 400},
		{"fs auto-pause with autoResume", map[string]any{"templateID": "base", "autoPause": true, "autoPauseMemory": false, "autoResume": map[string]any{"enabled": true}}, 400},
		{"private traffic (not served)", map[string]any{"templateID": "base", "network": map[string]any{"allowPublicTraffic": false}}, 400},
		{"ok with defaults", map[string]any{"templateID": "base"}, 201},
		{"ok with tag and namespace", map[string]any{"templateID": "e2b/base:latest", "timeout": 60}, 201},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/sandboxes", "/v2/sandboxes"} {
				status, body, _ := c.do("POST", path, tt.body)
				if status != tt.status {
					t.Fatalf("POST %s: got %d %s, want %d", path, status, body, tt.status)
				}
				if status >= 400 && !json.Valid(body) {
					t.Fatalf("error body is not JSON: %s", body)
				}
			}
		})
	}
}

func TestCreateGetKill(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(map[string]any{"timeout": 120, "secure": true, "metadata": map[string]string{"project": "p1"},
		"envVars": map[string]string{"GREETING": "hi"}})
	if len(sb.SandboxID) != 21 || sb.SandboxID[0] != 'i' || sb.EnvdVersion != "0.6.13" || sb.EnvdAccessToken == "" ||
		sb.Domain == nil || *sb.Domain != c.h.Domain || sb.TemplateID != "base" {
		t.Fatalf("create: %+v", sb)
	}
	d := c.info(sb.SandboxID)
	if d.State != "running" || d.Metadata["project"] != "p1" || d.EnvdAccessToken != sb.EnvdAccessToken ||
		d.Lifecycle.OnTimeout != "kill" || d.Domain == nil {
		t.Fatalf("info: %+v", d)
	}
	if got := d.EndAt.Sub(d.StartedAt); got != 120*time.Second {
		t.Fatalf("lifetime %v, want 2m", got)
	}
	// The legacy "<id>-<clientID>" form names the same sandbox.
	c.must(200, "GET", "/sandboxes/"+sb.SandboxID+"-6532622b", nil, nil)
	c.must(400, "GET", "/sandboxes/NOT_AN_ID", nil, nil)
	c.must(404, "GET", "/sandboxes/inotthere", nil, nil)
	c.must(200, "GET", "/sandboxes/"+sb.SandboxID+"/metrics", nil, nil)
	c.must(404, "GET", "/sandboxes/inotthere/metrics", nil, nil)

	c.must(204, "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil)
	c.must(404, "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil)
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	c.must(404, "GET", "/sandboxes/"+sb.SandboxID, nil, &e)
	if e.Code != 404 || !strings.Contains(e.Message, "doesn't exist or you don't have access to it") {
		t.Fatalf("404 body: %+v", e)
	}
	evs := c.events("/" + sb.SandboxID + "?orderAsc=true")
	if len(evs) != 2 || evs[0].Type != "sandbox.lifecycle.created" || evs[1].Type != "sandbox.lifecycle.killed" ||
		evs[1].EventData["kill_reason"] != "request" {
		t.Fatalf("events: %s", mustJSON(t, evs))
	}
	if md, _ := evs[0].EventData["sandbox_metadata"].(map[string]any); md["project"] != "p1" {
		t.Fatalf("created event lacks metadata: %s", mustJSON(t, evs[0]))
	}
}

func TestPauseConnectTimeoutStateMachine(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	id := c.create(map[string]any{"timeout": 60}).SandboxID
	p := "/sandboxes/" + id

	c.must(400, "POST", p+"/pause", "{not json", nil)
	c.must(204, "POST", p+"/pause", nil, nil) // no body: memory snapshot
	c.must(409, "POST", p+"/pause", map[string]any{"memory": false}, nil)
	paused := c.info(id)
	if paused.State != "paused" || paused.Domain != nil || time.Since(paused.EndAt) > 5*time.Second {
		t.Fatalf("paused info: %+v", paused)
	}
	c.must(404, "POST", p+"/timeout", map[string]any{"timeout": 30}, nil)
	c.must(404, "POST", p+"/refreshes", map[string]any{"duration": 30}, nil)
	c.must(400, "POST", p+"/connect", map[string]any{"timeout": 25 * 3600}, nil)

	var sb sandboxBody
	c.must(201, "POST", p+"/connect", map[string]any{"timeout": 100}, &sb)
	resumed := c.info(id)
	if sb.SandboxID != id || resumed.State != "running" || !resumed.StartedAt.After(paused.StartedAt) {
		t.Fatalf("resumed: %+v", resumed)
	}
	if got := resumed.EndAt.Sub(resumed.StartedAt); got != 100*time.Second {
		t.Fatalf("resumed lifetime %v, want exactly the connect timeout", got)
	}
	// Connect on a running sandbox only extends.
	c.must(200, "POST", "/v2"+p+"/connect", map[string]any{"timeout": 10}, nil)
	if got := c.info(id).EndAt; !got.Equal(resumed.EndAt) {
		t.Fatalf("connect shortened the end: %v -> %v", resumed.EndAt, got)
	}
	c.must(200, "POST", p+"/connect", map[string]any{"timeout": 500}, nil)
	if got := c.info(id).EndAt; time.Until(got) < 490*time.Second {
		t.Fatalf("connect did not extend: %v", got)
	}
	// Set timeout may shorten; refresh only extends.
	c.must(204, "POST", p+"/timeout", map[string]any{"timeout": 50}, nil)
	if left := time.Until(c.info(id).EndAt); left > 51*time.Second || left < 45*time.Second {
		t.Fatalf("set timeout: %v left", left)
	}
	c.must(400, "POST", p+"/timeout", map[string]any{}, nil)
	c.must(204, "POST", p+"/refreshes", map[string]any{"duration": 1}, nil)
	if left := time.Until(c.info(id).EndAt); left < 45*time.Second {
		t.Fatalf("refresh shortened: %v left", left)
	}
	c.must(400, "POST", p+"/refreshes", map[string]any{"duration": 4000}, nil)
	c.must(204, "POST", p+"/refreshes", nil, nil)
	// The deprecated resume refuses a running sandbox and resumes a paused one.
	c.must(409, "POST", p+"/resume", map[string]any{"timeout": 30}, nil)
	c.must(204, "POST", p+"/pause", map[string]any{"memory": false}, nil)
	c.must(400, "POST", p+"/resume", map[string]any{"timeout": 0}, nil)
	c.must(201, "POST", p+"/resume", map[string]any{"timeout": 30}, nil)

	for _, route := range []string{"/pause", "/connect", "/timeout", "/refreshes", "/resume"} {
		c.must(404, "POST", "/sandboxes/inotthere"+route, map[string]any{"timeout": 30}, nil)
	}

	var types []string
	for _, e := range c.events("/" + id + "?orderAsc=true&limit=100") {
		types = append(types, strings.TrimPrefix(e.Type, "sandbox.lifecycle."))
	}
	want := "created paused resumed updated updated paused resumed"
	if strings.Join(types, " ") != want {
		t.Fatalf("events %v, want %s", types, want)
	}
}
