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
// opaque key (feed.Session names its streams' topic). Every instance ends the session's event streams.
const SessionEndChannel = "sandman_session_end"

// SandboxNotification is the payload on SandboxChannel: which sandbox to draw again, and whose.
// It carries no event id: a listener hears it after the commit, and reads the sandbox's newest
// event with the rest of what it draws. SandboxPayload is its one builder.
type SandboxNotification struct {
	SandboxID uuid.UUID `json:"sandbox_id"`
	OwnerID   uuid.UUID `json:"owner_id"`
}

// SandboxPayload is the payload announcing a sandbox on SandboxChannel: NotifySandbox's, and the
// statements' that announce the event row they insert (UpdateSandboxStatus, InsertSandboxEvent).
func SandboxPayload(sandboxID, ownerID uuid.UUID) string {
	b, _ := json.Marshal(SandboxNotification{SandboxID: sandboxID, OwnerID: ownerID}) // uuids always marshal
	return string(b)
}

// Notifier is what can announce at commit: a Tx, or Queries outside one.
type Notifier interface {
	Notify(ctx context.Context, arg NotifyParams) error
}

// NotifySandbox announces a sandbox whose pages should be drawn again, with no new event (a
// listener draws its newest), at the commit of n's transaction (at once outside one).
func NotifySandbox(ctx context.Context, n Notifier, sandboxID, ownerID uuid.UUID) error {
	return n.Notify(ctx, NotifyParams{Channel: SandboxChannel, Payload: SandboxPayload(sandboxID, ownerID)})
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

// FeedApplicationName names the instances' feed connections (feed.Feed.Listen) in
// pg_stat_activity, where a session's change counts the answers to wait for.
const FeedApplicationName = "sandman_feed"

// OperatorEndChannel announces a founder who is no longer an operator (`sandman operator
// remove`); the payload is the founder's id. Every instance ends the streams that carry the
// operator's console to them (feed.Feed.EndOperator).
const OperatorEndChannel = "sandman_operator_end"
