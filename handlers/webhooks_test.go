package handlers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/lifecycle"
)

// sign computes e2b-signature as docs/provider.md ("Webhooks") defines it: base64 of SHA-256(secret ‖ body),
// unpadded, standard alphabet. The e2b package only verifies, so the test computes it
// independently, which also keeps a mistake there from being mirrored here.
func sign(secret string, body []byte) string {
	sum := sha256.Sum256(append([]byte(secret), body...))
	return base64.RawStdEncoding.EncodeToString(sum[:])
}

// hookBody is a webhook payload as the provider sends it (snake_case).
func hookBody(eventID, typ, providerID string, at time.Time, data map[string]any) []byte {
	m := map[string]any{
		"id": eventID, "version": "v2", "type": typ, "timestamp": at.UTC().Format(time.RFC3339Nano),
		"event_category": "lifecycle", "sandbox_id": providerID, "sandbox_execution_id": uuid.NewString(),
		"sandbox_template_id": "base", "sandbox_build_id": uuid.NewString(), "sandbox_team_id": uuid.NewString(),
	}
	if data != nil {
		m["event_data"] = data
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// webhookRequest is one delivery; an empty signature sends no e2b-signature header.
func webhookRequest(base string, body []byte, signature, deliveryID string) *http.Request {
	req, err := http.NewRequest(http.MethodPost, base+"/webhooks/e2b", bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("e2b-webhook-id", "wh-test")
	req.Header.Set("e2b-delivery-id", deliveryID)
	req.Header.Set("e2b-signature-version", "v1")
	if signature != "" {
		req.Header.Set("e2b-signature", signature)
	}
	return req
}

type hookAnswer struct {
	status int
	EventID,
	Status string
}

// deliver posts a delivery over HTTP, as the provider does.
func (s *stack) deliver(t testing.TB, body []byte, signature, deliveryID string) hookAnswer {
	t.Helper()
	a, err := s.tryDeliver(body, signature, deliveryID)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// tryDeliver is deliver for goroutines other than the test's.
func (s *stack) tryDeliver(body []byte, signature, deliveryID string) (hookAnswer, error) {
	res, err := http.DefaultClient.Do(webhookRequest(s.URL(), body, signature, deliveryID))
	if err != nil {
		return hookAnswer{}, err
	}
	defer res.Body.Close()
	a := hookAnswer{status: res.StatusCode}
	if res.StatusCode == http.StatusOK {
		err = json.NewDecoder(res.Body).Decode(&a)
	}
	return a, err
}

func (s *stack) deliveries(t testing.TB, eventID string) int {
	t.Helper()
	return s.count(t, "SELECT count(*) FROM webhook_deliveries WHERE event_id = $1", eventID)
}

func (s *stack) appliedEvents(t testing.TB, eventID string) int {
	t.Helper()
	return s.count(t, "SELECT count(*) FROM sandbox_events WHERE provider_event_id = $1", eventID)
}

// waitOutcome waits until the webhook job has processed the delivery and returns its outcome.
func (s *stack) waitOutcome(t testing.TB, eventID string) string {
	t.Helper()
	var outcome string
	testkit.Eventually(t, 30*time.Second, "delivery "+eventID+" to be processed", func() error {
		return s.Pool().QueryRow(context.Background(),
			"SELECT outcome FROM webhook_deliveries WHERE event_id = $1 AND processed_at IS NOT NULL", eventID).Scan(&outcome)
	})
	return outcome
}

// webhookStack is a stack whose sandbox states change only through the webhooks a test sends:
// sandboxd delivers none and the reconciler would otherwise undo a synthetic pause.
func webhookStack(t *testing.T) *stack {
	return start(t, apptest.Options{Config: func(c *app.Config) {
		c.Lifecycle.ReconcileEvery = 0
		c.Lifecycle.SweepEvery = 0
	}})
}

func TestWebhookSignatures(t *testing.T) {
	t.Parallel()
	s := webhookStack(t)
	c := s.NewClient(t)
	c.SignUp("signed@example.com")
	_, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)
	now := time.Now()

	kill := hookBody("ev-forged-kill", e2b.EventKilled, sb.ProviderID, now, map[string]any{"kill_reason": "admin"})
	for name, sig := range map[string]string{
		"missing":             "",
		"other secret":        sign("not-the-secret", kill),
		"other body":          sign(apptest.WebhookSecret, append([]byte(" "), kill...)),
		"empty secret":        sign("", kill),
		"truncated":           sign(apptest.WebhookSecret, kill)[:20],
		"hex instead of b64":  fmt.Sprintf("%x", sha256.Sum256(append([]byte(apptest.WebhookSecret), kill...))),
		"hmac-like prefix v1": "v1," + sign(apptest.WebhookSecret, kill),
	} {
		if a := s.deliver(t, kill, sig, "d-"+name); a.status != http.StatusUnauthorized {
			t.Fatalf("%s signature: status %d, want 401", name, a.status)
		}
	}
	if n := s.deliveries(t, "ev-forged-kill"); n != 0 {
		t.Fatalf("a rejected delivery was stored %d times", n)
	}

	// The provider's docs and its live service disagree on the alphabet: both must verify. Pick
	// an event id whose signature has a character where the two alphabets differ.
	var pause []byte
	var urlSig string
	for i := 0; ; i++ {
		pause = hookBody(fmt.Sprintf("ev-pause-%d", i), e2b.EventPaused, sb.ProviderID, now.Add(time.Second), nil)
		std := sign(apptest.WebhookSecret, pause)
		if strings.ContainsAny(std, "+/") {
			urlSig = strings.NewReplacer("+", "-", "/", "_").Replace(std) + "="
			break
		}
	}
	a := s.deliver(t, pause, urlSig, "d-pause")
	if a.status != http.StatusOK || a.Status != "queued" {
		t.Fatalf("URL-safe signature: %+v, want 200 queued", a)
	}
	if got := s.waitOutcome(t, a.EventID); got != "applied" {
		t.Fatalf("outcome %q, want applied", got)
	}
	c.WaitSandbox(sandboxID, "paused", 5*time.Second)

	resume := hookBody("ev-resume", e2b.EventResumed, sb.ProviderID, now.Add(2*time.Second), nil)
	if a := s.deliver(t, resume, sign(apptest.WebhookSecret, resume), "d-resume"); a.status != http.StatusOK {
		t.Fatalf("standard signature: status %d, want 200", a.status)
	}
	if got := s.waitOutcome(t, "ev-resume"); got != "applied" {
		t.Fatalf("outcome %q, want applied", got)
	}
	c.WaitSandbox(sandboxID, "running", 5*time.Second)
	if n := s.appliedEvents(t, "ev-forged-kill"); n != 0 {
		t.Fatalf("the unsigned kill was applied")
	}
}

func TestWebhookReplaysAndDuplicatesApplyOnce(t *testing.T) {
	t.Parallel()
	s := webhookStack(t)
	c := s.NewClient(t)
	c.SignUp("replay@example.com")
	_, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)
	now := time.Now()

	// A captured delivery sent again, each time under a new delivery id (as a retry is).
	pause := hookBody("ev-replayed", e2b.EventPaused, sb.ProviderID, now, nil)
	sig := sign(apptest.WebhookSecret, pause)
	for i := range 4 {
		a := s.deliver(t, pause, sig, fmt.Sprintf("d-replay-%d", i))
		want := "duplicate"
		if i == 0 {
			want = "queued"
		}
		if a.status != http.StatusOK || a.Status != want {
			t.Fatalf("delivery %d: %+v, want 200 %s", i, a, want)
		}
	}
	c.WaitSandbox(sandboxID, "paused", 30*time.Second)
	s.waitOutcome(t, "ev-replayed")
	if n := s.deliveries(t, "ev-replayed"); n != 1 {
		t.Fatalf("%d deliveries stored, want 1", n)
	}
	if n := s.appliedEvents(t, "ev-replayed"); n != 1 {
		t.Fatalf("%d state changes recorded, want 1", n)
	}
	var stored string
	if err := s.Pool().QueryRow(context.Background(), "SELECT delivery_id FROM webhook_deliveries WHERE event_id = 'ev-replayed'").Scan(&stored); err != nil || stored != "d-replay-0" {
		t.Fatalf("stored delivery %q (%v), want the first, d-replay-0", stored, err)
	}

	// Concurrent deliveries of one event, serialised differently (so differently signed), as
	// the provider's retries racing its first attempt.
	const n = 8
	body := hookBody("ev-concurrent", e2b.EventResumed, sb.ProviderID, now.Add(time.Second), nil)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	answers := make([]hookAnswer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		variant, _ := json.MarshalIndent(m, "", strings.Repeat(" ", i))
		wg.Go(func() {
			answers[i], errs[i] = s.tryDeliver(variant, sign(apptest.WebhookSecret, variant), fmt.Sprintf("d-concurrent-%d", i))
		})
	}
	wg.Wait()
	queued := 0
	for i, a := range answers {
		if errs[i] != nil || a.status != http.StatusOK {
			t.Fatalf("delivery %d: status %d (%v)", i, a.status, errs[i])
		}
		if a.Status == "queued" {
			queued++
		}
	}
	if queued != 1 {
		t.Fatalf("%d deliveries were queued, want 1", queued)
	}
	c.WaitSandbox(sandboxID, "running", 30*time.Second)
	s.waitOutcome(t, "ev-concurrent")
	if n := s.deliveries(t, "ev-concurrent"); n != 1 {
		t.Fatalf("%d deliveries stored, want 1", n)
	}
	if n := s.appliedEvents(t, "ev-concurrent"); n != 1 {
		t.Fatalf("%d state changes recorded, want 1", n)
	}
}

// Deliveries that arrive together are stored and applied together (lifecycle's group commit),
// and still each one is stored before its 200, stored once however often it comes, applied at
// most once, and each sandbox ends in its newest event's state, whichever arrived first.
func TestWebhooksArrivingTogetherAreEachStoredBeforeTheirAnswer(t *testing.T) {
	t.Parallel()
	s := webhookStack(t)
	c := s.NewClient(t)
	c.SignUp("together@example.com")
	_, idA := c.BuildCounter()
	_, idB := c.BuildStarter("Second", "counter")
	a, b := c.WaitSandbox(idA, "running", time.Second), c.WaitSandbox(idB, "running", time.Second)

	type hook struct {
		id   string
		body []byte
	}
	var hooks []hook
	now := time.Now()
	add := func(id, typ, providerID string, at time.Duration) {
		hooks = append(hooks, hook{id, hookBody(id, typ, providerID, now.Add(at), nil)})
	}
	// A: 25 events, the newest a pause; B: 10, the newest a resume (so B ends running, and
	// an older pause of B applied after it would show).
	for i := range 25 {
		add(fmt.Sprintf("ev-together-a-%d", i), []string{e2b.EventPaused, e2b.EventResumed}[i%2], a.ProviderID, time.Duration(i)*time.Millisecond)
	}
	for i := range 10 {
		add(fmt.Sprintf("ev-together-b-%d", i), []string{e2b.EventPaused, e2b.EventResumed}[i%2], b.ProviderID, time.Duration(i)*time.Millisecond)
	}
	add("ev-together-unknown", "sandbox.lifecycle.checkpointed", a.ProviderID, time.Second)
	n := len(hooks)
	for i := range 8 { // retries: the same events again, under new delivery ids
		hooks = append(hooks, hooks[i*4])
	}

	start := make(chan struct{})
	errs := make(chan error, len(hooks))
	var wg sync.WaitGroup
	for i, h := range hooks {
		wg.Go(func() {
			<-start
			ans, err := s.tryDeliver(h.body, sign(apptest.WebhookSecret, h.body), fmt.Sprintf("d-together-%d", i))
			if err != nil || ans.status != http.StatusOK {
				errs <- fmt.Errorf("delivery %d (%s): status %d (%v)", i, h.id, ans.status, err)
				return
			}
			// Answered 200: it is stored now.
			var stored int
			if err := s.Pool().QueryRow(context.Background(), "SELECT count(*) FROM webhook_deliveries WHERE event_id = $1", h.id).Scan(&stored); err != nil || stored != 1 {
				errs <- fmt.Errorf("delivery %d (%s) answered 200 with %d rows stored (%v)", i, h.id, stored, err)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	testkit.Until(t, 30*time.Second, "every delivery processed", func() bool {
		return s.count(t, "SELECT count(*) FROM webhook_deliveries WHERE event_id LIKE 'ev-together-%' AND processed_at IS NULL") == 0
	})
	if got := s.count(t, "SELECT count(*) FROM webhook_deliveries WHERE event_id LIKE 'ev-together-%'"); got != n {
		t.Fatalf("%d deliveries stored for %d events", got, n)
	}
	if twice := s.count(t, `SELECT count(*) FROM (SELECT provider_event_id FROM sandbox_events
		WHERE provider_event_id LIKE 'ev-together-%' GROUP BY 1 HAVING count(*) > 1) twice`); twice != 0 {
		t.Fatalf("%d events applied twice", twice)
	}
	if o := s.waitOutcome(t, "ev-together-unknown"); o != "unknown_type" {
		t.Fatalf("the unknown event's outcome %q, want unknown_type", o)
	}
	c.WaitSandbox(idA, "paused", 5*time.Second)
	c.WaitSandbox(idB, "running", 5*time.Second)
	for id, want := range map[string]string{idA: "paused", idB: "running"} {
		var got string
		if err := s.Pool().QueryRow(context.Background(), "SELECT status FROM sandboxes WHERE id = $1", id).Scan(&got); err != nil || got != want {
			t.Fatalf("sandbox ended %s (%v), want %s: its newest event's state", got, err, want)
		}
	}
}

func TestWebhookUnknownTypeIsStoredAndIgnored(t *testing.T) {
	t.Parallel()
	s := webhookStack(t)
	c := s.NewClient(t)
	c.SignUp("unknown-type@example.com")
	_, sandboxID := c.BuildCounter()
	sb := c.WaitSandbox(sandboxID, "running", time.Second)
	before := s.count(t, "SELECT count(*) FROM sandbox_events")

	for i, typ := range []string{e2b.EventCheckpointed, "sandbox.lifecycle.teleported"} {
		id := fmt.Sprintf("ev-unknown-%d", i)
		body := hookBody(id, typ, sb.ProviderID, time.Now(), map[string]any{"kill_reason": "admin"})
		if a := s.deliver(t, body, sign(apptest.WebhookSecret, body), "d-"+id); a.status != http.StatusOK || a.Status != "queued" {
			t.Fatalf("%s: %+v, want 200 queued", typ, a)
		}
		if got := s.waitOutcome(t, id); got != "unknown_type" {
			t.Fatalf("%s: outcome %q, want unknown_type", typ, got)
		}
		var storedType string
		var storedBody []byte
		if err := s.Pool().QueryRow(context.Background(), "SELECT event_type, body FROM webhook_deliveries WHERE event_id = $1", id).
			Scan(&storedType, &storedBody); err != nil {
			t.Fatal(err)
		}
		if storedType != typ || !bytes.Equal(storedBody, body) {
			t.Fatalf("stored %q %q, want the raw delivery of %s", storedType, storedBody, typ)
		}
	}
	if after := s.count(t, "SELECT count(*) FROM sandbox_events"); after != before {
		t.Fatalf("unknown types changed state: %d events, were %d", after, before)
	}
	c.WaitSandbox(sandboxID, "running", time.Second)
}

func TestWebhookKillOfATerminatedSandboxKeepsTerminated(t *testing.T) {
	t.Parallel()
	s := start(t, apptest.Options{Webhooks: true})
	c := s.NewClient(t)
	c.SignUp("terminated@example.com")
	projectID, sandboxID := c.BuildCounter()
	old := c.WaitSandbox(sandboxID, "running", time.Second)

	var res struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects/"+projectID+"/rebuild", map[string]string{"idempotencyKey": "rebuild-1"}, &res), http.StatusAccepted)
	c.WaitSandbox(sandboxID, "terminated", 5*time.Second)
	// Sandman's own kill comes back from the provider as killed (request): wait until that
	// delivery has been processed, so the check below is not made before it.
	testkit.Until(t, 30*time.Second, "the provider's kill event to be processed", func() bool {
		return s.count(t, `SELECT count(*) FROM webhook_deliveries WHERE event_type = $1 AND processed_at IS NOT NULL
			AND convert_from(body, 'UTF8')::jsonb->>'sandbox_id' = $2`, e2b.EventKilled, old.ProviderID) > 0
	})
	// Whatever the provider says later (here: an operator kill), Sandman's reason stands.
	body := hookBody("ev-late-admin-kill", e2b.EventKilled, old.ProviderID, time.Now().Add(time.Minute), map[string]any{"kill_reason": "admin"})
	if a := s.deliver(t, body, sign(apptest.WebhookSecret, body), "d-late"); a.status != http.StatusOK {
		t.Fatalf("the late kill: status %d, want 200", a.status)
	}
	s.waitOutcome(t, "ev-late-admin-kill")
	c.WaitSandbox(sandboxID, "terminated", time.Second)
	c.WaitSandbox(res.Sandbox.ID, "running", 90*time.Second)
}

// padded is a valid signed event of exactly size bytes (the padding is sandbox metadata).
func padded(t *testing.T, eventID string, size int) []byte {
	t.Helper()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	base := hookBody(eventID, e2b.EventPaused, "sbx-none", at, map[string]any{"sandbox_metadata": map[string]string{"pad": ""}})
	pad := size - len(base)
	if pad < 0 {
		t.Fatalf("size %d is under the empty event's %d", size, len(base))
	}
	body := hookBody(eventID, e2b.EventPaused, "sbx-none", at, map[string]any{"sandbox_metadata": map[string]string{"pad": strings.Repeat("x", pad)}})
	if len(body) != size {
		t.Fatalf("built %d bytes, want %d", len(body), size)
	}
	return body
}

func TestWebhookBodyLimit(t *testing.T) {
	t.Parallel()
	b := webOnly(t) // taking a delivery needs only the database

	atLimit := padded(t, "ev-at-limit", lifecycle.MaxWebhookBody)
	if a := b.deliver(t, atLimit, sign(apptest.WebhookSecret, atLimit), "d-at-limit"); a.status != http.StatusOK {
		t.Fatalf("a body of exactly 1 MiB: status %d, want 200", a.status)
	}
	if n := b.deliveries(t, "ev-at-limit"); n != 1 {
		t.Fatalf("the 1 MiB delivery was stored %d times, want 1", n)
	}

	over := padded(t, "ev-over-limit", lifecycle.MaxWebhookBody+1)
	if a := b.deliver(t, over, sign(apptest.WebhookSecret, over), "d-over"); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of 1 MiB + 1: status %d, want 413", a.status)
	}
	if n := b.deliveries(t, "ev-over-limit"); n != 0 {
		t.Fatalf("an oversized delivery was stored")
	}
}

// validHeaderValue reports whether net/http would carry v as a header value on the wire, so
// the fuzzer only sends what a real client could.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

func FuzzWebhook(f *testing.F) {
	b := webOnly(f)
	handler := b.Handler()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const (
		noSignature = iota
		validStd
		validURL
		given
	)
	valid := hookBody("ev-fuzz-seed", e2b.EventKilled, "sbx-1", at, map[string]any{"kill_reason": "timeout"})
	f.Add(valid, uint8(validStd), "", "d-1")
	f.Add(valid, uint8(validURL), "", "d-2")
	f.Add(valid, uint8(given), sign(apptest.WebhookSecret, valid), "d-3")
	f.Add(valid, uint8(given), "not a signature", "d-4")
	f.Add(valid, uint8(noSignature), "", "")
	f.Add(hookBody("ev-fuzz-unknown", "sandbox.lifecycle.mystery", "sbx-1", at, nil), uint8(validStd), "", "d-5")
	f.Add([]byte(`{"id":"","type":"","sandbox_id":"","timestamp":""}`), uint8(validStd), "", "d-6")
	f.Add([]byte(`{"id":"e","version":"v1","event_category":"lifecycle","event_label":"kill","sandbox_id":"s","timestamp":"2026-01-01T00:00:00Z","event_data":null}`), uint8(validStd), "", "d-7")
	f.Add([]byte(`{"id":"e\u0000nul","type":"sandbox.lifecycle.paused","sandbox_id":"s","timestamp":"2026-01-01T00:00:00Z"}`), uint8(validStd), "", "d-8")
	f.Add([]byte(`{"id":"e9","type":"sandbox.lifecycle.paused\u0000","sandbox_id":"s\u0000","timestamp":"2026-01-01T00:00:00Z"}`), uint8(validStd), "", "d-9")
	f.Add(hookBody("ev-fuzz-latin1", e2b.EventPaused, "sbx-1", at, nil), uint8(validStd), "", "d-\xff\xfe")
	f.Add([]byte(`{"id":"e10","type":"sandbox.lifecycle.updated","sandbox_id":"s","timestamp":"2026-01-01T00:00:00Z","event_data":[1,2]}`), uint8(validStd), "", "d-10")
	f.Add([]byte("null"), uint8(validStd), "", "d-11")
	f.Add([]byte("\xff\xfe{"), uint8(validStd), "", "d-12")
	f.Add([]byte{}, uint8(given), "", "d-13")

	f.Fuzz(func(t *testing.T, body []byte, mode uint8, signature, deliveryID string) {
		if !validHeaderValue(signature) || !validHeaderValue(deliveryID) {
			t.Skip("not a header value net/http would carry")
		}
		switch mode % 4 {
		case noSignature:
			signature = ""
		case validStd:
			signature = sign(apptest.WebhookSecret, body)
		case validURL:
			signature = strings.NewReplacer("+", "-", "/", "_").Replace(sign(apptest.WebhookSecret, body)) + "="
		}
		before := b.count(t, "SELECT count(*) FROM webhook_deliveries")
		req := webhookRequest("http://sandman.test", body, signature, deliveryID)
		if signature == "" {
			req.Header.Del("e2b-signature")
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		stored := b.count(t, "SELECT count(*) FROM webhook_deliveries") - before

		verified := e2b.VerifyWebhookSignature(apptest.WebhookSecret, body, signature)
		ev, parseErr := e2b.ParseWebhook(body)
		// An event whose ids hold a NUL cannot be stored (lifecycle.ReceiveWebhook refuses it).
		storable := parseErr == nil && !strings.ContainsRune(ev.ID+ev.Type+ev.SandboxID, 0)
		var answer struct{ Status string }
		_ = json.Unmarshal(rec.Body.Bytes(), &answer)
		switch {
		case rec.Code >= 500:
			t.Fatalf("status %d for body %q: %s", rec.Code, body, rec.Body)
		case !verified && rec.Code != http.StatusUnauthorized:
			t.Fatalf("unverified delivery answered %d, want 401", rec.Code)
		case verified && storable && rec.Code != http.StatusOK:
			t.Fatalf("a signed, parseable delivery %q answered %d, want 200: %s", body, rec.Code, rec.Body)
		case rec.Code == http.StatusOK && parseErr != nil:
			t.Fatalf("accepted an unparseable body (%v)", parseErr)
		case rec.Code != http.StatusOK && stored != 0:
			t.Fatalf("refused with %d but stored %d deliveries", rec.Code, stored)
		case rec.Code == http.StatusOK && answer.Status == "queued" && stored != 1:
			t.Fatalf("a new delivery (%s) answered 200 queued but stored %d rows", ev.ID, stored)
		case rec.Code == http.StatusOK && answer.Status != "queued" && answer.Status != "duplicate":
			t.Fatalf("a 200 that says neither queued nor duplicate: %s", rec.Body)
		case rec.Code == http.StatusOK && answer.Status == "duplicate" && stored != 0:
			t.Fatalf("a duplicate delivery (%s) stored %d rows", ev.ID, stored)
		}
	})
}
