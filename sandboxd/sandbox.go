package sandboxd

import (
	"sync"
	"time"

	"sandman/sandboxd/machine"
	"sandman/sandboxd/store"
)

const (
	// pausedClientID is what the provider reports as clientID for every
	// sandbox; it is deprecated and carries no meaning.
	pausedClientID = "6532622b"
	envdPort       = 49983
	templateBase   = "base"
	// baseBuildID is the build id events name for the base template: one
	// fixed value, since sandboxd has one image.
	baseBuildID = "00000000-0000-4000-8000-000000000001"
)

// sandbox is one sandbox in memory. rec, gone and timer are guarded by
// Server.mu; op serialises transitions so that slow work (stopping
// processes, deleting files) runs without holding Server.mu.
type sandbox struct {
	op    sync.Mutex
	id    string
	dir   string
	rec   store.Record
	gone  bool
	timer *time.Timer
	// vm is the running machine (guarded by op for replacement, by its own
	// lock inside); nil when nothing has run yet or after a filesystem pause.
	vm *machine.Machine
	// metrics are the samples of the sandbox's runs (metrics.go).
	metricsMu sync.Mutex
	metrics   []metricSample
}

// now is the one clock of sandboxd: UTC, microsecond precision, so that times
// survive JSON, list cursors and comparisons unchanged.
func now() time.Time {
	return time.Now().UTC().Truncate(time.Microsecond)
}
