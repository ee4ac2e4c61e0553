package handlers_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"sandman/app/apptest"
)

// FuzzJSONBodies sends every route of the route table that takes JSON (the API's and the
// provider's webhook, signed as the provider signs it) whatever body the fuzzer makes: no body
// may make Sandman fail (5xx). The routes come from the table itself, so a new JSON route is
// fuzzed with the others.
func FuzzJSONBodies(f *testing.F) {
	for i, seed := range []string{
		`{"email":"founder@example.com","password":"long enough"}`,
		`{"name":"My site","starter":"counter"}`,
		`{"idempotencyKey":"k-1"}`,
		`{"id":"e1","type":"sandbox.lifecycle.killed","sandbox_id":"i1","timestamp":"2026-01-01T00:00:00Z","event_data":{"kill_reason":"request"}}`,
		`{"id":"\u0000","type":"sandbox.lifecycle.paused","sandbox_id":"i1","timestamp":"not a time"}`,
		`{"idempotencyKey":"` + strings.Repeat("k", 300) + `"}`,
		`{"email":1,"password":null}`, `{"starter":"../../etc"}`, `[]`, `null`, `"x"`, `{}{}`, "\xff", "",
	} {
		f.Add(uint8(i), []byte(seed))
	}
	s := webOnly(f)
	c := s.NewClient(f)
	c.SignUp("fuzz-json@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(f, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	var built struct {
		Build   struct{ ID string }
		Sandbox struct{ ID string }
	}
	apptest.RequireStatus(f, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "first"}, &built), http.StatusAccepted)
	in := ids{project: p.ID, sandbox: built.Sandbox.ID, build: built.Build.ID}
	var jsonRoutes []route
	for _, r := range s.routes(f) {
		if r.stateChanging() && (strings.HasPrefix(r.pattern, "/api/") || r.pattern == "/webhooks/e2b") {
			jsonRoutes = append(jsonRoutes, r)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		r := jsonRoutes[int(which)%len(jsonRoutes)]
		h := map[string]string{"Content-Type": "application/json", "X-CSRF-Token": c.CSRF()}
		if r.pattern == "/webhooks/e2b" {
			h["e2b-signature"] = sign(apptest.WebhookSecret, body)
		}
		res := c.For(t).Do(r.method, r.path(t, in), bytes.NewReader(body), h)
		if res.Status >= 500 {
			t.Fatalf("%s with %q: %d %s", r, body, res.Status, res.Body)
		}
	})
}
