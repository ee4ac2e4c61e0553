package handlers_test

import (
	"net/http"
	"testing"
	"time"

	"sandman/accounts"
	"sandman/app"
	"sandman/app/apptest"
)

// What an API token costs a request against a browser's session: GET /api/sandboxes/{id} with
// each, one request at a time. A bearer request reads its token (and founder) and counts it
// against the token's limit, two statements; a session's loads its session and founder.
func BenchmarkAPIRequestByAuth(b *testing.B) {
	// No limit in the way: the benchmark makes thousands of requests a minute with one token.
	s := start(b, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.TokenLimit = accounts.Limit{N: 1 << 30, Window: time.Minute} }})
	c := s.NewClient(b)
	c.SignUp("bench-auth@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(b, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "counter"}, &p), http.StatusCreated)
	var res struct{ Sandbox struct{ ID string } }
	apptest.RequireStatus(b, c.API(http.MethodPost, "/api/projects/"+p.ID+"/builds", map[string]string{"idempotencyKey": "k"}, &res), http.StatusAccepted)
	path := "/api/sandboxes/" + res.Sandbox.ID
	for _, bb := range []struct {
		name   string
		client *apptest.Client
	}{{"session", c}, {"token", c.WithToken(c.MakeToken("bench"))}} {
		b.Run(bb.name, func(b *testing.B) {
			cl := bb.client.For(b)
			for b.Loop() {
				if r := cl.Do(http.MethodGet, path, nil, nil); r.Status != http.StatusOK {
					b.Fatalf("%s: %d %s", path, r.Status, r.Body)
				}
			}
		})
	}
}
