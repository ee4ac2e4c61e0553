package lifecycle

import (
	"time"

	"sandman/sandbox"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// BuildArgs builds a sandbox's build: create, upload, install, start, readiness.
type BuildArgs struct {
	SandboxID uuid.UUID `json:"sandbox_id"`
}

// Kind implements river.JobArgs.
func (BuildArgs) Kind() string { return "build" }

// InsertOpts gives builds three tries: each step is idempotent, so a crashed worker's build
// resumes where it can.
func (BuildArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 3} }

// PauseArgs pauses a running sandbox: past its idle deadline (Idle) or because someone asked.
// Every field is part of the job's uniqueness (InsertOpts).
type PauseArgs struct {
	SandboxID uuid.UUID `json:"sandbox_id" river:"unique"`
	// Version is the sandbox row's version when the pause was queued: the stretch of running
	// it is about. An idle or after-build pause of an older version is out of date (the sandbox
	// stopped running since) and ends at once.
	Version int64 `json:"version" river:"unique"`
	// Idle is the idle queue's pause, queued when the deadline passed (lifecycle/idle.go). It
	// pauses only if nobody looked at the sandbox since; else it gives the sandbox back to the
	// queue, which takes it again at its new deadline.
	Idle bool `json:"idle" river:"unique"`
	// Ready is the pause SANDMAN_PAUSE_AFTER_READY=immediate asks for when a build is ready.
	Ready bool `json:"ready,omitempty" river:"unique"`
	// Operator is a pause an operator asked for on the console (recorded "by an operator").
	Operator bool `json:"operator,omitempty" river:"unique"`
}

// Kind implements river.JobArgs.
func (PauseArgs) Kind() string { return "pause" }

// InsertOpts: pauses are retried a few times (provider hiccups), each attempt idempotent. A
// sandbox has at most one unfinished pause job per cause and version: the idle queue claiming
// again a pause whose worker went away, or a burst of clicks, adds nothing while one waits or
// runs. The version keeps a new request apart from a job that already did its work but is not
// yet recorded as finished (the founder paused, resumed and pauses again within a second), and
// the causes keep a click apart from an idle pause scheduled minutes ahead. Finished jobs do not
// count (completed is left out of ByState).
//
// The idle queue queues a job only once a deadline has passed, so no job waits for a sandbox
// that runs (docs/states.md, "Idle pause").
func (PauseArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 5, UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: unfinished}}
}

// unfinished are the job states in which a unique job blocks another like it: every state
// before its end (River requires available, pending, running and scheduled).
var unfinished = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled}

// ResumeArgs brings a sandbox from resuming to running (or resume_failed).
type ResumeArgs struct {
	SandboxID uuid.UUID `json:"sandbox_id"`
	// Visitor: a visitor of the project's share link asked for it (VisitorWake), not the
	// founder; its outcome is recorded with that source.
	Visitor bool `json:"visitor,omitempty"`
}

// source is who the resume's outcome is recorded for.
func (a ResumeArgs) source() sandbox.Source {
	if a.Visitor {
		return sandbox.SourceVisitor
	}
	return sandbox.SourceUser
}

// Kind implements river.JobArgs.
func (ResumeArgs) Kind() string { return "resume" }

// InsertOpts: the worker makes its own two attempts; River retries only after a crash.
func (ResumeArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 2} }

// DeployArgs applies the project's current version to a running sandbox (lifecycle/deploy.go).
// Any number may be queued for one sandbox: the first to claim it applies the newest version,
// and the others find it claimed or current.
type DeployArgs struct {
	SandboxID uuid.UUID `json:"sandbox_id"`
}

// Kind implements river.JobArgs.
func (DeployArgs) Kind() string { return "deploy" }

// InsertOpts: a provider's failure is tried again; the files converge from wherever they are.
func (DeployArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 3} }

// KillArgs kills a provider sandbox Sandman no longer wants (a replaced or failed build).
type KillArgs struct {
	ProviderID string `json:"provider_id"`
}

// Kind implements river.JobArgs.
func (KillArgs) Kind() string { return "kill" }

// InsertOpts: kills are retried with River's backoff until the provider answers.
func (KillArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 10} }

// VerifyArgs checks one sandbox against the provider now.
type VerifyArgs struct {
	SandboxID uuid.UUID `json:"sandbox_id"`
}

// Kind implements river.JobArgs.
func (VerifyArgs) Kind() string { return "verify" }

// InsertOpts: one verify per sandbox at a time is enough; duplicates within a few seconds
// collapse.
func (VerifyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: 5 * time.Second}}
}

// ReconcileArgs is the periodic list-based sweep.
type ReconcileArgs struct{}

// Kind implements river.JobArgs.
func (ReconcileArgs) Kind() string { return "reconcile" }

// InsertOpts: a missed sweep is replaced by the next one.
func (ReconcileArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

// EventsArgs is the periodic events-API catch-up read.
type EventsArgs struct{}

// Kind implements river.JobArgs.
func (EventsArgs) Kind() string { return "events_catch_up" }

// InsertOpts: a missed read is replaced by the next one.
func (EventsArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }

// SweepArgs is the periodic safety net: sandboxes stuck in starting or resuming past their
// deadline.
type SweepArgs struct{}

// Kind implements river.JobArgs.
func (SweepArgs) Kind() string { return "sweep" }

// InsertOpts: a missed sweep is replaced by the next one.
func (SweepArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 1} }
