package handlers_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient(t)
	requireStatus(t, c.do(http.MethodGet, "/healthz", nil, nil), http.StatusOK)
	requireStatus(t, c.do(http.MethodGet, "/readyz", nil, nil), http.StatusOK)
	c.signUp("metrics@example.com")
	var p struct{ ID string }
	requireStatus(t, c.api(http.MethodPost, "/api/projects", map[string]string{"starter": "static"}, &p), http.StatusCreated)
	requireStatus(t, c.get("/projects/"+p.ID), http.StatusOK)
	requireStatus(t, c.get("/no/such/page/"+p.ID), http.StatusNotFound)

	m := c.do(http.MethodGet, "/metrics", nil, nil)
	requireStatus(t, m, http.StatusOK)
	requireContains(t, m.body, `sandman_http_request_duration_seconds_count{method="GET",route="/projects/:id",status="200"} 1`)
	// Series are per route pattern: no id and no unknown path may become a label.
	if strings.Contains(m.body, p.ID) || strings.Contains(m.body, "/no/such") {
		t.Fatalf("a path leaked into the metrics:\n%s", m.body)
	}
}
