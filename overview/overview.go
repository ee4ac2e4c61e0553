// Package overview answers what a project, a sandbox, a visitor's share page and a founder's
// dashboard look like now: the read side of the lifecycle, as facts (rows, numbers, states),
// never sentences (docs/architecture.md, "Reads and verification"). It only reads the database:
// rendering a card for the live feed must not queue work or call the provider. The lifecycle
// package writes the states it reads; it may call here, never the other way round.
package overview

import (
	"context"
	"time"

	"github.com/google/uuid"

	"sandman/apperr"
	"sandman/db"
	"sandman/sandbox"
)

// Reader reads projects' states.
type Reader struct {
	q *db.Queries
	// sleepsAt is when a running sandbox is paused unless someone looks at it: the lifecycle's
	// rule, given by the assembly (package app), so it is written once.
	sleepsAt func(db.Sandbox) time.Time
}

// New returns a Reader of the database behind q; sleepsAt is the idle deadline of a running
// sandbox (lifecycle.Config's IdleDeadline).
func New(q *db.Queries, sleepsAt func(db.Sandbox) time.Time) *Reader {
	return &Reader{q: q, sleepsAt: sleepsAt}
}

// OwnedSandbox returns the founder's sandbox, or a not-found error for anyone else's.
func (r *Reader) OwnedSandbox(ctx context.Context, owner, id uuid.UUID) (db.Sandbox, error) {
	sb, err := r.q.GetSandboxByOwner(ctx, db.GetSandboxByOwnerParams{ID: id, OwnerID: owner})
	if db.IsNotFound(err) {
		return sb, apperr.NotFound("Sandbox")
	}
	return sb, err
}

// credits returns the founder's current credits (a dashboard whose list read none).
func (r *Reader) credits(ctx context.Context, owner uuid.UUID) (int32, error) {
	u, err := r.q.GetUserByID(ctx, owner)
	return u.Credits, db.MapError(err)
}

// ProjectView is a project with its current build and sandbox (nil before the first build).
type ProjectView struct {
	Project   db.Project
	FileCount int
	Build     *db.Build
	Sandbox   *db.Sandbox
	// EventID is the sandbox's newest event: the version of this state for live updates.
	EventID int64
	// Change is the sandbox's newest change (a visitor's note is not one): why the preview is
	// in its state.
	Change db.SandboxEvent
	// SleepsAt is when a running sandbox is paused unless someone looks at it; zero otherwise.
	SleepsAt time.Time
	// Shared: the project's share link is on (the card says so).
	Shared bool
	// CurrentVersion is the project's newest version's number; DeployedVersion the one its
	// sandbox's files are, and DeployingVersion the one being applied to it now (0: none).
	// A current version newer than the deployed one is waiting (docs/states.md, "Versions").
	CurrentVersion, DeployedVersion, DeployingVersion int32
	// FailedVersion is the version whose dev server did not start, when that is the newest
	// change (the pane offers RestoreTo, the version before it), or whose app does not start
	// now (RestoreTo: the last good version, 0 when there is none older); 0 otherwise.
	FailedVersion, RestoreTo int32
	// LastGoodVersion is the project's newest version whose app was up (0: none).
	LastGoodVersion int32
	// OpenProblems is how many of the project's problems are open (the card's count), and
	// Problem the failed version's newest open problem, when there is one (the pane tells its
	// message and detail).
	OpenProblems int64
	Problem      *db.AppProblem
}

// Waiting is the version that goes live when the preview runs again (or in a moment, when it
// runs), 0 when none is.
func (v ProjectView) Waiting() int32 {
	if v.Sandbox == nil {
		return 0
	}
	return waiting(v.CurrentVersion, v.DeployedVersion)
}

// waiting is the version that goes live when a preview runs again: the project's newest when its
// sandbox's files are an older one, else 0.
func waiting(current, deployed int32) int32 {
	if current == deployed {
		return 0
	}
	return current
}

// viewOf is project p in state st (project_states), before its current sandbox's rows.
func viewOf(p db.Project, st db.ProjectState) ProjectView {
	return ProjectView{Project: p, FileCount: int(st.FileCount), Shared: st.Shared, CurrentVersion: st.CurrentVersion,
		LastGoodVersion: st.LastGoodVersion}
}

// withSandbox completes the view with its current sandbox, build, newest change (why it is in
// its state), newest event's id (a visitor's note can be newer than the change) and versions,
// all read with st. The view keeps sb and b (a read's own rows).
func (r *Reader) withSandbox(v *ProjectView, st db.ProjectState, sb *db.Sandbox, b *db.Build, last db.SandboxEvent) {
	v.Sandbox, v.Build = sb, b
	v.EventID, v.Change = max(st.LatestEventID, last.ID), last
	v.DeployedVersion, v.DeployingVersion = st.DeployedNumber, st.DeployingNumber
	if sb.Status == sandbox.Running {
		v.SleepsAt = r.sleepsAt(*sb)
	}
}

