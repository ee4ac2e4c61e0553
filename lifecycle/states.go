// Package lifecycle owns the preview's life: every rule about builds, pauses, resumes,
// rebuilds, credits and verification, and the River workers that run them. The states and the
// moves the state machine allows are package sandbox's words; apply is the only code that
// changes a sandbox's status, and checks each move there. docs/states.md has the states and
// every rule, with where each one lives; views writes what the founder reads.
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
