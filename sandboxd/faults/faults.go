// Package faults is sandboxd's fault injection for resilience tests: the
// misbehaviours of the provider a test can ask for (failing or slow API
// calls, lost or late webhooks, files damaged across a pause) and the set of
// those in force. A sandboxd takes faults only when its Config.FaultInjection
// is set; a production one has no Set and no admin routes to add one
// (docs/sandboxd.md, "Fault injection").
package faults

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// File damage kinds (Fault.Damage).
const (
	// DamageDelete deletes each path (a directory with everything in it).
	DamageDelete = "delete"
	// DamageCorrupt rewrites each file with every byte inverted: the same
	// size, other bytes.
	DamageCorrupt = "corrupt"
)

// Webhook fault kinds.
const (
	// WebhookDrop loses a delivery for good: no attempt, no retry. The event
	// stays readable through the events API.
	WebhookDrop = "drop"
	// WebhookDelay holds a delivery LatencyMs before sending it.
	WebhookDelay = "delay"
)

// Fault is one injected misbehaviour for resilience tests. It is the JSON
// body of the admin endpoint, which takes the same X-API-Key as the API:
//
//	POST   /_sandboxd/faults                          add a Fault → 201 {"id": "..."}
//	GET    /_sandboxd/faults                          active faults → 200 [{"id", "remaining", ...Fault}]
//	DELETE /_sandboxd/faults                          clear all → 204
//	DELETE /_sandboxd/faults/{faultID}                clear one → 204 (404 if unknown)
//	POST   /_sandboxd/sandboxes/{sandboxID}/kill      "killed from the dashboard" → 204 (404 if unknown);
//	                                                  optional body {"reason": "request"} sets kill_reason
//	POST   /_sandboxd/sandboxes/{sandboxID}/lose      "lost by the provider": gone with no event and no
//	                                                  webhook (E2B#1381) → 204 (404 if unknown)
//	GET    /_sandboxd/isolation                       the isolation and limits in force → 200 IsolationReport
//
// A route fault, for example
//
//	{"route": "POST /sandboxes/{sandboxID}/pause", "status": 500, "count": 2}
//	{"route": "*", "status": 429, "retryAfterSeconds": 1, "count": 1}
//	{"route": "GET /v2/sandboxes", "latencyMs": 3000, "count": 1}
//
// applies to API calls after authentication: it waits LatencyMs, then, if
// Status is set, answers Status with the provider's error body
// {"code": Status, "message": Message} instead of doing the call. A webhook
// fault, for example
//
//	{"webhook": "drop", "count": 3}
//	{"webhook": "delay", "latencyMs": 2000, "count": 1}
//
// applies to the next webhook delivery attempts. A files fault, for example
//
//	{"sandboxID": "i…", "files": ["app/index.html", "app/lib/x.js"], "damage": "delete", "count": 1}
//	{"files": ["/home/user/app/data.json"], "damage": "corrupt", "count": 1}
//
// damages files as the provider's users still see it happen across a pause
// (E2B#884, E2B#1104): at the next resume of a paused sandbox (SandboxID's,
// when set), once it runs again and before the resume answers, each path is
// deleted or corrupted inside the sandbox. Every files fault that matches a
// resume applies to it. A path that is not there is skipped (and logged).
type Fault struct {
	// Route selects API calls by method and route as sandboxd registers them
	// (the provider's routes, docs/provider.md; the wildcard's name does not matter, so
	// "DELETE /sandboxes/{id}" works). A route without a method matches every
	// method; "*" matches every API route. /health and /_sandboxd are never
	// affected.
	Route string `json:"route,omitempty"`
	// SandboxID limits a route fault to calls naming that sandbox.
	SandboxID string `json:"sandboxID,omitempty"`
	// Status is the HTTP status to answer with (400..599).
	Status int `json:"status,omitempty"`
	// Message is the error body's message (default "injected fault").
	Message string `json:"message,omitempty"`
	// RetryAfterSeconds adds a Retry-After header (useful with 429 and 503).
	RetryAfterSeconds int `json:"retryAfterSeconds,omitempty"`
	// LatencyMs delays the call or the delivery.
	LatencyMs int `json:"latencyMs,omitempty"`
	// Webhook is WebhookDrop or WebhookDelay; it makes this a webhook fault.
	Webhook string `json:"webhook,omitempty"`
	// Files makes this a files fault: the sandbox paths (absolute, or
	// relative to /home/user) damaged at a resume, as Damage says.
	Files []string `json:"files,omitempty"`
	// Damage is DamageDelete or DamageCorrupt.
	Damage string `json:"damage,omitempty"`
	// Count is how many calls or deliveries the fault affects; 0 means all of
	// them until it is cleared.
	Count int `json:"count,omitempty"`
}

