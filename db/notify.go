package db

import (
	"context"
	"encoding/json"

	"github.com/google/uuid"
)

// SandboxChannel is the PostgreSQL channel on which every sandbox state change is announced
// at commit, so every instance (and its SSE clients) hears of it.
const SandboxChannel = "sandman_sandbox"

// SessionEndChannel announces a session that ended (a log-out); the payload is the session's
// opaque key (live.Stream.Session). Every instance ends the session's event streams.
const SessionEndChannel = "sandman_session_end"

// SandboxNotification is the payload on SandboxChannel. InsertSandboxEvent
// (queries/sandbox_events.sql) writes the same JSON in SQL: keep its keys in step.
type SandboxNotification struct {
	SandboxID uuid.UUID `json:"sandbox_id"`
	OwnerID   uuid.UUID `json:"owner_id"`
	EventID   int64     `json:"event_id"`
}

// NotifySandbox announces a sandbox whose pages should be drawn again though no event row was
// written (an event row announces itself, InsertSandboxEvent): in a transaction, at its commit.
// It is the one place outside SQL that writes SandboxNotification.
func (q *Queries) NotifySandbox(ctx context.Context, sandboxID, ownerID uuid.UUID) error {
	payload, err := json.Marshal(SandboxNotification{SandboxID: sandboxID, OwnerID: ownerID})
	if err != nil {
		return err
	}
	return q.Notify(ctx, NotifyParams{Channel: SandboxChannel, Payload: string(payload)})
}

// IdleChannel wakes the idle pause's deadline queue (lifecycle/idle.go) when a deadline may be
// nearer than the one it sleeps until; the payload is empty.
const IdleChannel = "sandman_idle"

// ShareEndChannel announces a share link that stopped working (turned off, or replaced by a new
// link); the payload is the link's id. Every instance ends the visitors' streams of that link.
const ShareEndChannel = "sandman_share_end"

// SessionChangeChannel announces a session whose data was written (a log-in's new session, its
// CSRF token); the payload is the session's key, as on SessionEndChannel. Every instance drops
// its copy of the session (accounts.SessionStore) and reads it again.
const SessionChangeChannel = "sandman_session_change"

// SessionForgottenChannel is each instance's answer to an announcement on SessionEndChannel or
// SessionChangeChannel, with the same payload: it has dropped its copy of the session. The
// instance that made the change waits for every feed's answer (accounts.SessionStore).
const SessionForgottenChannel = "sandman_session_forgotten"

// FeedApplicationName names the instances' feed connections (live.Hub.Listen) in
// pg_stat_activity, where a session's change counts the answers to wait for.
const FeedApplicationName = "sandman_feed"

// OperatorEndChannel announces a founder who is no longer an operator (`sandman operator
// remove`); the payload is the founder's id. Every instance ends the streams that carry the
// operator's console to them (live.Hub.EndOperator).
const OperatorEndChannel = "sandman_operator_end"
