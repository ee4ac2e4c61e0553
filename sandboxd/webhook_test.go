package sandboxd_test

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// webhookEvent is the snake_case webhook payload.
type webhookEvent struct {
	ID            string         `json:"id"`
	Version       string         `json:"version"`
	Type          string         `json:"type"`
	Timestamp     time.Time      `json:"timestamp"`
	EventCategory string         `json:"event_category"`
	EventLabel    string         `json:"event_label"`
	EventData     map[string]any `json:"event_data"`
	SandboxID     string         `json:"sandbox_id"`
	ExecutionID   string         `json:"sandbox_execution_id"`
	TemplateID    string         `json:"sandbox_template_id"`
	BuildID       string         `json:"sandbox_build_id"`
	TeamID        string         `json:"sandbox_team_id"`
}

// receiver is a webhook endpoint written from the provider's documented
// contract (docs/provider.md), independently of sandboxd: it verifies signatures in either base64 alphabet and
// de-duplicates on the event id, as Sandman must.
type receiver struct {
	t      testing.TB
	secret string
	srv    *httptest.Server

	mu          sync.Mutex
	failFirst   int // answer 500 to this many attempts
	attempts    int
	badSigs     int
	deliveryIDs []string
	webhookIDs  []string
	events      map[string]webhookEvent
	order       []string // event ids in arrival order, first arrival only
}

func newReceiver(t testing.TB, secret string) *receiver {
	r := &receiver{t: t, secret: secret, events: map[string]webhookEvent{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// verifySignature checks e2b-signature: base64 of SHA-256(secret || body)
// without padding, in the standard or the URL-safe alphabet.
func verifySignature(secret string, body []byte, header string) bool {
	sum := sha256.Sum256(append([]byte(secret), body...))
	want := base64.RawStdEncoding.EncodeToString(sum[:])
	got := strings.TrimRight(strings.NewReplacer("-", "+", "_", "/").Replace(header), "=")
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts++
	if req.Header.Get("e2b-signature-version") != "v1" || !verifySignature(r.secret, body, req.Header.Get("e2b-signature")) {
		r.badSigs++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.deliveryIDs = append(r.deliveryIDs, req.Header.Get("e2b-delivery-id"))
	r.webhookIDs = append(r.webhookIDs, req.Header.Get("e2b-webhook-id"))
	if r.failFirst > 0 {
		r.failFirst--
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	var ev webhookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("webhook body %s: %v", body, err)
		return
	}
	if _, dup := r.events[ev.ID]; !dup {
		r.events[ev.ID] = ev
		r.order = append(r.order, ev.ID)
	}
	w.WriteHeader(http.StatusOK)
}

// received returns the de-duplicated events in arrival order.
func (r *receiver) received() []webhookEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]webhookEvent, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, r.events[id])
	}
	return out
}

func (r *receiver) waitEvents(n int) []webhookEvent {
	r.t.Helper()
	waitFor(r.t, "webhook events", 10*time.Second, func() bool { return len(r.received()) >= n })
	return r.received()
}

func types(evs []webhookEvent) string {
	var ts []string
	for _, e := range evs {
		ts = append(ts, strings.TrimPrefix(e.Type, "sandbox.lifecycle."))
	}
	return strings.Join(ts, " ")
}

