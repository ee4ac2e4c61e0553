package handlers_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// previewShownAt makes every page of the tab remember, in window.previewShownAt, when (in ms
// since its navigation started) the visitor's preview frame finished loading.
const previewShownAt = `window.previewShownAt = 0;
document.addEventListener("load", (ev) => {
	if (ev.target instanceof HTMLIFrameElement && ev.target.matches("[data-testid=share-frame]")) window.previewShownAt = performance.now();
}, true);`

// BENCHMARKS.md: "share link opened on a sleeping memory snapshot → preview visible", in
// Chromium. A visitor opens the link of a preview asleep on a memory snapshot: the page shows
// its holding page, its script wakes the preview, the link's stream says when it runs, and the
// page swaps the preview in. The time is from the start of the navigation to the load of the
// preview's frame, measured by the page's own clock. Between samples (not timed) the visitor
// leaves, the preview is paused again and the founder makes a new link. The page's own clock starts before Sandman is asked for
// the page, so the figure includes the whole of it: the page, its wake, the resume on sandboxd,
// the link's stream and the frame's first load. Its floor (floor-visible), measured in the same
// run: the same link opened by another visitor while its preview runs, the page and the frame
// alone.
func BenchmarkShareLinkWake(b *testing.B) {
	// Each sample is another visitor, from an address of its own (one address may wake links
	// only shares.Limits[shares.Wake].PerAddress times a minute).
	s := start(b, apptest.Options{Webhooks: true, Config: func(c *app.Config) { c.TrustProxy = true }})
	c := s.NewClient(b)
	c.SignUp("share-bench@example.com")
	projectID, sandboxID := c.BuildCounter()
	tab := apptest.NewBrowser(b).Open(b, "about:blank")
	tab.Do(b, chromedp.Action[chromedp.Void](func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: previewShownAt})
		return chromedp.Void{}, err
	}))
	as := func(visitor network.Headers) chromedp.Action[chromedp.Void] {
		return chromedp.Action[chromedp.Void](func(ctx context.Context, _ *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: visitor})
			return chromedp.Void{}, err
		})
	}
	// open navigates to the link and returns when its preview's frame loaded.
	open := func(link string) time.Duration {
		tab.Do(b, chromedp.Navigate(link))
		tab.WaitFor(b, "the preview swapped in", `window.previewShownAt > 0 && `+visitorShows("live"))
		return time.Duration(apptest.Eval[float64](b, tab, `window.previewShownAt`) * float64(time.Millisecond))
	}
	var samples, floor []time.Duration
	b.ResetTimer()
	for range b.N {
		// How many times a sleeping preview's link is opened per iteration.
		for range testkit.BenchSize(100, 2) {
			b.StopTimer()
			tab.Do(b, chromedp.Navigate("about:blank"))
			c.Pause(sandboxID)
			// A new link each time (a link may be woken shares.Limits[shares.Wake].PerLink times a
			// minute).
			apptest.RequireStatus(b, c.API(http.MethodDelete, "/api/projects/"+projectID+"/share", nil, nil), http.StatusNoContent)
			link := s.URL() + "/s/" + shareToken(b, c, projectID)
			tab.Do(b, as(network.Headers{"X-Forwarded-For": fmt.Sprintf("198.51.100.%d", len(samples)%250+1)}))
			b.StartTimer()
			samples = append(samples, open(link))
			b.StopTimer()
			// The floor: the same link opened again by another visitor, its preview running.
			tab.Do(b, chromedp.Navigate("about:blank"))
			tab.Do(b, as(network.Headers{"X-Forwarded-For": fmt.Sprintf("203.0.113.%d", len(floor)%250+1)}))
			floor = append(floor, open(link))
			b.StartTimer()
		}
	}
	b.StopTimer()
	reportQuantiles(b, "visible", samples)
	reportQuantiles(b, "floor-visible", floor)
	b.ReportMetric(float64(len(samples)), "samples")
}
