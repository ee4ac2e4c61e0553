package sandboxd

import (
	"sync"
	"time"

	"sandman/sandboxd/machine"
)

type sandboxState string

const (
	stateRunning sandboxState = "running"
	statePaused  sandboxState = "paused"
)

type snapshotKind string

const (
	snapshotMemory     snapshotKind = "memory"
	snapshotFilesystem snapshotKind = "filesystem"
)

const (
	// pausedClientID is what the provider reports as clientID for every
	// sandbox; it is deprecated and carries no meaning.
	pausedClientID = "6532622b"
	envdPort       = 49983
	cpuCount       = 2
	templateBase   = "base"
	// baseBuildID is the build id events name for the base template: one
	// fixed value, since sandboxd has one image.
	baseBuildID = "00000000-0000-4000-8000-000000000001"
)

// record is the persisted part of a sandbox, written to
// <state>/sandboxes/<id>.json on every change.
type record struct {
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
	State         sandboxState `json:"state"`
	Snapshot      snapshotKind `json:"snapshot,omitempty"`
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

func (r record) clone() record {
	r.Metadata = cloneMap(r.Metadata)
	r.EnvVars = cloneMap(r.EnvVars)
	return r
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// sandbox is one sandbox in memory. rec, gone and timer are guarded by
// Server.mu; op serialises transitions so that slow work (stopping
// processes, deleting files) runs without holding Server.mu.
type sandbox struct {
	op    sync.Mutex
	id    string
	dir   string
	rec   record
	gone  bool
	timer *time.Timer
	// vm is the running machine (guarded by op for replacement, by its own
	// lock inside); nil when nothing has run yet or after a filesystem pause.
	vm *machine.Machine
}

// now is the one clock of sandboxd: UTC, microsecond precision, so that times
// survive JSON, list cursors and comparisons unchanged.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond)
}
