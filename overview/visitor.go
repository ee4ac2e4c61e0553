package overview

import (
	"context"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/sandbox"
)

// SharedPreview is all a visitor of a share link may know of the project: its name and its
// preview's state, and the preview's URL while it runs. Nothing of the founder.
type SharedPreview struct {
	ProjectID   uuid.UUID
	ProjectName string
	State       sandbox.VisitorState
	PreviewURL  string // set when State is VisitorLive
	// ColdStart: the preview sleeps on a files-only snapshot, so waking starts the app again
	// and takes longer.
	ColdStart bool
	// EventID is the newest event of the sandbox shown: the version of this state.
	EventID int64
	// Sandbox is the sandbox shown (nil: never built), for the actions of a visit (never shown
	// to the visitor).
	Sandbox *db.Sandbox
}

// visitorState is what a visitor sees of sandbox sb (nil: never built) whose build is b, when
// failedResumes resumes in a row have failed since it last ran.
func visitorState(sb *db.Sandbox, b db.Build, failedResumes int32) sandbox.VisitorState {
	if sb == nil || b.Status == sandbox.BuildFailed {
		return sandbox.VisitorGone
	}
	switch sb.Status {
	case sandbox.Running:
		return appVisitorState(sb)
	case sandbox.Paused:
		return sandbox.VisitorSleeping
	case sandbox.Resuming:
		return sandbox.VisitorWaking
	case sandbox.Starting:
		return sandbox.VisitorStarting
	case sandbox.ResumeFailed:
		switch {
		case (sb.FailureCause != nil && sb.FailureCause.OnlyRebuildFixes()):
			return sandbox.VisitorGone
		case failedResumes >= 2:
			return sandbox.VisitorTrouble
		}
		return sandbox.VisitorSleeping
	case sandbox.Unknown:
		return sandbox.VisitorTrouble
	}
	return sandbox.VisitorGone
}

// appVisitorState is what a visitor sees of a running sandbox: its app's state decides whether
// the frame would show the app or the provider's error page.
func appVisitorState(sb *db.Sandbox) sandbox.VisitorState {
	if sb.AppStatus == nil {
		return sandbox.VisitorLive // a sandbox from before the app's state was kept
	}
	switch *sb.AppStatus {
	case sandbox.AppExited, sandbox.AppNotAnswering:
		return sandbox.VisitorBroken
	case sandbox.AppStarting:
		return sandbox.VisitorUpdating
	}
	return sandbox.VisitorLive
}

// SharedPreview reads what a visitor of the project's share link sees. Like every read, it
// only reads the database. The state and its version (EventID) come from one statement: read
// apart, a change committed between them labelled the older state with the newer version, which
// a visitor's stream then took for a state it had already sent, and the page stayed on it.
func (r *Reader) SharedPreview(ctx context.Context, projectID uuid.UUID) (SharedPreview, error) {
	p, err := r.q.GetProject(ctx, projectID)
	if err != nil {
		return SharedPreview{}, db.MapError(err)
	}
	out := SharedPreview{ProjectID: p.ID, ProjectName: p.Name}
	// The state and its version in one read: a visitor's stream never sends a version twice.
	cur, err := r.q.GetSharedSandboxByProject(ctx, p.ID)
	if db.IsNotFound(err) {
		out.State = sandbox.VisitorGone
		return out, nil
	}
	if err != nil {
		return out, err
	}
	sb := cur.Sandbox
	var failed int32
	if sb.Status == sandbox.ResumeFailed {
		if failed, err = r.q.CountFailedResumesSinceRunning(ctx, sb.ID); err != nil {
			return out, err
		}
	}
	out.Sandbox, out.EventID, out.State = &sb, cur.LatestEventID, visitorState(&sb, cur.Build, failed)
	switch out.State {
	case sandbox.VisitorLive:
		out.PreviewURL = sb.PreviewURL
	case sandbox.VisitorSleeping, sandbox.VisitorWaking:
		out.ColdStart = sb.SnapshotKind != nil && *sb.SnapshotKind == sandbox.PauseFilesystem
	}
	return out, nil
}
