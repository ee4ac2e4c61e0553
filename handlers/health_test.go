package handlers_test

import (
	"net/http"
	"strings"
	"testing"

	"sandman/app/apptest"
)

func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	b := webOnly(t)
	c := b.NewClient(t)
	apptest.RequireStatus(t, c.Do(http.MethodGet, "/healthz", nil, nil), http.StatusOK)
	apptest.RequireStatus(t, c.Do(http.MethodGet, "/readyz", nil, nil), http.StatusOK)
	c.SignUp("metrics@example.com")
	var p struct{ ID string }
	apptest.RequireStatus(t, c.API(http.MethodPost, "/api/projects", map[string]string{"starter": "static"}, &p), http.StatusCreated)
	apptest.RequireStatus(t, c.Get("/projects/"+p.ID), http.StatusOK)
	apptest.RequireStatus(t, c.Get("/no/such/page/"+p.ID), http.StatusNotFound)

	m := c.Do(http.MethodGet, "/metrics", nil, nil)
	apptest.RequireStatus(t, m, http.StatusOK)
	apptest.RequireContains(t, m.Body, `sandman_http_request_duration_seconds_count{method="GET",route="/projects/:id",status="200"} 1`)
	// Series are per route pattern: no id and no unknown path may become a label.
	if strings.Contains(m.Body, p.ID) || strings.Contains(m.Body, "/no/such") {
		t.Fatalf("a path leaked into the metrics:\n%s", m.Body)
	}
}
