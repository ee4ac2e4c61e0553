package e2b

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"
)

const webhookBody = `{"id":"9f4a1b2c-0000-4000-8000-000000000001","version":"v2","type":"sandbox.lifecycle.killed",` +
	`"event_category":"lifecycle","event_label":"kill","timestamp":"2026-08-01T12:00:00.123456Z",` +
	`"event_data":{"sandbox_metadata":{"project":"p1","n":3},"kill_reason":"timeout","execution":{"started_at":"2026-08-01T11:00:00Z","vcpu_count":2,"memory_mb":512,"execution_time":3600000}},` +
	`"sandbox_id":"iabc","sandbox_execution_id":"ex1","sandbox_template_id":"base","sandbox_build_id":"b1","sandbox_team_id":"team1"}`

func TestParseWebhook(t *testing.T) {
	t.Parallel()
	ev, err := ParseWebhook([]byte(webhookBody))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 8, 1, 12, 0, 0, 123456000, time.UTC)
	if ev.ID != "9f4a1b2c-0000-4000-8000-000000000001" || ev.Type != EventKilled || ev.SandboxID != "iabc" ||
		!ev.Timestamp.Equal(want) || ev.KillReason != KillReasonTimeout || ev.Version != "v2" ||
		ev.ExecutionID != "ex1" || ev.TemplateID != "base" || ev.BuildID != "b1" || ev.TeamID != "team1" {
		t.Errorf("event = %+v", ev)
	}
	if ev.Metadata["project"] != "p1" || ev.Metadata["n"] != "3" {
		t.Errorf("metadata = %v", ev.Metadata)
	}
	if len(ev.Data) == 0 {
		t.Error("raw data dropped")
	}
}

