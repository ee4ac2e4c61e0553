package feed

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// dispatchWorkers bounds the deliveries rendered at once: enough to keep both cores and the
// database busy while one founder's render waits on a query, few enough that a burst (a
// reconcile that changed a thousand sandboxes) does not open a connection per founder.
const dispatchWorkers = 4

// dispatcher takes the sandbox notifications off the LISTEN connection, so the loop that reads
// them never renders (a render is several queries and two templates: while it ran, every other
// founder's next message waited behind it, and PostgreSQL's notification queue grew). Per
// founder it keeps the newest event of each sandbox not yet delivered (a message is a state:
// the newest replaces the ones before it); one worker at a time delivers a founder's, in the
// order they were noticed, so no founder's older state can overtake a newer one; at most
// dispatchWorkers founders are delivered at once.
type dispatcher struct {
	deliver func(ctx context.Context, owner, sandbox uuid.UUID, eventID int64) // Feed.Deliver
	lag     func(time.Duration)                                                // noticed → delivered

	mu      sync.Mutex
	pending map[uuid.UUID]*founderMail // by founder: noticed, not yet being delivered
	queue   []uuid.UUID                // founders with pending mail and no worker, oldest first
	busy    map[uuid.UUID]bool         // founders a worker is delivering to now
	workers int
}

// founderMail is one founder's notifications waiting for a worker.
type founderMail struct {
	ctx      context.Context
	events   map[uuid.UUID]int64 // sandbox → newest event id
	order    []uuid.UUID         // the sandboxes in the order first noticed
	received time.Time           // when the oldest of them arrived
}

func newDispatcher(deliver func(context.Context, uuid.UUID, uuid.UUID, int64), lag func(time.Duration)) *dispatcher {
	return &dispatcher{deliver: deliver, lag: lag, pending: map[uuid.UUID]*founderMail{}, busy: map[uuid.UUID]bool{}}
}

// post queues a notification for delivery and returns at once.
func (d *dispatcher) post(ctx context.Context, owner, sandbox uuid.UUID, eventID int64, received time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.pending[owner]
	if m == nil {
		m = &founderMail{ctx: ctx, events: map[uuid.UUID]int64{}, received: received}
		d.pending[owner] = m
		if !d.busy[owner] {
			d.queue = append(d.queue, owner)
		}
	}
	if _, ok := m.events[sandbox]; !ok {
		m.order = append(m.order, sandbox)
	}
	m.events[sandbox] = max(m.events[sandbox], eventID)
	if len(d.queue) > 0 && d.workers < dispatchWorkers {
		d.workers++
		go d.work()
	}
}

// work delivers founders' mail until none waits.
func (d *dispatcher) work() {
	for {
		d.mu.Lock()
		if len(d.queue) == 0 {
			d.workers--
			d.mu.Unlock()
			return
		}
		owner := d.queue[0]
		d.queue = d.queue[1:]
		m := d.pending[owner]
		delete(d.pending, owner)
		d.busy[owner] = true
		d.mu.Unlock()

		for _, sandbox := range m.order {
			d.deliver(m.ctx, owner, sandbox, m.events[sandbox])
		}
		d.lag(time.Since(m.received))

		d.mu.Lock()
		delete(d.busy, owner)
		if d.pending[owner] != nil { // noticed while this worker delivered: next in line
			d.queue = append(d.queue, owner)
		}
		d.mu.Unlock()
	}
}
