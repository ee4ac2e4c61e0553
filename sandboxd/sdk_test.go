package sandboxd_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// The guarantees E2B's own SDK test suite checks (docs/sandboxd.md, "Running E2B's SDK suite"),
// each held here by a test of ours.

func TestTrafficToAPausedSandboxAnswersTheProvidersNotFound(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	sb := c.create(nil)
	c.must(204, "POST", "/sandboxes/"+sb.SandboxID+"/pause", map[string]any{"memory": true}, nil)
	// envd's /health is what the SDK's isRunning asks; only a 502 means "not running".
	res, err := c.http.Do(c.envdRequest(sb, "GET", "/health", nil))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var body struct {
		Code      int    `json:"code"`
		Message   string `json:"message"`
		SandboxID string `json:"sandboxId"`
	}
	if res.StatusCode != http.StatusBadGateway || json.Unmarshal(b, &body) != nil ||
		body.Code != 502 || body.SandboxID != sb.SandboxID || body.Message != "The sandbox was not found" {
		t.Fatalf("envd of a paused sandbox answered %d %s; want the provider's 502 not-found body", res.StatusCode, b)
	}
}
