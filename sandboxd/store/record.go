package store

import "time"

// State is a sandbox's state as the provider names it.
type State string

const (
	StateRunning State = "running"
	StatePaused  State = "paused"
)

// SnapshotKind is what a paused sandbox kept: its memory too, or only its files.
type SnapshotKind string

const (
	SnapshotMemory     SnapshotKind = "memory"
	SnapshotFilesystem SnapshotKind = "filesystem"
)

// Record is the persisted part of a sandbox, written to
// <state>/sandboxes/<id>.json on every change.
type Record struct {
	ID              string            `json:"id"`
	TemplateID      string            `json:"templateID"`
	Metadata        map[string]string `json:"metadata,omitempty"`
	EnvVars         map[string]string `json:"envVars,omitempty"`
	AccessToken     string            `json:"accessToken,omitempty"`
	AllowInternet   *bool             `json:"allowInternetAccess,omitempty"`
	AutoPause       bool              `json:"autoPause"`
	AutoPauseMemory bool              `json:"autoPauseMemory"`
	AutoResume      bool              `json:"autoResume"`
	// ResumeTimeout is the create timeout in seconds: the lifetime an
	// auto-resume by traffic grants, as the provider stores it.
	ResumeTimeout int          `json:"resumeTimeout"`
	State         State        `json:"state"`
	Snapshot      SnapshotKind `json:"snapshot,omitempty"`
	CreatedAt     time.Time    `json:"createdAt"`
	StartedAt     time.Time    `json:"startedAt"`
	// EndAt is the expiry while running and the pause time while paused, as
	// the provider reports it.
	EndAt       time.Time `json:"endAt"`
	ExecutionID string    `json:"executionID"`
	// EnvdVersion is the envd version the sandbox got when it last started
	// (created or resumed); empty in records written before it was kept,
	// which read as the current version.
	EnvdVersion string `json:"envdVersion,omitempty"`
	// HostUID is the host uid the sandbox's user maps to when root sandboxd
	// isolates it; its files belong to that uid, so it stays the same for
	// the sandbox's whole life.
	HostUID int `json:"hostUID,omitempty"`
}

// Clone is r with maps of its own.
func (r Record) Clone() Record {
	r.Metadata = CloneMap(r.Metadata)
	r.EnvVars = CloneMap(r.EnvVars)
	return r
}

// CloneMap copies m (nil stays nil).
func CloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
