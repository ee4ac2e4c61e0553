package applog

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Feed tells an instance's log streams that their project has new lines: one LISTEN connection
// for the instance, one wake per batch and project, never the lines themselves (a stream reads
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

// NewFeed returns a Feed; Listen follows the database.
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

// Listen follows Channel on a connection of its own until ctx ends, reconnecting with backoff;
// every (re)connection wakes every stream, which may have missed a batch meanwhile.
func (f *Feed) Listen(ctx context.Context, databaseURL string) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := f.listenOnce(ctx, databaseURL, func() { backoff = 100 * time.Millisecond; f.wake(uuid.Nil, true) })
		if ctx.Err() != nil {
			return
		}
		f.log.Warn("applog: log feed interrupted; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (f *Feed) listenOnce(ctx context.Context, databaseURL string, connected func()) error {
	cfg, err := pgx.ParseConfig(databaseURL)
	if err != nil {
		return err
	}
	// As the live feed's: a vanished database host is noticed in seconds, not hours.
	dialer := &net.Dialer{Timeout: 10 * time.Second,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}}
	cfg.DialFunc = dialer.DialContext
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{Channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		for _, s := range strings.Split(n.Payload, ",") {
			if id, err := uuid.Parse(s); err == nil {
				f.wake(id, false)
			}
		}
	}
}
