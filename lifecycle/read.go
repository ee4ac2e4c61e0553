package lifecycle

import (
	"time"
)

// Deadlines are the lifecycle's durations that pages, the API and the console tell.
type Deadlines struct {
	// IdleTimeout is how long a sandbox may go without activity before it is paused.
	IdleTimeout time.Duration
	// SandboxTimeout is the lifetime each create or connect gives a sandbox.
	SandboxTimeout time.Duration
	// ActivityEvery is how often a visitor's page reports activity while visible.
	ActivityEvery time.Duration
	// StuckStarting and StuckResuming are how long a sandbox may stay starting, and resuming,
	// before the sweep ends it: the console lists those past it.
	StuckStarting, StuckResuming time.Duration
}

// Deadlines returns the durations the Service was configured with, and those it derives.
func (s *Service) Deadlines() Deadlines {
	return Deadlines{IdleTimeout: s.cfg.IdleTimeout, SandboxTimeout: s.cfg.SandboxTimeout, ActivityEvery: s.cfg.activityEvery(),
		StuckStarting: s.cfg.buildStuckAfter(), StuckResuming: s.cfg.resumeStuckAfter()}
}
