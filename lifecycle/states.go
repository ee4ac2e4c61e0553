// Package lifecycle owns the preview's life: every rule about builds, pauses, resumes,
// rebuilds, credits and verification, and the River workers that run them. The states and the
// moves the state machine allows are package sandbox's words; apply is the only code that
// changes a sandbox's status, and checks each move there. docs/states.md has the
// states, their copy and every rule, with where each one lives here.
package lifecycle

import "sandman/sandbox"

// keepsRecreated reports whether a rebuilt sandbox keeps its "Recreated" badge when it moves to
// `to`. The badge marks the preview a rebuild brought back: it stays while that preview starts
// and runs (a connection issue says nothing new about it), and ends with its first pause,
// failed resume or end.
func keepsRecreated(to sandbox.Status) bool {
	switch to {
	case sandbox.Starting, sandbox.Running, sandbox.Resuming, sandbox.Unknown:
		return true
	}
	return false
}

// CauseText is the sentence shown under "Resume failed" for a cause (docs/states.md, exact
// copy), "" for none. A cause recorded before the codes existed (other) keeps its old sentence,
// stored as its detail.
func CauseText(cause *sandbox.Cause, detail string) string {
	if cause == nil {
		return ""
	}
	switch *cause {
	case sandbox.CauseNotFound:
		return "This preview was cleaned up and can't be recovered. Rebuild it from your saved files."
	case sandbox.CauseFilesLost:
		return "The preview's files were lost by the provider and couldn't be restored. Rebuild it from your saved files."
	case sandbox.CauseOther:
		if detail != "" {
			return detail
		}
	}
	return "The sandbox couldn't be reached. It may be corrupted."
}
