package handlers_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
)

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	const token = "s3cret-metrics-token"
	b := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.MetricsToken = token }})
	c := b.NewClient(t)
	apptest.RequireStatus(t, c.Do(http.MethodGet, "/healthz", nil, nil), http.StatusOK)
	apptest.RequireStatus(t, c.Do(http.MethodGet, "/readyz", nil, nil), http.StatusOK)
	c.SignUp("metrics@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "static"}, &p), http.StatusCreated)
	apptest.RequireStatus(t, c.Get("/projects/"+p.ID), http.StatusOK)
	apptest.RequireStatus(t, c.Get("/no/such/page/"+p.ID), http.StatusNotFound)

	// On the main address, metrics need the bearer token.
	for _, auth := range []string{"", "Bearer wrong", token, "Basic " + token} {
		r := c.Do(http.MethodGet, "/metrics", nil, map[string]string{"Authorization": auth})
		apptest.RequireStatus(t, r, http.StatusUnauthorized)
		apptest.RequireContains(t, r.Body, "SANDMAN_METRICS_TOKEN")
	}
	m := c.Do(http.MethodGet, "/metrics", nil, map[string]string{"Authorization": "Bearer " + token})
	apptest.RequireStatus(t, m, http.StatusOK)
	apptest.RequireContains(t, m.Body, `sandman_http_request_duration_seconds_count{method="GET",route="/projects/:id",status="200"} 1`)
	// Series are per route pattern: no id and no unknown path may become a label.
	if strings.Contains(m.Body, p.ID) || strings.Contains(m.Body, "/no/such") {
		t.Fatalf("a path leaked into the metrics:\n%s", m.Body)
	}
	testkit.Record(t, testkit.Scenario{ID: "metrics-token", Times: 4,
		Injected: "GET /metrics on the main address with SANDMAN_METRICS_TOKEN set: no token, a wrong one, the token without \"Bearer\", Basic",
		Result:   "401 naming SANDMAN_METRICS_TOKEN each time; the bearer token gets the metrics"})
}

// Metrics are never public by default: with an address of their own they are served there and
// not on the main address, and with neither an address nor a token, not at all.
func TestMetricsAreNotPublic(t *testing.T) {
	t.Parallel()
	notServed := func(b *stack) {
		t.Helper()
		c := b.NewClient(t)
		c.SignUp("operator@example.com") // logged in: an unknown page is a 404, not the log-in page
		r := c.Do(http.MethodGet, "/metrics", nil, nil)
		apptest.RequireStatus(t, r, http.StatusNotFound)
		if strings.Contains(r.Body, "go_goroutines") {
			t.Fatal("metrics served on the main address")
		}
	}
	own := start(t, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.MetricsAddr = "127.0.0.1:0" }})
	notServed(own)
	res, err := http.Get(own.MetricsURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "sandman_sse_clients") {
		t.Fatalf("metrics address answered %d: %.300s", res.StatusCode, body)
	}

	neither := webOnly(t)
	notServed(neither)
	if neither.MetricsURL() != "" {
		t.Fatal("a metrics listener without SANDMAN_METRICS_ADDR")
	}
	testkit.Record(t, testkit.Scenario{ID: "metrics-not-public", Times: 2,
		Injected: "GET /metrics on the main address with SANDMAN_METRICS_ADDR set, then with neither it nor a token",
		Result:   "not served there (404); served on the metrics address"})
}
