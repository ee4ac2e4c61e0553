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
// may make Sandman fail (5xx), and every body reaches its route: it is never refused for the
// session or the token the test holds (so an input that logs out, or signs someone in, cannot
// leave the rest refused at the door). The routes come from the table itself, so a new JSON
// route is fuzzed with the others, and every seed is sent to every route.
func FuzzJSONBodies(f *testing.F) {
	s := webOnly(f)
	c := s.NewClient(f)
	const email = "fuzz-json@example.com"
	c.SignUp(email)
	var p struct{ ID string }
	apptest.RequireStatus(f, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	var built struct {
		Build   struct{ ID string }
		Sandbox struct{ ID string }
	}
	apptest.RequireStatus(f, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "first"}, &built), http.StatusAccepted)
	var tok struct{ ID string }
	apptest.RequireStatus(f, c.API(http.MethodPost, "/api/tokens", map[string]string{"name": "fuzz"}, &tok), http.StatusCreated)
	in := ids{project: p.ID, sandbox: built.Sandbox.ID, build: built.Build.ID, apiToken: tok.ID}
	in.webhook, in.delivery = endpointWithDelivery(f, c)
	var jsonRoutes []route
	for _, r := range s.routes(f) {
		if r.stateChanging() && (strings.HasPrefix(r.pattern, "/api/") || r.pattern == "/webhooks/e2b") {
			jsonRoutes = append(jsonRoutes, r)
		}
	}
	for i := range jsonRoutes {
		for _, seed := range []string{
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
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		r := jsonRoutes[int(which)%len(jsonRoutes)]
		client, token := c.For(t), c.CSRF()
		switch r.String() {
		case "POST /api/users", "POST /api/session":
			// They sign someone in: a client of their own, without a session.
			client, token = s.NewClient(t), ""
		case "DELETE /api/session":
			// It signs out: a session of its own, signed in for this input.
			client = s.NewClient(t)
			var out struct{ CSRFToken string }
			apptest.RequireStatus(t, client.API(http.MethodPost, "/api/session", map[string]string{"email": email, "password": apptest.Password}, &out), http.StatusOK)
			token = out.CSRFToken
		}
		h := map[string]string{"Content-Type": "application/json", "X-CSRF-Token": token}
		if r.pattern == "/webhooks/e2b" {
			h["e2b-signature"] = sign(apptest.WebhookSecret, body)
		}
		res := client.Do(r.method, r.path(t, in), bytes.NewReader(body), h)
		if res.Status >= 500 {
			t.Fatalf("%s with %q: %d %s", r, body, res.Status, res.Body)
		}
		// (Log-in's 401 is its answer to wrong credentials, not a refusal at the door.)
		if res.Status == http.StatusUnauthorized && r.String() != "POST /api/session" || strings.Contains(res.Body, "Reload the page") {
			t.Fatalf("%s with %q was refused at the door (%d %.200s): the fuzzer's session or token no longer works", r, body, res.Status, res.Body)
		}
	})
}
