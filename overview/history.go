package overview

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
func (r *Reader) History(ctx context.Context, owner, projectID uuid.UUID, upTo int64) ([]HistoryEntry, error) {
	rows, err := r.q.ListProjectHistory(ctx, db.ListProjectHistoryParams{ProjectID: projectID, OwnerID: owner, UpTo: upTo, MaxEvents: HistoryLength})
	if err != nil {
		return nil, err
	}
	out := make([]HistoryEntry, len(rows))
	for i, r := range rows {
		out[i] = HistoryEntry{SandboxEvent: r.SandboxEvent, Kind: r.BuildKind}
	}
	return out, nil
}
