package applog

import (
	"log/slog"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// Feed tells an instance's log streams that their project has new lines, as the instance's feed
// (package feed, on its one LISTEN connection) hears of them: one wake per batch and project, never the lines themselves (a stream reads
// them from the database after its cursor, so a missed wake loses nothing but time).
type Feed struct {
	log    *slog.Logger
	mu     sync.Mutex
	subs   map[uuid.UUID]map[chan struct{}]struct{}
	closed chan struct{}
	close  sync.Once
}

// Close ends every stream that follows the feed (the server's shutdown: a stream is never done
// by itself). It may be called more than once.
func (f *Feed) Close() { f.close.Do(func() { close(f.closed) }) }

// Done is closed by Close.
func (f *Feed) Done() <-chan struct{} { return f.closed }

// NewFeed returns a Feed; the instance's feed wakes it (Wake, WakeAll).
func NewFeed(log *slog.Logger) *Feed {
	if log == nil {
		log = slog.Default()
	}
	return &Feed{log: log, subs: map[uuid.UUID]map[chan struct{}]struct{}{}, closed: make(chan struct{})}
}

// Subscribe returns a channel that receives (at most one pending) wake when the project gets
// lines, and the function that ends the subscription.
func (f *Feed) Subscribe(project uuid.UUID) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	if f.subs[project] == nil {
		f.subs[project] = map[chan struct{}]struct{}{}
	}
	f.subs[project][ch] = struct{}{}
	f.mu.Unlock()
	return ch, func() {
		f.mu.Lock()
		delete(f.subs[project], ch)
		if len(f.subs[project]) == 0 {
			delete(f.subs, project)
		}
		f.mu.Unlock()
	}
}

// wake tells the project's streams (all of them when all).
func (f *Feed) wake(project uuid.UUID, all bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	send := func(set map[chan struct{}]struct{}) {
		for ch := range set {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	if all {
		for _, set := range f.subs {
			send(set)
		}
		return
	}
	send(f.subs[project])
}

// Wake wakes the streams of the projects an announcement on Channel names (a batch's: their
// ids, comma-separated).
func (f *Feed) Wake(payload string) {
	for _, s := range strings.Split(payload, ",") {
		if id, err := uuid.Parse(s); err == nil {
			f.wake(id, false)
		}
	}
}

// WakeAll wakes every stream: the instance's feed (package feed) is back after an
// interruption, and a batch may have been missed meanwhile.
func (f *Feed) WakeAll() { f.wake(uuid.Nil, true) }
