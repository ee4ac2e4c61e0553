package lifecycle

import (
	"context"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/sandbox"
)

// HistoryLength is how many of a project's changes its build page lists.
const HistoryLength = 20

// HistoryEntry is one recorded change of a project's preview, as facts: the event (its move,
// reason and source, who made it, the versions, files, durations and output it names) and the
// kind of build its sandbox runs (a rebuild's creation cost a rebuild's credit). views writes
// its sentence (docs/states.md, "History").
type HistoryEntry struct {
	db.SandboxEvent
	Kind sandbox.BuildKind
}

// History returns the founder's project's newest changes up to the event upTo, newest first,
// across every sandbox the project has had (a rebuild starts a new one). upTo is the event the
// page's state follows from (ProjectView.EventID), so a history drawn with a state never runs
// ahead of it. Like every read, it only reads the database.
func (s *Service) History(ctx context.Context, owner, projectID uuid.UUID, upTo int64) ([]HistoryEntry, error) {
	rows, err := s.q.ListProjectHistory(ctx, db.ListProjectHistoryParams{ProjectID: projectID, OwnerID: owner, UpTo: upTo, MaxEvents: HistoryLength})
	if err != nil {
		return nil, err
	}
	out := make([]HistoryEntry, len(rows))
	for i, r := range rows {
		out[i] = HistoryEntry{SandboxEvent: r.SandboxEvent, Kind: r.BuildKind}
	}
	return out, nil
}

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
)
