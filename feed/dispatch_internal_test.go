package feed

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The LISTEN loop hands notifications to the dispatcher and goes on: a founder whose render is
// slow holds no one else's message; the notifications that arrive for a founder meanwhile are
// delivered after it, each sandbox once at its newest event (never an older one after a newer);
// and no more than dispatchWorkers renders run at once.
func TestDispatcherNeverBlocksListenAndKeepsEachFoundersOrder(t *testing.T) {
	t.Parallel()
	type call struct {
		owner, sandbox uuid.UUID
		event          int64
	}
	var (
		mu       sync.Mutex
		calls    []call
		inFlight int
		most     int
		slowBusy int
		overlap  bool // two renders of one founder at once
	)
	slow := uuid.New()
	release, started := make(chan struct{}), make(chan struct{})
	d := newDispatcher(func(_ context.Context, owner, sandbox uuid.UUID, ev int64) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if owner == slow {
			slowBusy++
			overlap = overlap || slowBusy > 1
		}
		mu.Unlock()
		if owner == slow && ev == 1 {
			close(started)
			<-release // the first render of the slow founder waits
		} else {
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		inFlight--
		if owner == slow {
			slowBusy--
		}
		calls = append(calls, call{owner, sandbox, ev})
		mu.Unlock()
	}, func(time.Duration) {})
	ctx := context.Background()
	sb := uuid.New()

	post := func(owner, sandbox uuid.UUID, ev int64) {
		done := make(chan struct{})
		go func() { d.post(ctx, owner, sandbox, ev, time.Now()); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Second):
			t.Fatal("post blocked: the LISTEN loop would wait for a render")
		}
	}
	post(slow, sb, 1)
	<-started
	waitFor := func(what string, ok func(call) bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			for _, c := range calls {
				if ok(c) {
					mu.Unlock()
					return
				}
			}
			mu.Unlock()
		}
		t.Fatalf("%s was never delivered", what)
	}
	// While the slow founder's render hangs: more of its changes, and another founder's.
	for ev := int64(2); ev <= 5; ev++ {
		post(slow, sb, ev)
	}
	other := uuid.New()
	post(other, uuid.New(), 7)
	waitFor("another founder's change, while one founder's render hangs", func(c call) bool { return c.owner == other })

	// Twenty founders at once: never more than dispatchWorkers renders.
	for i := range 20 {
		post(uuid.New(), uuid.New(), int64(100+i))
	}
	close(release)
	waitFor("the slow founder's newest change", func(c call) bool { return c.owner == slow && c.event == 5 })
	time.Sleep(100 * time.Millisecond) // the twenty finish
	mu.Lock()
	defer mu.Unlock()
	if overlap {
		t.Fatal("two renders of one founder ran at once: an older state could overtake a newer one")
	}
	var slowEvents []int64
	for _, c := range calls {
		if c.owner == slow {
			slowEvents = append(slowEvents, c.event)
		}
	}
	if fmt.Sprint(slowEvents) != "[1 5]" {
		t.Fatalf("the slow founder's sandbox was delivered at events %v, want [1 5]: its first, then only its newest", slowEvents)
	}
	if most > dispatchWorkers {
		t.Fatalf("%d renders ran at once, want at most %d", most, dispatchWorkers)
	}
	if len(calls) != 2+1+20 {
		t.Fatalf("%d deliveries, want %d", len(calls), 23)
	}
}
