// Package lifecycle owns the preview's life: the sandbox state machine and every rule about
// builds, pauses, resumes, rebuilds, credits and verification, and the River workers that run
// them. apply is the only code that changes a sandbox's status. docs/states.md has the
// states, their copy and every rule, with where each one lives here.
package lifecycle

import "sandman/db"

// The sandbox states (docs/states.md).
const (
	Starting     = db.SandboxStatusStarting
	Running      = db.SandboxStatusRunning
	Paused       = db.SandboxStatusPaused
	Resuming     = db.SandboxStatusResuming
	ResumeFailed = db.SandboxStatusResumeFailed
	Killed       = db.SandboxStatusKilled
	Expired      = db.SandboxStatusExpired
	Terminated   = db.SandboxStatusTerminated
	Unknown      = db.SandboxStatusUnknown
)

// allowed is the whole state machine: from → the states it may move to.
var allowed = map[db.SandboxStatus][]db.SandboxStatus{
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
func CanTransition(from, to db.SandboxStatus) bool {
	for _, s := range allowed[from] {
		if s == to {
			return true
		}
	}
	return false
}

// IsGone reports whether the provider no longer has the sandbox.
func IsGone(s db.SandboxStatus) bool {
	return s == Killed || s == Expired || s == Terminated
}

// keepsRecreated reports whether a rebuilt sandbox keeps its "Recreated" badge when it moves to
// `to`. The badge marks the preview a rebuild brought back: it stays while that preview starts
// and runs (a connection issue says nothing new about it), and ends with its first pause,
// failed resume or end.
func keepsRecreated(to db.SandboxStatus) bool {
	switch to {
	case Starting, Running, Resuming, Unknown:
		return true
	}
	return false
}

// Why a resume failed: stored as a code (sandboxes.failure_cause), which rules read; the
// founder reads its sentence, CauseText.
const (
	CauseNotFound    = db.FailureCauseNotFound
	CauseUnreachable = db.FailureCauseUnreachable
	CauseFilesLost   = db.FailureCauseFilesLost
)

// CauseText is the sentence shown under "Resume failed" for a cause (docs/states.md, exact
// copy), "" for none. A cause recorded before the codes existed (other) keeps its old sentence,
// stored as its detail.
func CauseText(cause *db.FailureCause, detail string) string {
	if cause == nil {
		return ""
	}
	switch *cause {
	case CauseNotFound:
		return "This preview was cleaned up and can't be recovered. Rebuild it from your saved files."
	case CauseFilesLost:
		return "The preview's files were lost by the provider and couldn't be restored. Rebuild it from your saved files."
	case db.FailureCauseOther:
		if detail != "" {
			return detail
		}
	}
	return "The sandbox couldn't be reached. It may be corrupted."
}

// onlyRebuildFixes reports whether a failed resume's cause is one no further resume can mend:
// the provider no longer has the sandbox, or its files are lost for good.
func onlyRebuildFixes(cause *db.FailureCause) bool {
	return cause != nil && (*cause == CauseNotFound || *cause == CauseFilesLost)
}