// Projects returns the founder's projects with their current state, and the founder's credits
// (a page's header shows them), in one round trip when every project has a sandbox
// (ListProjectStatesByOwner). Like every read here it only reads the database: rendering a card
// for the live feed must not queue work. Pages opened by the founder ask for verification
// themselves (lifecycle's VerifyStale).
func (r *Reader) Projects(ctx context.Context, owner uuid.UUID) ([]ProjectView, int32, error) {
	states, err := r.q.ListProjectStatesByOwner(ctx, owner)
	if err != nil {
		return nil, 0, err
	}
	out := make([]ProjectView, len(states))
	for i := range states {
		p := &states[i]
		out[i] = viewOf(p.Project, p.ProjectState)
		r.withSandbox(&out[i], p.ProjectState, &p.Sandbox, &p.Build, p.SandboxEvent)
	}
	if err := r.withProblemCounts(ctx, owner, out); err != nil {
		return nil, 0, err
	}
	if len(states) > 0 && int(states[0].ProjectCount) == len(states) {
		return out, states[0].Credits, nil
	}
	// Some projects were never built (or there are none): the whole list, each with its state
	// read above if it has one, and the credits if no row brought them.
	var credits int32
	if len(states) > 0 {
		credits = states[0].Credits
	} else if credits, err = r.credits(ctx, owner); err != nil {
		return nil, 0, err
	}
	projects, err := r.q.ListProjectsByOwner(ctx, owner)
	if err != nil {
		return nil, 0, err
	}
	built := make(map[uuid.UUID]*ProjectView, len(out))
	for i := range out {
		built[out[i].Project.ID] = &out[i]
	}
	all := make([]ProjectView, len(projects))
	for i, p := range projects {
		if v, ok := built[p.Project.ID]; ok {
			all[i] = *v
			continue
		}
		all[i] = viewOf(p.Project, p.ProjectState)
	}
	return all, credits, nil
}

// withProblemCounts sets each view's count of open problems, in one read for the founder.
func (r *Reader) withProblemCounts(ctx context.Context, owner uuid.UUID, vs []ProjectView) error {
	counts, err := r.q.CountOpenProblemsByOwner(ctx, owner)
	if err != nil || len(counts) == 0 {
		return err
	}
	byProject := make(map[uuid.UUID]int64, len(counts))
	for _, c := range counts {
		byProject[c.ProjectID] = c.Open
	}
	for i := range vs {
		vs[i].OpenProblems = byProject[vs[i].Project.ID]
	}
	return nil
}

// Project returns one of the founder's projects with its current state, in two queries that
// read it as Projects reads each of the list (the page and an action's answer draw it from the
// same read; ProjectOfSandbox reads the same in one).
func (r *Reader) Project(ctx context.Context, owner, projectID uuid.UUID) (ProjectView, error) {
	p, err := r.q.GetProjectState(ctx, db.GetProjectStateParams{ID: projectID, OwnerID: owner})
	if err != nil {
		if db.IsNotFound(err) {
			return ProjectView{}, apperr.NotFound("Project")
		}
		return ProjectView{}, err
	}
	v := viewOf(p.Project, p.ProjectState)
	if p.ProjectState.SandboxID == nil {
		return v, nil
	}
	// The sandbox's rows with the state they were read with: a change between the two reads
	// shows whole (GetCurrentSandboxState).
	c, err := r.q.GetCurrentSandboxState(ctx, p.Project.ID)
	if db.IsNotFound(err) {
		return v, nil
	}
	if err != nil {
		return v, err
	}
	v = viewOf(p.Project, c.ProjectState)
	return v, r.withCurrent(ctx, &v, c.ProjectState, &c.Sandbox, &c.Build, c.SandboxEvent)
}

// withCurrent completes the view with its current sandbox (withSandbox) and versions, the
// version that failed and the one to restore (withFailedVersion), the count of open problems,
// and the failed version's problem (one more read, only while a version fails).
func (r *Reader) withCurrent(ctx context.Context, v *ProjectView, st db.ProjectState, sb *db.Sandbox, b *db.Build,
	last db.SandboxEvent) error {
	r.withSandbox(v, st, sb, b, last)
	if err := r.withFailedVersion(ctx, v, sb, last); err != nil {
		return err
	}
	n, err := r.q.CountOpenProblems(ctx, v.Project.ID)
	if err != nil {
		return err
	}
	v.OpenProblems = n
	if v.FailedVersion == 0 || n == 0 {
		return nil
	}
	p, err := r.q.GetOpenProblemOfVersion(ctx, db.GetOpenProblemOfVersionParams{ProjectID: v.Project.ID, Version: v.FailedVersion})
	if db.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	v.Problem = &p
	return nil
}

