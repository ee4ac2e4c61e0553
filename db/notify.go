package db

import "github.com/google/uuid"

// SandboxChannel is the PostgreSQL channel on which every sandbox state change is announced
// at commit, so every instance (and its SSE clients) hears of it.
const SandboxChannel = "sandman_sandbox"

// SessionEndChannel announces a session that ended (a log-out); the payload is the session's
// opaque key (live.Stream.Session). Every instance ends the session's event streams.
const SessionEndChannel = "sandman_session_end"

// SandboxNotification is the payload on SandboxChannel.
type SandboxNotification struct {
	SandboxID uuid.UUID `json:"sandbox_id"`
	OwnerID   uuid.UUID `json:"owner_id"`
	EventID   int64     `json:"event_id"`
}

// IdleChannel wakes the idle pause's deadline queue (lifecycle/idle.go) when a deadline may be
// nearer than the one it sleeps until; the payload is empty.
const IdleChannel = "sandman_idle"

// ShareEndChannel announces a share link that stopped working (turned off, or replaced by a new
// link); the payload is the link's id. Every instance ends the visitors' streams of that link.
const ShareEndChannel = "sandman_share_end"
