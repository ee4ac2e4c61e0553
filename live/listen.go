package live

import (
	"context"
	"encoding/json"
	"net"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"sandman/db"
)

// Listen follows the database's sandbox feed on one dedicated connection and delivers each
// change to this instance's clients; ended sessions, share links that stopped working and
// removed operators come on the same connection and end their streams here. ready (if not nil) is called once, when the
// feed is first up: an instance serves no stream before, since a log-out or a change announced
// in between would never reach it. After the connection drops (a database restart, say) it
// reconnects with backoff and resyncs every client, since changes may have been missed.
func (h *Hub) Listen(ctx context.Context, databaseURL string, ready func()) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.listenOnce(ctx, databaseURL, func() {
			h.sessionsFeed(true)
			backoff = 100 * time.Millisecond
			if ready != nil {
				ready()
				ready = nil
			}
			h.Resync(ctx) // nothing to do on the first connection, unless streams came first
		})
		h.sessionsFeed(false)
		if ctx.Err() != nil {
			return
		}
		h.opts.Logger.Warn("live: database feed interrupted; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (h *Hub) listenOnce(ctx context.Context, databaseURL string, connected func()) error {
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
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{db.SandboxChannel}.Sanitize()+"; LISTEN "+
		pgx.Identifier{db.SessionEndChannel}.Sanitize()+"; LISTEN "+pgx.Identifier{db.SessionChangeChannel}.Sanitize()+
		"; LISTEN "+pgx.Identifier{db.SessionForgottenChannel}.Sanitize()+"; LISTEN "+pgx.Identifier{db.ShareEndChannel}.Sanitize()+
		"; LISTEN "+pgx.Identifier{db.OperatorEndChannel}.Sanitize()); err != nil {
		return err
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		switch n.Channel {
		case db.SessionEndChannel, db.SessionChangeChannel:
			if h.opts.Sessions != nil {
				h.opts.Sessions.Forget(n.Payload)
			}
			if n.Channel == db.SessionEndChannel {
				h.EndSession(n.Payload)
			}
			// The answer the change's instance waits for: this instance no longer has the copy.
			if err := db.New(conn).Notify(ctx, db.NotifyParams{Channel: db.SessionForgottenChannel, Payload: n.Payload}); err != nil {
				return err
			}
			continue
		case db.SessionForgottenChannel:
			if h.opts.Sessions != nil {
				h.opts.Sessions.Heard(n.Payload)
			}
			continue
		case db.ShareEndChannel:
			if link, err := uuid.Parse(n.Payload); err == nil {
				h.EndShare(link)
			}
			continue
		case db.OperatorEndChannel:
			if founder, err := uuid.Parse(n.Payload); err == nil {
				h.EndOperator(founder)
			}
			continue
		}
		received := time.Now()
		var msg db.SandboxNotification
		if err := json.Unmarshal([]byte(n.Payload), &msg); err != nil {
			h.opts.Logger.Warn("live: bad notification", "payload", n.Payload)
			continue
		}
		h.dispatch.post(ctx, msg.OwnerID, msg.SandboxID, msg.EventID, received)
	}
}

// SessionCache is an instance's copy of the sessions in use (accounts.SessionStore), which the
// feed keeps true: it hears every session that ended or changed, on any instance, and whether
// the feed is up at all (while it is not, announcements may be missed).
type SessionCache interface {
	Forget(session string)
	Feed(up bool)
	Heard(session string) // an instance's answer to a change made here (accounts.SessionStore)
}

func (h *Hub) sessionsFeed(up bool) {
	if h.opts.Sessions != nil {
		h.opts.Sessions.Feed(up)
	}
}
