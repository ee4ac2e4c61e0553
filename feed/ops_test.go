package feed_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/feed"
	"sandman/internal/testkit"
	"sandman/live"
	"sandman/views"
)

// The operator's console follows every founder's changes on the operators' streams: a burst of
// changes is rendered once per interval (the last change always included) and that one render
// goes to every operator's stream here; a founder's stream never carries it.
func TestOpsConsoleIsRenderedOncePerIntervalForAllOperators(t *testing.T) {
	t.Parallel()
	var renders atomic.Int64
	var lastRender atomic.Int64 // unix nanoseconds
	const every = 500 * time.Millisecond
	h := newFeedServer(t, 50, func(o *feed.Options) {
		o.OpsEvery = every
		o.Render.Ops = func(context.Context) (live.Message, error) {
			lastRender.Store(time.Now().UnixNano())
			return live.Message{Parts: []live.Part{{Event: views.OpsConsoleID, Data: fmt.Appendf(nil, "console %d", renders.Add(1))}}}, nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	isConsole := func(ev testkit.SSEEvent) bool { return ev.Event == views.OpsConsoleID }
	var operators []<-chan testkit.SSEEvent
	for range 2 {
		operators = append(operators, testkit.OpenSSE(t, ctx, h.srv.Client(), h.srv.URL+"/events?operator=1&owner="+uuid.NewString()))
	}
	for i, evs := range operators {
		testkit.NextSSE(t, evs, 10*time.Second, fmt.Sprintf("operator %d's console at connection", i), isConsole)
	}
	founder, sandbox := uuid.New(), uuid.New()
	h.state.set(founder, sandbox.String(), 1)
	founderEvents := h.stream(t, ctx, founder)
	testkit.NextSSE(t, founderEvents, 10*time.Second, "the founder's snapshot", func(ev testkit.SSEEvent) bool {
		return ev.Event == views.DOMID(views.Pane, sandbox.String())
	})

	before := renders.Load()
	for i := range 50 {
		h.feed.Deliver(ctx, uuid.New(), uuid.New(), int64(100+i))
	}
	// The founder's own change, after the burst: a console sent to the founder would come first.
	h.state.set(founder, sandbox.String(), 200)
	h.feed.Deliver(ctx, founder, sandbox, 200)
	testkit.NextSSE(t, founderEvents, 10*time.Second, "the founder's change", func(ev testkit.SSEEvent) bool {
		if isConsole(ev) {
			t.Fatalf("a founder's stream carried the console: %q", ev.Data)
		}
		return ev.ID == "200"
	})
	// The burst's last change is in a render after it, which both operators get.
	var last string
	for i, evs := range operators {
		ev := testkit.NextSSE(t, evs, 10*time.Second, fmt.Sprintf("operator %d's console after the burst", i), func(ev testkit.SSEEvent) bool {
			return isConsole(ev) && ev.Data == fmt.Sprintf("console %d", renders.Load())
		})
		if last != "" && ev.Data != last {
			t.Fatalf("the operators got different renders: %q and %q", last, ev.Data)
		}
		last = ev.Data
	}
	if n := renders.Load() - before; n < 1 || n > 2 {
		t.Fatalf("51 changes rendered the console %d times, want at most 2 (one now, one after the interval)", n)
	}
	// A change right after a render waits for the interval: the next render comes no sooner.
	prev := time.Unix(0, lastRender.Load())
	h.feed.Deliver(ctx, uuid.New(), uuid.New(), 300)
	want := fmt.Sprintf("console %d", renders.Load()+1)
	for i, evs := range operators {
		testkit.NextSSE(t, evs, 10*time.Second, fmt.Sprintf("operator %d's console after one more change", i), func(ev testkit.SSEEvent) bool {
			return isConsole(ev) && ev.Data == want
		})
	}
	if gap := time.Unix(0, lastRender.Load()).Sub(prev); gap < every-50*time.Millisecond {
		t.Fatalf("two renders %s apart, want at least %s", gap, every)
	}
}

// A stream whose operator check came before the founder's removal was heard starts without the
// console: its snapshot carries only what the stream follows, and the founder's own state.
func TestAStreamOpenedAfterItsOperatorsRemovalStartsWithoutTheConsole(t *testing.T) {
	t.Parallel()
	h := newFeedServer(t, 50, func(o *feed.Options) {
		o.Render.Ops = func(context.Context) (live.Message, error) {
			return live.Message{Parts: []live.Part{{Event: views.OpsConsoleID, Data: []byte("console")}}}, nil
		}
	})
	removed, sandbox := uuid.New(), uuid.New()
	h.state.set(removed, sandbox.String(), 1)
	h.feed.EndOperator(removed) // heard after the check (the test server's grants are seen at 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := testkit.OpenSSE(t, ctx, h.srv.Client(), h.srv.URL+"/events?operator=1&owner="+removed.String())
	testkit.NextSSE(t, events, 10*time.Second, "the founder's own state", func(ev testkit.SSEEvent) bool {
		if ev.Event == views.OpsConsoleID {
			t.Fatal("a stream opened after its operator's removal carried the console")
		}
		return ev.Event == views.DOMID(views.Pane, sandbox.String())
	})
	// The snapshot leaves in one batch: had it carried the console, it would have come by now.
	h.state.set(removed, sandbox.String(), 2)
	h.feed.Deliver(ctx, removed, sandbox, 2)
	testkit.NextSSE(t, events, 10*time.Second, "the founder's next state", func(ev testkit.SSEEvent) bool {
		if ev.Event == views.OpsConsoleID {
			t.Fatal("a stream opened after its operator's removal carried the console")
		}
		return ev.ID == "2" && ev.Event == views.DOMID(views.Pane, sandbox.String())
	})
}