func TestWebhookDelivery(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "s3cret")
	c := newClient(t, sandboxdtest.WithWebhook(rcv.srv.URL, "s3cret"))
	sb := c.create(map[string]any{"metadata": map[string]string{"project": "p"}})
	p := "/sandboxes/" + sb.SandboxID
	c.must(204, "POST", p+"/pause", nil, nil)
	c.must(201, "POST", p+"/connect", map[string]any{"timeout": 30}, nil)
	c.must(204, "POST", p+"/timeout", map[string]any{"timeout": 40}, nil)
	c.must(204, "DELETE", p, nil, nil)

	got := rcv.waitEvents(5)
	if types(got) != "created paused resumed updated killed" {
		t.Fatalf("webhooks: %s", types(got))
	}
	api := c.events("/" + sb.SandboxID + "?orderAsc=true")
	for i, e := range got {
		if e.ID != api[i].ID || !e.Timestamp.Equal(api[i].Timestamp) || e.SandboxID != sb.SandboxID || e.Version != "v2" ||
			e.EventCategory != "lifecycle" || e.TeamID == "" || e.ExecutionID == "" || e.TemplateID != "base" {
			t.Fatalf("webhook %d %+v does not match the events API %+v", i, e, api[i])
		}
		if md, _ := e.EventData["sandbox_metadata"].(map[string]any); md["project"] != "p" {
			t.Fatalf("no metadata in %+v", e)
		}
		if i > 0 && !e.Timestamp.After(got[i-1].Timestamp) {
			t.Fatalf("timestamps not increasing: %v then %v", got[i-1].Timestamp, e.Timestamp)
		}
	}
	if got[3].EventData["set_timeout"] == nil || got[4].EventData["kill_reason"] != "request" || got[1].EventData["execution"] == nil {
		t.Fatalf("event data: %s", mustJSON(t, got))
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.badSigs != 0 || rcv.webhookIDs[0] == "" {
		t.Fatalf("bad signatures %d, webhook ids %v", rcv.badSigs, rcv.webhookIDs)
	}
}

func TestWebhookRetriesWithNewDeliveryIDs(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "k")
	rcv.failFirst = 2
	c := newClient(t, sandboxdtest.WithWebhook(rcv.srv.URL, "k"))
	c.create(nil)
	got := rcv.waitEvents(1)
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(got) != 1 || rcv.attempts != 3 {
		t.Fatalf("%d events in %d attempts, want 1 in 3", len(got), rcv.attempts)
	}
	if ids := slices.Compact(slices.Sorted(slices.Values(rcv.deliveryIDs))); len(ids) != 3 {
		t.Fatalf("delivery ids must differ per attempt: %v", rcv.deliveryIDs)
	}
}

