package handlers_test

import (
	"strings"
	"testing"
	"time"
)

// Design §7: "requests from an idle open dashboard: 0 per minute". A dashboard with a running
// preview sits open for a minute and a bit; every request it sends to Sandman is counted (the
// shared event stream lives in a worker and is not one of the page's requests).
func BenchmarkIdleDashboardRequests(b *testing.B) {
	s := newStack(b, stackOptions{webhooks: true})
	c := s.newClient(b)
	c.signUp("idle@example.com")
	projectID, _ := s.buildCounter(b, c)
	browser := newBrowser(b)
	dash := openTab(b, browser, s.srv.URL+"/login")
	logIn(b, dash, s.srv.URL, "idle@example.com")
	dash.waitFor(b, "the card running", statusIs("card", projectID, "running"))
	before := len(dash.requests())
	b.ResetTimer()
	for range b.N {
		time.Sleep(65 * time.Second)
	}
	b.StopTimer()
	var sent []string
	for _, r := range dash.requests()[before:] {
		if strings.Contains(r, s.srv.URL) {
			sent = append(sent, r)
		}
	}
	b.ReportMetric(float64(len(sent))/(65*float64(b.N)/60), "requests/min")
	if len(sent) > 0 {
		b.Logf("requests: %q", sent)
	}
}