// withFailedVersion sets the view's failed version and the version to restore, when its newest
// change is a version that failed (one more read, rare) or its app does not start now.
func (r *Reader) withFailedVersion(ctx context.Context, v *ProjectView, sb *db.Sandbox, last db.SandboxEvent) error {
	if last.Reason == sandbox.ReasonVersionFailed && last.VersionNumber != nil {
		v.FailedVersion = *last.VersionNumber
		// The last good version is the way out (the app was up with it); without one, the
		// version before the failed one.
		if good := v.LastGoodVersion; good != 0 && good < v.FailedVersion {
			v.RestoreTo = good
			return nil
		}
		failed, err := r.q.GetVersionByNumber(ctx, db.GetVersionByNumberParams{ProjectID: v.Project.ID, Number: v.FailedVersion})
		if err == nil && failed.ParentNumber != nil {
			v.RestoreTo = *failed.ParentNumber
		} else if err != nil && !db.IsNotFound(err) {
			return err
		}
		return nil
	}
	// The app of the version it runs does not start (it exited, or does not answer), whatever
	// the newest change says (a wake, a crash seen later): the way out is the last good version.
	if app := v.App(); app.DoesNotStart() && app.Version > 0 && sb.Status == sandbox.Running {
		v.FailedVersion = app.Version
		if good := app.LastGoodVersion; good != nil && *good < app.Version {
			v.RestoreTo = *good
		}
	}
	return nil
}

// ProjectOfSandbox returns the project view a founder's sandbox belongs to, in one round trip
// (GetProjectStateOfSandbox): the status read of the JSON API, and an action's answer.
func (r *Reader) ProjectOfSandbox(ctx context.Context, owner, sandboxID uuid.UUID) (ProjectView, error) {
	v, _, err := r.ProjectOfSandboxAndCredits(ctx, owner, sandboxID)
	return v, err
}

// ProjectOfSandboxAndCredits is ProjectOfSandbox with the founder's credits, read in the same
// round trip: what the live feed draws for a change (the card, the pane, the header's balance).
func (r *Reader) ProjectOfSandboxAndCredits(ctx context.Context, owner, sandboxID uuid.UUID) (ProjectView, int32, error) {
	p, err := r.q.GetProjectStateOfSandbox(ctx, db.GetProjectStateOfSandboxParams{SandboxID: sandboxID, OwnerID: owner})
	if db.IsNotFound(err) {
		return ProjectView{}, 0, apperr.NotFound("Sandbox")
	}
	if err != nil {
		return ProjectView{}, 0, err
	}
	v := viewOf(p.Project, p.ProjectState)
	return v, p.OwnerCredits, r.withCurrent(ctx, &v, p.ProjectState, &p.Sandbox, &p.Build, p.SandboxEvent)
}

// SandboxStatus is one of a founder's sandboxes as the JSON status read answers it.
type SandboxStatus struct {
	Sandbox db.Sandbox
	// Current: the sandbox is its project's newest, the one the preview runs in. An older one
	// runs nothing now, and its versions are not told.
	Current bool
	// DeployedVersion is the version its files are; Waiting one that goes live when it runs
	// again, or 0 (ProjectView's DeployedVersion and Waiting).
	DeployedVersion, Waiting int32
	// App is its app's state (ProjectView's App).
	App AppState
}

// SandboxStatus returns one of the founder's sandboxes with its versions, in one round trip
// that reads nothing the answer does not show (GetSandboxStatus).
func (r *Reader) SandboxStatus(ctx context.Context, owner, sandboxID uuid.UUID) (SandboxStatus, error) {
	row, err := r.q.GetSandboxStatus(ctx, db.GetSandboxStatusParams{SandboxID: sandboxID, OwnerID: owner})
	if db.IsNotFound(err) {
		return SandboxStatus{}, apperr.NotFound("Sandbox")
	}
	if err != nil {
		return SandboxStatus{}, err
	}
	return SandboxStatus{Sandbox: row.Sandbox, Current: row.IsCurrent, DeployedVersion: row.DeployedNumber,
		Waiting: waiting(row.CurrentVersion, row.DeployedNumber), App: AppOf(row.Sandbox, row.LastGoodVersion)}, nil
}

// ExpiresAt is when the sandbox's lifetime ends, while it has one: a running or starting
// sandbox. A paused sandbox's end time is when it was paused, never an expiry.
func ExpiresAt(sb db.Sandbox) *time.Time {
	if sb.Status == sandbox.Running || sb.Status == sandbox.Starting {
		return sb.EndAt
	}
	return nil
}