func TestWebhookGivesUpAfterRetries(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, "k")
	rcv.failFirst = 1000
	c := newClient(t, sandboxdtest.WithWebhook(rcv.srv.URL, "k"), sandboxdtest.WithConfig(func(c *sandboxd.Config) {
		c.WebhookRetries = 2
		c.WebhookRetryDelay = 10 * time.Millisecond
	}))
	c.create(nil)
	waitFor(t, "the first attempt and two retries", 10*time.Second, func() bool {
		rcv.mu.Lock()
		defer rcv.mu.Unlock()
		return rcv.attempts >= 3
	})
	// Shutdown waits for the attempt in flight, then saves what is still
	// owed: a fourth attempt sandboxd meant to make would be there.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.h.Server.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	var owed []map[string]any
	b, err := os.ReadFile(filepath.Join(c.h.StateDir, "pending-deliveries.json"))
	if err != nil || json.Unmarshal(b, &owed) != nil || len(owed) != 0 {
		t.Fatalf("after the last retry, still owed: %s %v", b, err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if rcv.attempts != 3 {
		t.Fatalf("%d attempts, want 1 + 2 retries", rcv.attempts)
	}
}

type webhookView struct {
	ID        string    `json:"id"`
	TeamID    string    `json:"teamID"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Enabled   bool      `json:"enabled"`
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"createdAt"`
}

func TestWebhookRegistration(t *testing.T) {
	t.Parallel()
	c := newClient(t, sandboxdtest.WithConfig(func(c *sandboxd.Config) { c.WebhookURLSafeSignature = true }))
	all := newReceiver(t, "secret-all")
	killsOnly := newReceiver(t, "secret-kills")

	for _, bad := range []map[string]any{
		{"name": "x", "url": "ftp://nope", "enabled": true, "signatureSecret": "s"},
		{"name": "x", "url": all.srv.URL, "enabled": true, "events": []string{"sandbox.lifecycle.exploded"}, "signatureSecret": "s"},
		{"name": "x", "url": all.srv.URL},
	} {
		c.must(400, "POST", "/events/webhooks", bad, nil)
	}
	var a, k webhookView
	status, body, _ := c.do("POST", "/events/webhooks", map[string]any{"name": "all", "url": all.srv.URL, "enabled": true,
		"events": []string{}, "signatureSecret": "secret-all"})
	if status != 201 || strings.Contains(string(body), "secret-all") {
		t.Fatalf("create: %d %s (the secret must never be shown)", status, body)
	}
	_ = json.Unmarshal(body, &a)
	c.must(201, "POST", "/events/webhooks", map[string]any{"name": "kills", "url": killsOnly.srv.URL, "enabled": true,
		"events": []string{"sandbox.lifecycle.killed"}, "signatureSecret": "secret-kills"}, &k)
	if a.ID == "" || a.TeamID == "" || !a.Enabled || a.CreatedAt.IsZero() {
		t.Fatalf("view: %+v", a)
	}
	var list []webhookView
	c.must(200, "GET", "/events/webhooks", nil, &list)
	if len(list) != 2 || list[0].ID != a.ID || list[1].ID != k.ID {
		t.Fatalf("list: %+v", list)
	}
	var one webhookView
	c.must(200, "GET", "/events/webhooks/"+k.ID, nil, &one)
	if one.Name != "kills" || !slices.Equal(one.Events, []string{"sandbox.lifecycle.killed"}) {
		t.Fatalf("get: %+v", one)
	}
	c.must(404, "GET", "/events/webhooks/nope", nil, nil)
	c.must(404, "PATCH", "/events/webhooks/nope", map[string]any{"enabled": false}, nil)
	c.must(404, "DELETE", "/events/webhooks/nope", nil, nil)
	c.must(400, "PATCH", "/events/webhooks/"+a.ID, map[string]any{"url": "not a url"}, nil)

	sb := c.create(nil)
	c.must(204, "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil)
	if got := all.waitEvents(2); types(got) != "created killed" {
		t.Fatalf("all: %s", types(got))
	}
	if got := killsOnly.waitEvents(1); types(got) != "killed" {
		t.Fatalf("kills only: %s", types(got))
	}

	// Disabled webhooks receive nothing; deleted ones are gone.
	var patched webhookView
	c.must(200, "PATCH", "/events/webhooks/"+a.ID, map[string]any{"enabled": false, "name": "renamed"}, &patched)
	if patched.Enabled || patched.Name != "renamed" || patched.URL != all.srv.URL {
		t.Fatalf("patch: %+v", patched)
	}
	c.must(200, "DELETE", "/events/webhooks/"+k.ID, nil, nil)
	c.must(404, "GET", "/events/webhooks/"+k.ID, nil, nil)
	// Deliveries are owed to the webhooks subscribed when an event happens,
	// so once a webhook registered now has the next events, the disabled and
	// the deleted ones will never get them.
	barrier := newReceiver(t, "secret-barrier")
	c.must(201, "POST", "/events/webhooks", map[string]any{"name": "barrier", "url": barrier.srv.URL, "enabled": true,
		"events": []string{}, "signatureSecret": "secret-barrier"}, nil)
	sb2 := c.create(nil)
	c.must(204, "DELETE", "/sandboxes/"+sb2.SandboxID, nil, nil)
	if got := barrier.waitEvents(2); types(got) != "created killed" || got[0].SandboxID != sb2.SandboxID {
		t.Fatalf("barrier: %s", mustJSON(t, got))
	}
	if n := len(all.received()); n != 2 {
		t.Fatalf("disabled webhook got %d events", n)
	}
	if n := len(killsOnly.received()); n != 1 {
		t.Fatalf("deleted webhook got %d events", n)
	}
}