// Validate checks f before it is added; validFile says whether a sandbox
// path may be damaged.
func (f *Fault) Validate(validFile func(string) bool) error {
	kinds := 0
	for _, set := range []bool{f.Route != "", f.Webhook != "", len(f.Files) > 0} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds != 1:
		return errors.New("a fault needs exactly one of route, webhook and files")
	case len(f.Files) > 0 && f.Damage != DamageDelete && f.Damage != DamageCorrupt:
		return fmt.Errorf("damage must be %q or %q", DamageDelete, DamageCorrupt)
	case len(f.Files) == 0 && f.Damage != "":
		return errors.New("damage needs files")
	case f.Webhook != "" && f.Webhook != WebhookDrop && f.Webhook != WebhookDelay:
		return fmt.Errorf("webhook must be %q or %q", WebhookDrop, WebhookDelay)
	case f.Webhook == WebhookDelay && f.LatencyMs <= 0:
		return errors.New("a delay needs latencyMs")
	case f.Route != "" && f.Status == 0 && f.LatencyMs <= 0:
		return errors.New("a route fault needs status or latencyMs")
	case f.Status != 0 && (f.Status < 400 || f.Status > 599):
		return errors.New("status must be 400..599")
	case slices.ContainsFunc(f.Files, func(p string) bool { return !validFile(p) }):
		return errors.New("files must be under /home/user or /tmp, and not those directories themselves")
	case f.Count < 0 || f.LatencyMs < 0 || f.RetryAfterSeconds < 0:
		return errors.New("count, latencyMs and retryAfterSeconds cannot be negative")
	}
	return nil
}

// Active is a fault in force, as the admin endpoint lists it.
type Active struct {
	ID        string `json:"id"`
	Remaining int    `json:"remaining"` // -1: unlimited
	Fault
	route string
}

// Set holds the faults in force. A nil Set takes none: every query finds
// nothing.
type Set struct {
	mu     sync.Mutex
	faults []*Active
}

var wildcardName = regexp.MustCompile(`\{[^}]*\}`)

// normalizeRoute makes route patterns comparable: wildcard names dropped,
// one space after the method.
func normalizeRoute(route string) string {
	route = wildcardName.ReplaceAllString(strings.TrimSpace(route), "{}")
	if method, path, ok := strings.Cut(route, " "); ok {
		return method + " " + strings.TrimSpace(path)
	}
	return route
}

// Add puts f in force under id.
func (fs *Set) Add(f Fault, id string) *Active {
	a := &Active{ID: id, Fault: f, Remaining: f.Count, route: normalizeRoute(f.Route)}
	if f.Count == 0 {
		a.Remaining = -1
	}
	if a.Message == "" {
		a.Message = "injected fault"
	}
	fs.mu.Lock()
	fs.faults = append(fs.faults, a)
	fs.mu.Unlock()
	return a
}

// List returns the faults in force.
func (fs *Set) List() []Active {
	if fs == nil {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make([]Active, 0, len(fs.faults))
	for _, f := range fs.faults {
		out = append(out, *f)
	}
	return out
}

// Clear ends fault id, or every fault when id is empty; false when id is
// not in force.
func (fs *Set) Clear(id string) bool {
	if fs == nil {
		return false
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if id == "" {
		fs.faults = nil
		return true
	}
	for i, f := range fs.faults {
		if f.ID == id {
			fs.faults = append(fs.faults[:i], fs.faults[i+1:]...)
			return true
		}
	}
	return false
}

// takeLocked consumes one use of fs.faults[i].
func (fs *Set) takeLocked(i int) Fault {
	f := fs.faults[i]
	if f.Remaining > 0 {
		f.Remaining--
		if f.Remaining == 0 {
			fs.faults = append(fs.faults[:i], fs.faults[i+1:]...)
		}
	}
	return f.Fault
}

// Route returns the first fault matching an API call, consuming one use.
func (fs *Set) Route(pattern, sandboxID string) *Fault {
	if fs == nil {
		return nil
	}
	norm := normalizeRoute(pattern)
	_, path, _ := strings.Cut(norm, " ")
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, f := range fs.faults {
		if f.route == "" || f.SandboxID != "" && f.SandboxID != sandboxID {
			continue
		}
		if f.route == "*" || f.route == norm || f.route == path {
			taken := fs.takeLocked(i)
			return &taken
		}
	}
	return nil
}

// Webhook returns the first webhook fault, consuming one use.
func (fs *Set) Webhook() *Fault {
	if fs == nil {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for i, f := range fs.faults {
		if f.Webhook != "" {
			taken := fs.takeLocked(i)
			return &taken
		}
	}
	return nil
}

// Files returns every files fault for a resume of sandboxID, consuming one
// use of each.
func (fs *Set) Files(sandboxID string) []Fault {
	if fs == nil {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []Fault
	for i := 0; i < len(fs.faults); i++ {
		if f := fs.faults[i]; len(f.Files) > 0 && (f.SandboxID == "" || f.SandboxID == sandboxID) {
			n := len(fs.faults)
			out = append(out, fs.takeLocked(i))
			if len(fs.faults) < n {
				i-- // used up and removed: the next fault is at i now
			}
		}
	}
	return out
}
