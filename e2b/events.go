package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Lifecycle event types (docs/provider.md, "Lifecycle events").
const (
	EventCreated      = "sandbox.lifecycle.created"
	EventResumed      = "sandbox.lifecycle.resumed"
	EventUpdated      = "sandbox.lifecycle.updated"
	EventPaused       = "sandbox.lifecycle.paused"
	EventKilled       = "sandbox.lifecycle.killed"
	EventCheckpointed = "sandbox.lifecycle.checkpointed"
)

// AllEventTypes lists every lifecycle event type a webhook can subscribe to.
var AllEventTypes = []string{EventCreated, EventResumed, EventUpdated, EventPaused, EventKilled, EventCheckpointed}

// Kill reasons the provider reports on EventKilled (others exist; anything but timeout and
// request means "killed").
const (
	KillReasonRequest = "request"
	KillReasonTimeout = "timeout"
	KillReasonUnknown = "unknown"
)

// Event is one sandbox lifecycle event, from a webhook delivery or the events API.
type Event struct {
	ID        string
	Type      string
	Version   string
	SandboxID string
	// Timestamp is the provider's time of the event: apply events in this order.
	Timestamp time.Time
	// KillReason is set on EventKilled ("unknown" when the provider gave none).
	KillReason string
	// SetTimeout is the new end time on an EventUpdated that changed it.
	SetTimeout time.Time
	// Metadata is the sandbox's metadata, when it has any.
	Metadata    map[string]string
	TemplateID  string
	BuildID     string
	ExecutionID string
	TeamID      string
	// Data is the event data exactly as sent, for anything not lifted into fields.
	Data json.RawMessage
}

// eventFields is the shape both wire forms convert into. webhookJSON and apiEventJSON must
// keep its field order and types: they are converted to it, only their tags differ.
type eventFields struct {
	ID, Version, Type, Timestamp                        string
	Category, Label                                     string
	Data                                                json.RawMessage
	SandboxID, ExecutionID, TemplateID, BuildID, TeamID string
}

// webhookJSON is the webhook payload: the infra SandboxEvent in snake_case (E2B#1103).
type webhookJSON struct {
	ID          string          `json:"id"`
	Version     string          `json:"version"`
	Type        string          `json:"type"`
	Timestamp   string          `json:"timestamp"`
	Category    string          `json:"event_category"`
	Label       string          `json:"event_label"`
	Data        json.RawMessage `json:"event_data"`
	SandboxID   string          `json:"sandbox_id"`
	ExecutionID string          `json:"sandbox_execution_id"`
	TemplateID  string          `json:"sandbox_template_id"`
	BuildID     string          `json:"sandbox_build_id"`
	TeamID      string          `json:"sandbox_team_id"`
}

// apiEventJSON is an events API item, documented in camelCase.
type apiEventJSON struct {
	ID          string          `json:"id"`
	Version     string          `json:"version"`
	Type        string          `json:"type"`
	Timestamp   string          `json:"timestamp"`
	Category    string          `json:"eventCategory"`
	Label       string          `json:"eventLabel"`
	Data        json.RawMessage `json:"eventData"`
	SandboxID   string          `json:"sandboxId"`
	ExecutionID string          `json:"sandboxExecutionId"`
	TemplateID  string          `json:"sandboxTemplateId"`
	BuildID     string          `json:"sandboxBuildId"`
	TeamID      string          `json:"sandboxTeamId"`
}

// ParseWebhook parses a webhook delivery body. Verify its signature first.
func ParseWebhook(body []byte) (Event, error) {
	var w webhookJSON
	if err := json.Unmarshal(body, &w); err != nil {
		return Event{}, fmt.Errorf("e2b webhook: %w", err)
	}
	return eventFields(w).event()
}

// ParseEvent parses one events API item. The API is documented in camelCase but that is
// unconfirmed for today's server, so snake_case keys are taken where camelCase ones are absent.
func ParseEvent(raw []byte) (Event, error) {
	var a apiEventJSON
	if err := json.Unmarshal(raw, &a); err != nil {
		return Event{}, fmt.Errorf("e2b event: %w", err)
	}
	var w webhookJSON
	_ = json.Unmarshal(raw, &w) // cannot fail where the first decode succeeded
	f, s := eventFields(a), eventFields(w)
	for _, p := range []struct{ dst, alt *string }{
		{&f.Category, &s.Category}, {&f.Label, &s.Label}, {&f.SandboxID, &s.SandboxID},
		{&f.ExecutionID, &s.ExecutionID}, {&f.TemplateID, &s.TemplateID}, {&f.BuildID, &s.BuildID}, {&f.TeamID, &s.TeamID},
	} {
		if *p.dst == "" {
			*p.dst = *p.alt
		}
	}
	if isJSONNullOrEmpty(f.Data) {
		f.Data = s.Data
	}
	return f.event()
}

// ParseEvents parses an events API answer, a JSON array. Items that are not valid events are
// skipped and counted, so one bad item cannot stall a catch-up reader.
func ParseEvents(body []byte) (events []Event, skipped int, err error) {
	var items []json.RawMessage
	if err := json.Unmarshal(body, &items); err != nil {
		return nil, 0, fmt.Errorf("e2b events: %w", err)
	}
	events = make([]Event, 0, len(items))
	for _, raw := range items {
		ev, err := ParseEvent(raw)
		if err != nil {
			skipped++
			continue
		}
		events = append(events, ev)
	}
	return events, skipped, nil
}

// legacyTypes maps v1 event labels to v2 types.
var legacyTypes = map[string]string{
	"create": EventCreated, "resume": EventResumed, "update": EventUpdated,
	"pause": EventPaused, "kill": EventKilled,
}

