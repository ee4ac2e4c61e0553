package overview

import (
	"time"

	"sandman/db"
	"sandman/sandbox"
)

// AppState is the app of a sandbox as the API tells it.
type AppState struct {
	Status sandbox.AppStatus
	// Version is the version whose files it runs (0: none yet).
	Version int32
	// Since is when it entered its status (for stopped: when the sandbox left running).
	Since time.Time
	// ExitCode is set when it exited and its process's end said how (nil when it was found gone
	// without an end to read).
	ExitCode *int32
	// LastGoodVersion is the newest version of the project whose app was up (nil: none).
	LastGoodVersion *int32
}

// AppOf is the app of sb, whose project's last good version is lastGood (0: none). A sandbox that is not
// running (or starting: a build's dev server has a state before the build is ready) runs no
// app.
func AppOf(sb db.Sandbox, lastGood int32) AppState {
	a := AppState{Status: sandbox.AppStopped, Since: sb.StateChangedAt}
	if lastGood != 0 {
		a.LastGoodVersion = &lastGood
	}
	if sb.AppVersion != nil {
		a.Version = *sb.AppVersion
	}
	if sb.AppStatus == nil || sb.Status != sandbox.Running && sb.Status != sandbox.Starting {
		return a
	}
	a.Status = *sb.AppStatus
	if sb.AppSince != nil {
		a.Since = *sb.AppSince
	}
	if a.Status == sandbox.AppExited {
		a.ExitCode = sb.AppExitCode
	}
	return a
}

// DoesNotStart reports whether the app's current version does not start: its server exited,
// or runs without answering. A rebuild does not mend that (it builds the same files): the
// rebuild dialog warns, and the way out is the last good version (docs/states.md, "The app").
func (a AppState) DoesNotStart() bool { return a.Status.DoesNotStart() }

// App is the view's sandbox's app (stopped before the first build).
func (v ProjectView) App() AppState {
	if v.Sandbox == nil {
		return AppState{Status: sandbox.AppStopped}
	}
	return AppOf(*v.Sandbox, v.LastGoodVersion)
}
