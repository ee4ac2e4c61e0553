// Package sandbox holds the words of a preview's life as typed values: a sandbox's statuses and
// the moves between them, its app's statuses, why it failed to resume, why its state changed and
// who changed it, how it sleeps, its build's status and kind, and what a visitor of its share
// link is shown. It does no I/O and imports nothing of ours: the database's enums are these types
// (sqlc.yaml maps them), lifecycle writes them, and the read side and views compare them, so a
// status is never a bare string anywhere (docs/states.md has what each one means).
package sandbox

// Status is a sandbox's state (the sandbox_status enum).
type Status string

// The sandbox states.
const (
	Starting     Status = "starting"
	Running      Status = "running"
	Paused       Status = "paused"
	Resuming     Status = "resuming"
	ResumeFailed Status = "resume_failed"
	Killed       Status = "killed"
	Expired      Status = "expired"
	Terminated   Status = "terminated"
	Unknown      Status = "unknown"
)

// allowed is the whole state machine: from → the states it may move to.
var allowed = map[Status][]Status{
	Starting:     {Running, Paused, Killed, Expired, Terminated, Unknown},
	Running:      {Paused, Killed, Expired, Terminated, Unknown},
	Paused:       {Resuming, Running, Killed, Expired, Terminated, Unknown},
	Resuming:     {Running, Paused, ResumeFailed, Killed, Expired, Terminated, Unknown},
	ResumeFailed: {Resuming, Running, Paused, Killed, Expired, Terminated},
	Unknown:      {Running, Paused, Resuming, Killed, Expired, Terminated},
	// Gone is final: a new build makes a new sandbox.
	Killed:     {},
	Expired:    {},
	Terminated: {},
}

// CanTransition reports whether the state machine allows from → to.
func CanTransition(from, to Status) bool {
	for _, s := range allowed[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Gone reports whether the provider no longer has the sandbox.
func (s Status) Gone() bool { return s == Killed || s == Expired || s == Terminated }

// Cause is why a resume failed (the failure_cause enum): rules read it, the founder reads its
// sentence (views).
type Cause string

// The causes of a failed resume.
const (
	CauseNotFound    Cause = "not_found"   // the provider no longer has the sandbox
	CauseUnreachable Cause = "unreachable" // it could not be reached
	CauseFilesLost   Cause = "files_lost"  // its files were lost and could not be restored
	// CauseOther: recorded before the codes existed; its sentence is the stored detail.
	CauseOther Cause = "other"
)

// OnlyRebuildFixes reports whether no further resume can mend a failed resume of this cause:
// the provider no longer has the sandbox, or its files are lost for good.
func (c Cause) OnlyRebuildFixes() bool { return c == CauseNotFound || c == CauseFilesLost }

// AppStatus is the state of the app in a sandbox (the app_status enum, and stopped): the dev
// server Sandman started. A sandbox's Status keeps meaning the sandbox: a version whose server
// does not start leaves it running.
type AppStatus string

// The app's statuses.
const (
	AppStarting     AppStatus = "starting"      // started, not answering yet
	AppUp           AppStatus = "up"            // answers on its port
	AppExited       AppStatus = "exited"        // its process ended
	AppNotAnswering AppStatus = "not_answering" // runs, and did not answer within the readiness timeout
	// AppStopped is never stored: the sandbox is not running, so neither is the app.
	AppStopped AppStatus = "stopped"
)

// DoesNotStart reports whether an app in this status does not start: its server exited, or runs
// without answering. A rebuild does not mend that (it builds the same files).
func (a AppStatus) DoesNotStart() bool { return a == AppExited || a == AppNotAnswering }

// PauseKind is how a sandbox sleeps (the pause_kind enum): with its memory, or with its files
// only (waking starts the app again).
type PauseKind string

// The pause kinds.
const (
	PauseMemory     PauseKind = "memory"
	PauseFilesystem PauseKind = "filesystem"
)

// Valid reports whether k is one of the pause kinds (a project's setting, sent by its founder).
func (k PauseKind) Valid() bool { return k == PauseMemory || k == PauseFilesystem }

// BuildStatus is a build's status (the build_status enum).
type BuildStatus string

// The build statuses.
const (
	BuildQueued   BuildStatus = "queued"
	BuildBuilding BuildStatus = "building"
	BuildReady    BuildStatus = "ready"
	BuildFailed   BuildStatus = "failed"
)

// BuildKind is a first build or a rebuild (the build_kind enum).
type BuildKind string

// The build kinds.
const (
	BuildInitial BuildKind = "initial"
	BuildRebuild BuildKind = "rebuild"
)

// VisitorState is what a visitor of a project's share link is shown (docs/states.md, "What a
// visitor of a share link sees").
type VisitorState string

// The visitor's states.
const (
	// VisitorLive: the preview runs; the page is the preview.
	VisitorLive VisitorState = "live"
	// VisitorSleeping: paused, or one resume in a row failed and another may work; the page
	// wakes it.
	VisitorSleeping VisitorState = "sleeping"
	// VisitorWaking: a resume is under way.
	VisitorWaking VisitorState = "waking"
	// VisitorStarting: a build is under way (the founder built or rebuilt it).
	VisitorStarting VisitorState = "starting"
	// VisitorGone: the sandbox is gone (killed, expired, terminated, its build failed, the
	// provider lost it or its files) or was never built; only its founder can rebuild it.
	VisitorGone VisitorState = "gone"
	// VisitorTrouble: the provider cannot be reached (unknown), or two resumes in a row failed.
	VisitorTrouble VisitorState = "trouble"
	// VisitorBroken: the sandbox runs but its app does not (it exited, or does not answer):
	// the page of ours says so, never the provider's error page, and nothing of why (that is
	// the founder's).
	VisitorBroken VisitorState = "broken"
	// VisitorUpdating: the sandbox runs and a version's dev server is starting, not answering
	// yet.
	VisitorUpdating VisitorState = "updating"
	// VisitorEnded: the link itself was turned off or replaced; nothing of the preview is shown.
	VisitorEnded VisitorState = "ended"
)