func (f eventFields) event() (Event, error) {
	ev := Event{ID: f.ID, Type: f.Type, Version: f.Version, SandboxID: f.SandboxID, TemplateID: f.TemplateID,
		BuildID: f.BuildID, ExecutionID: f.ExecutionID, TeamID: f.TeamID}
	if ev.Type == "" && f.Category == "lifecycle" {
		ev.Type = legacyTypes[f.Label]
	}
	var problems []string
	if ev.ID == "" {
		problems = append(problems, "no id")
	}
	if ev.Type == "" {
		problems = append(problems, "no type")
	}
	if ev.SandboxID == "" {
		problems = append(problems, "no sandbox id")
	}
	ts, err := time.Parse(time.RFC3339Nano, f.Timestamp)
	if err != nil {
		problems = append(problems, fmt.Sprintf("bad timestamp %q", f.Timestamp))
	}
	ev.Timestamp = ts
	if len(problems) > 0 {
		return Event{}, fmt.Errorf("e2b event: %s", strings.Join(problems, ", "))
	}
	if !isJSONNullOrEmpty(f.Data) {
		ev.Data = append(json.RawMessage(nil), f.Data...)
		var data map[string]json.RawMessage
		if err := json.Unmarshal(f.Data, &data); err != nil {
			return Event{}, fmt.Errorf("e2b event: event data is not an object: %w", err)
		}
		ev.Metadata = stringMap(pick(data, "sandbox_metadata", "sandboxMetadata"))
		ev.KillReason = stringValue(pick(data, "kill_reason", "killReason"))
		if t, err := time.Parse(time.RFC3339Nano, stringValue(pick(data, "set_timeout", "setTimeout"))); err == nil {
			ev.SetTimeout = t
		}
	}
	if ev.Type == EventKilled && ev.KillReason == "" {
		ev.KillReason = KillReasonUnknown
	}
	return ev, nil
}

func isJSONNullOrEmpty(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

func pick(m map[string]json.RawMessage, keys ...string) json.RawMessage {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return nil
}

func stringValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// stringMap decodes a JSON object of strings; other values are kept as their JSON text,
// because metadata is informational and must not fail the whole event.
func stringMap(raw json.RawMessage) map[string]string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		var s string
		if json.Unmarshal(v, &s) == nil {
			out[k] = s
		} else {
			out[k] = string(v)
		}
	}
	return out
}

// EventsParams selects events from the events API.
type EventsParams struct {
	// SandboxID limits to one sandbox; empty means all of the team's.
	SandboxID string
	// Offset skips that many events in the chosen order.
	Offset int
	// Limit is 1..100; 0 means 100 (the provider's own default is 10).
	Limit int
	// OrderAsc lists oldest first; the default is newest first.
	OrderAsc bool
	// Types keeps events of any of these types; empty means all.
	Types []string
}

// ListEvents reads one page of lifecycle events. Items that do not parse are skipped.
func (c *Client) ListEvents(ctx context.Context, p EventsParams) ([]Event, error) {
	evs, _, err := c.listEvents(ctx, p)
	return evs, err
}

func (c *Client) listEvents(ctx context.Context, p EventsParams) (events []Event, items int, err error) {
	if p.Offset < 0 || p.Limit < 0 || p.Limit > 100 {
		return nil, 0, fmt.Errorf("e2b events: %w: offset must be ≥ 0 and limit 0..100", ErrInvalid)
	}
	limit := p.Limit
	if limit == 0 {
		limit = 100
	}
	q := url.Values{}
	q.Set("offset", strconv.Itoa(p.Offset))
	q.Set("limit", strconv.Itoa(limit))
	q.Set("orderAsc", strconv.FormatBool(p.OrderAsc))
	for _, t := range p.Types {
		q.Add("types", t)
	}
	path := "/events/sandboxes"
	if p.SandboxID != "" {
		sp, err := sandboxPath(p.SandboxID, "")
		if err != nil {
			return nil, 0, err
		}
		path = "/events" + sp
	}
	resp, err := c.do(ctx, &request{op: "events", method: http.MethodGet, url: c.apiURL(path, q), api: true, idempotent: true})
	if err != nil {
		return nil, 0, err
	}
	events, skipped, err := ParseEvents(resp.body)
	if err != nil {
		return nil, 0, err
	}
	if skipped > 0 {
		c.log.Warn("e2b events: skipped items that are not valid events", "skipped", skipped)
	}
	return events, len(events) + skipped, nil
}

// CatchUpEvents returns the team's events with a timestamp at or after since, oldest first,
// without duplicates. It pages newest-first: events arriving meanwhile shift later pages,
// which can show an event twice but never skip one. complete is false when maxPages pages
// (of 100) did not reach back to since; the caller should then reconcile by listing.
//
// Callers keep the newest timestamp they applied and pass it back minus a margin (events can
// become visible slightly out of order), de-duplicating by Event.ID as they must for webhooks
// anyway.
func (c *Client) CatchUpEvents(ctx context.Context, since time.Time, maxPages int) (events []Event, complete bool, err error) {
	if maxPages <= 0 {
		return nil, false, errors.New("e2b events: maxPages must be positive")
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	seen := map[string]bool{}
	for page := range maxPages {
		evs, items, err := c.listEvents(ctx, EventsParams{Offset: page * 100, Limit: 100})
		if err != nil {
			return nil, false, err
		}
		reachedOld := false
		for _, ev := range evs {
			if ev.Timestamp.Before(since) {
				reachedOld = true
				continue
			}
			if !seen[ev.ID] {
				seen[ev.ID] = true
				events = append(events, ev)
			}
		}
		if reachedOld || items < 100 {
			complete = true
			break
		}
	}
	slices.SortStableFunc(events, func(a, b Event) int {
		if c := a.Timestamp.Compare(b.Timestamp); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return events, complete, nil
}
