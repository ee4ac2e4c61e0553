package feed

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sandman/applog"
	"sandman/db"
)

// channels are what the feed follows, all on its one connection.
var channels = []string{db.SandboxChannel, db.SessionEndChannel, db.SessionChangeChannel, db.SessionForgottenChannel,
	db.ShareEndChannel, db.OperatorEndChannel, applog.Channel}

// Listen follows the database's announcements on one dedicated connection until ctx ends:
// sandbox changes are rendered and published, ended sessions, share links that stopped working
// and removed operators end their streams, sessions' changes reach the sessions' copies, the app
// log's batches wake its streams. ready (if not nil) is called once, when the feed is first up:
// an instance serves no stream before, since a log-out or a change announced in between would
// never reach it. After the connection drops (a database restart, say) it reconnects with
// backoff, resyncs every stream and wakes every log stream, since announcements may have been
// missed.
func (f *Feed) Listen(ctx context.Context, databaseURL string, ready func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := f.listenOnce(ctx, databaseURL, func() {
			f.sessionsFeed(true)
			backoff = 100 * time.Millisecond
			if ready != nil {
				ready()
				ready = nil
			}
			if f.opts.Logs != nil {
				f.opts.Logs.WakeAll()
			}
			f.Resync(ctx) // nothing to do on the first connection, unless streams came first
		})
		f.sessionsFeed(false)
		if ctx.Err() != nil {
			return
		}
		f.opts.Logger.Warn("feed: database feed interrupted; reconnecting", "err", err, "in", backoff)
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
	// The connection only ever waits: without aggressive keepalives a database host that
	// vanished (no FIN, no RST) would leave the feed silent for the kernel's two hours.
	dialer := &net.Dialer{Timeout: 10 * time.Second,
		KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}}
	cfg.DialFunc = dialer.DialContext
	cfg.RuntimeParams["application_name"] = db.FeedApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	listen := make([]string, len(channels))
	for i, ch := range channels {
		listen[i] = "LISTEN " + pgx.Identifier{ch}.Sanitize()
	}
	if _, err := conn.Exec(ctx, strings.Join(listen, "; ")); err != nil {
		return err
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case db.SandboxChannel:
			received := time.Now()
			var msg db.SandboxNotification
			if err := json.Unmarshal([]byte(n.Payload), &msg); err != nil {
				f.opts.Logger.Warn("feed: bad notification", "payload", n.Payload)
				continue
			}
			f.dispatch.post(ctx, msg.OwnerID, msg.SandboxID, 0, received) // the render reads the newest event
		case db.SessionEndChannel, db.SessionChangeChannel:
			if f.opts.Sessions != nil {
				f.opts.Sessions.Forget(n.Payload)
			}
			if n.Channel == db.SessionEndChannel {
				f.EndSession(n.Payload)
			}
			// The answer the change's instance waits for: this instance no longer has the copy.
			if err := db.New(conn).Notify(ctx, db.NotifyParams{Channel: db.SessionForgottenChannel, Payload: n.Payload}); err != nil {
				return err
			}
		case db.SessionForgottenChannel:
			if f.opts.Sessions != nil {
				f.opts.Sessions.Heard(n.Payload)
			}
		case db.ShareEndChannel:
			if link, err := uuid.Parse(n.Payload); err == nil {
				f.EndShare(link)
			}
		case db.OperatorEndChannel:
			if founder, err := uuid.Parse(n.Payload); err == nil {
				f.EndOperator(founder)
			}
		case applog.Channel:
			if f.opts.Logs != nil {
				f.opts.Logs.Wake(n.Payload)
			}
		}
	}
}

func (f *Feed) sessionsFeed(up bool) {
	if f.opts.Sessions != nil {
		f.opts.Sessions.Feed(up)
	}
}
