package db

import "github.com/google/uuid"

// SandboxChannel is the PostgreSQL channel on which every sandbox state change is announced
// at commit, so every instance (and its SSE clients) hears of it.
const SandboxChannel = "sandman_sandbox"

// SandboxNotification is the payload on SandboxChannel.
type SandboxNotification struct {
	SandboxID uuid.UUID `json:"sandbox_id"`
	OwnerID   uuid.UUID `json:"owner_id"`
	EventID   int64     `json:"event_id"`
}