func TestParseWebhookRejects(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"not JSON":          `nope`,
		"array":             `[]`,
		"camelCase payload": `{"id":"e1","type":"sandbox.lifecycle.paused","sandboxId":"iabc","timestamp":"2026-08-01T12:00:00Z"}`,
		"no id":             `{"type":"sandbox.lifecycle.paused","sandbox_id":"iabc","timestamp":"2026-08-01T12:00:00Z"}`,
		"no type":           `{"id":"e1","sandbox_id":"iabc","timestamp":"2026-08-01T12:00:00Z"}`,
		"bad timestamp":     `{"id":"e1","type":"sandbox.lifecycle.paused","sandbox_id":"iabc","timestamp":"yesterday"}`,
		"data not object":   `{"id":"e1","type":"sandbox.lifecycle.paused","sandbox_id":"iabc","timestamp":"2026-08-01T12:00:00Z","event_data":[1]}`,
	} {
		if _, err := ParseWebhook([]byte(body)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseEventVariants(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		raw  string
		want Event
	}{
		{"documented camelCase", `{"version":"v2","id":"e1","type":"sandbox.lifecycle.updated","eventData":{"set_timeout":"2026-08-01T13:00:00Z","sandbox_metadata":{"project":"p1"}},"sandboxId":"iabc","sandboxTeamId":"t","timestamp":"2026-08-01T12:00:00Z"}`,
			Event{ID: "e1", Type: EventUpdated, SandboxID: "iabc", TeamID: "t", SetTimeout: time.Date(2026, 8, 1, 13, 0, 0, 0, time.UTC), Metadata: map[string]string{"project": "p1"}}},
		{"snake_case fallback", `{"id":"e2","type":"sandbox.lifecycle.paused","event_data":null,"sandbox_id":"iabc","timestamp":"2026-08-01T12:00:00Z"}`,
			Event{ID: "e2", Type: EventPaused, SandboxID: "iabc"}},
		{"legacy v1 label", `{"version":"v1","id":"e3","eventCategory":"lifecycle","eventLabel":"kill","eventData":null,"sandboxId":"iabc","timestamp":"2026-08-01T12:00:00+02:00"}`,
			Event{ID: "e3", Type: EventKilled, SandboxID: "iabc", KillReason: KillReasonUnknown}},
		{"camelCase data keys", `{"id":"e4","type":"sandbox.lifecycle.killed","eventData":{"killReason":"request","sandboxMetadata":{"a":"b"}},"sandboxId":"iabc","timestamp":"2026-08-01T12:00:00Z"}`,
			Event{ID: "e4", Type: EventKilled, SandboxID: "iabc", KillReason: KillReasonRequest, Metadata: map[string]string{"a": "b"}}},
		{"unknown type kept", `{"id":"e5","type":"sandbox.lifecycle.snoozed","sandboxId":"iabc","timestamp":"2026-08-01T12:00:00Z"}`,
			Event{ID: "e5", Type: "sandbox.lifecycle.snoozed", SandboxID: "iabc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ev, err := ParseEvent([]byte(tt.raw))
			if err != nil {
				t.Fatal(err)
			}
			if ev.ID != tt.want.ID || ev.Type != tt.want.Type || ev.SandboxID != tt.want.SandboxID ||
				ev.KillReason != tt.want.KillReason || !ev.SetTimeout.Equal(tt.want.SetTimeout) ||
				fmt.Sprint(ev.Metadata) != fmt.Sprint(tt.want.Metadata) || (tt.want.TeamID != "" && ev.TeamID != tt.want.TeamID) {
				t.Errorf("got %+v\nwant %+v", ev, tt.want)
			}
			if ev.Timestamp.IsZero() {
				t.Error("no timestamp")
			}
		})
	}
}

func TestParseEventsSkipsBadItems(t *testing.T) {
	t.Parallel()
	evs, skipped, err := ParseEvents([]byte(`[{"id":"e1","type":"sandbox.lifecycle.created","sandboxId":"i1","timestamp":"2026-08-01T12:00:00Z"}, {"id":"bad"}, 7]`))
	if err != nil || len(evs) != 1 || skipped != 2 {
		t.Fatalf("ParseEvents = %v, %d, %v", evs, skipped, err)
	}
	if _, _, err := ParseEvents([]byte(`{"events":[]}`)); err == nil {
		t.Error("a non-array answer must be an error")
	}
}

func sign(secret string, body []byte, enc *base64.Encoding) string {
	sum := sha256.Sum256(append([]byte(secret), body...))
	return enc.EncodeToString(sum[:])
}

func TestVerifyWebhookSignature(t *testing.T) {
	t.Parallel()
	body := []byte(webhookBody)
	const secret = "s3cret"
	tests := []struct {
		name   string
		secret string
		body   []byte
		sig    string
		want   bool
	}{
		{"standard, unpadded (what the service sends)", secret, body, sign(secret, body, base64.RawStdEncoding), true},
		{"standard, padded", secret, body, sign(secret, body, base64.StdEncoding), true},
		{"URL-safe, unpadded (what the docs say)", secret, body, sign(secret, body, base64.RawURLEncoding), true},
		{"URL-safe, padded", secret, body, sign(secret, body, base64.URLEncoding), true},
		{"surrounding spaces", secret, body, " " + sign(secret, body, base64.RawStdEncoding) + " ", true},
		{"wrong secret", "other", body, sign(secret, body, base64.RawStdEncoding), false},
		{"changed body", secret, append([]byte(nil), append(body, ' ')...), sign(secret, body, base64.RawStdEncoding), false},
		{"one character changed", secret, body, "x" + sign(secret, body, base64.RawStdEncoding)[1:], false},
		{"empty header", secret, body, "", false},
		{"empty secret never verifies", "", body, sign("", body, base64.RawStdEncoding), false},
		{"truncated", secret, body, sign(secret, body, base64.RawStdEncoding)[:20], false},
	}
	for _, tt := range tests {
		if got := VerifyWebhookSignature(tt.secret, tt.body, tt.sig); got != tt.want {
			t.Errorf("%s: got %v", tt.name, got)
		}
	}
}

func TestCatchUpEvents(t *testing.T) {
	t.Parallel()
	// 250 events, one per second, newest first; a new event arrives between the first and
	// second page, shifting offsets by one.
	base := time.Date(2026, 8, 1, 12, 0, 0, 0, time.UTC)
	events := make([]string, 0, 251)
	for i := 249; i >= 0; i-- {
		events = append(events, fmt.Sprintf(`{"id":"e%03d","type":"sandbox.lifecycle.updated","sandboxId":"i1","timestamp":%q}`, i, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339)))
	}
	calls := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if r.URL.Path != "/events/sandboxes" || r.URL.Query().Get("orderAsc") != "false" || r.URL.Query().Get("limit") != "100" {
			t.Errorf("request %s", r.URL)
		}
		if calls == 2 {
			events = append([]string{fmt.Sprintf(`{"id":"e250","type":"sandbox.lifecycle.paused","sandboxId":"i1","timestamp":%q}`, base.Add(250*time.Second).Format(time.RFC3339))}, events...)
		}
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		end := min(off+100, len(events))
		page := "["
		for i := off; i < end; i++ {
			if i > off {
				page += ","
			}
			page += events[i]
		}
		_, _ = w.Write([]byte(page + "]"))
	})
	c, _ := newFakeClient(t, h)
	since := base.Add(50 * time.Second)
	got, complete, err := c.CatchUpEvents(t.Context(), since, 10)
	if err != nil || !complete {
		t.Fatalf("CatchUpEvents: complete=%v err=%v", complete, err)
	}
	// e050..e249 for sure; e250 arrived after page 1 was read, so it may be missed now and is
	// picked up next time. No duplicates, none older than since, ascending order.
	if len(got) != 200 {
		t.Fatalf("got %d events, want 200 (e050..e249)", len(got))
	}
	for i, ev := range got {
		if want := fmt.Sprintf("e%03d", 50+i); ev.ID != want {
			t.Fatalf("event %d = %s, want %s", i, ev.ID, want)
		}
	}
	// A page budget that cannot reach back reports incompleteness.
	calls = 0
	if _, complete, err := c.CatchUpEvents(t.Context(), base, 1); err != nil || complete {
		t.Errorf("one page for 251 events: complete=%v err=%v", complete, err)
	}
}
