package lifecycle

import (
	"sandman/sandbox"
)

// Reasons the writers record: codes (the enum event_reason), never the sentences, which views
// writes from them (a pause's reasons are its pauseCause).
const (
	reasonCreated     = sandbox.ReasonCreated     // createSandboxRow: a build or rebuild made the sandbox
	reasonBuildFailed = sandbox.ReasonBuildFailed // failBuild: the founder's code failed, the credit is spent
	// failBuild: the platform failed the build and its credit was given back.
	reasonBuildFailedRefunded = sandbox.ReasonBuildFailedRefunded
	reasonReplaced            = sandbox.ReasonReplaced // replaceCurrent: a rebuild ended this sandbox
	// A failed resume's reason names its cause; the sweep's names a resume that never ended.
	reasonResumeNotFound    = sandbox.ReasonResumeNotFound
	reasonResumeUnreachable = sandbox.ReasonResumeUnreachable
	reasonResumeTimedOut    = sandbox.ReasonResumeTimedOut
	reasonResumeFilesLost   = sandbox.ReasonResumeFilesLost
	// An integrity check restored files (the event names them); a sandbox the provider no
	// longer has, with no event saying why after the catch-up window, was lost by it.
	reasonRestored = sandbox.ReasonRestored
	reasonLost     = sandbox.ReasonLost
	// A visitor of the share link woke the preview (VisitorWake), or found it gone: a note, not
	// a move (from and to are its state then).
	reasonVisitorWake = sandbox.ReasonVisitorWake
	// A version was applied to a running preview (lifecycle/deploy.go) and its dev server
	// answered, or did not start on it; a resume applied the version made while it slept.
	reasonVersionLive      = sandbox.ReasonVersionLive
	reasonVersionFailed    = sandbox.ReasonVersionFailed
	reasonWokeWithVersion  = sandbox.ReasonWokeWithVersion
	reasonVisitorFoundGone = sandbox.ReasonVisitorFoundGone
	// The watch saw a running preview's dev server exit (failure_exit_code: its exit code;
	// output: its last lines); a wake worked with a version whose dev server does not start
	// (its failure's facts).
	reasonAppExited       = sandbox.ReasonAppExited
	reasonWokeNotStarting = sandbox.ReasonWokeNotStarting
	// The project's variables changed (env_set, env_removed: names); a change of them was
	// applied to a running preview and its dev server answered.
	reasonEnvChanged = sandbox.ReasonEnvChanged
	reasonEnvApplied = sandbox.ReasonEnvApplied
)
