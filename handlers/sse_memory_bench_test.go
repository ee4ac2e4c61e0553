package handlers_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// BENCHMARKS.md, issue 19: "SSE memory per idle founder stream through the whole app (log-in
// session, middleware, hub), 10,000 streams: ≤ 16 KiB per stream, 10,000 in ≤ 200 MiB RSS
// including the process's base". 1,000 founders signed up and logged in hold ten streams each
// on GET /events, opened from client processes (testkit.StartSSEClients) with each founder's
// session cookie, so each stream passes the session, the middleware, the operator check and the
// hub as a browser's does. Beside it, in the same run and process, its floor: a bare net/http
// SSE server holding as many streams. Under -short 20 founders hold 4 streams each.
func BenchmarkSSEAppMemory(b *testing.B) {
	founders, tabs := testkit.BenchSize(1000, 20), testkit.BenchSize(10, 4)
	testkit.Needs(b, testkit.RaiseFileLimit(uint64(founders*tabs+2000)), "%d open files", founders*tabs+2000)
	// The founders sign up from one address: its hourly limit would stop them.
	s := start(b, apptest.Options{Role: app.RoleWeb, Config: func(c *app.Config) { c.SignUpsPerHour = founders }})
	base, err := url.Parse(s.URL())
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([]testkit.SSERequest, 0, founders*tabs)
	for i := range founders {
		c := s.NewClient(b)
		c.SignUp(fmt.Sprintf("stream-%d@example.com", i))
		var cookies []string
		for _, ck := range c.HTTP().Jar.Cookies(base) {
			cookies = append(cookies, ck.Name+"="+ck.Value)
		}
		for range tabs {
			reqs = append(reqs, testkit.SSERequest{Path: "/events", Header: "Cookie: " + strings.Join(cookies, "; ")})
		}
	}
	for range b.N {
		// A founder with no project gets no first event: a stream is ready once answered 200,
		// and idle once the hub holds it and has sent its snapshot (10,000 snapshots at once
		// wait their turn for the database's connections).
		app := testkit.MeasureStreams(b, reqs, "", func() testkit.StreamServer {
			return testkit.StreamServer{Addr: base.Host,
				Held: func() {
					testkit.Until(b, time.Minute, "every stream in the hub, its snapshot sent", func() bool {
						return s.Hub().Clients() == len(reqs) && !testkit.GoroutinesIn("sandman/live.(*Hub).onSubscribe")
					})
				},
				Stop: func() {
					testkit.Until(b, time.Minute, "every stream gone", func() bool { return s.Hub().Clients() == 0 })
				}}
		})
		floor := testkit.MeasureStreams(b, reqs, "1", func() testkit.StreamServer {
			srv := testkit.NewBareSSEServer("1")
			return testkit.StreamServer{Addr: srv.Listener.Addr().String(), Stop: srv.Close}
		})
		b.ReportMetric(app.KiB, "KiB/stream")
		b.ReportMetric(app.RSS, "rss-MiB")
		b.ReportMetric(app.Goroutines, "goroutines/stream")
		b.ReportMetric(app.StackKiB, "stack-KiB/stream")
		b.ReportMetric(app.HeapKiB, "heap-KiB/stream")
		b.ReportMetric(app.HeapFreeKiB, "heap-free-KiB/stream")
		b.ReportMetric(floor.KiB, "floor-KiB/stream")
		b.ReportMetric(app.KiB/floor.KiB, "KiB/floor-KiB")
	}
}

// TestSSEClientProcess is the client side of the SSE benchmarks (testkit.StartSSEClients); it
// does nothing in a normal run.
func TestSSEClientProcess(t *testing.T) { testkit.RunSSEClientProcess(t) }
