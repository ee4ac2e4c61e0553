package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/ops"
	"sandman/outbox"
	"sandman/sandbox"
)

// ErrStale means the sandbox changed since it was read (another worker or instance won).
var ErrStale = errors.New("sandbox changed concurrently")

// ErrNotAllowed means the state machine forbids the transition.
var ErrNotAllowed = errors.New("transition not allowed")

// Change is one requested state change with what it carries.
type Change struct {
	To     sandbox.Status
	Source sandbox.Source
	Reason sandbox.Reason
	// Detail is the free-form part of why (an error's text, the provider's own kill reason):
	// kept for people, read by no rule (docs/architecture.md, "Codes, not copy").
	Detail string

	ProviderEventID   string
	ProviderTimestamp *time.Time

	PreviewURL   *string
	SnapshotKind *sandbox.PauseKind // set when pausing; cleared (nil with ClearSnapshot) on resume
	ClearSnap    bool
	EndAt        *time.Time
	KilledReason *sandbox.Reason // its detail is Detail
	FailureCause *sandbox.Cause  // its detail is Detail
	Verified     bool
}

// maxDetail caps a change's free-form detail (an error's text can be long).
const maxDetail = 500

// apply is the one function that changes a sandbox's status (docs/states.md). Inside the
// caller's transaction it checks the state machine, and in one statement (UpdateSandboxStatus)
// updates the row only if its version is unchanged, inserts the event row and NOTIFYs, so the
// change, its record and its announcement commit together. sb must be the row as last read;
// ErrStale means someone else changed it first. The "Recreated" badge is carried over unless
// the state machine ends it (keepsRecreated).
func apply(ctx context.Context, tx db.Tx, sb db.Sandbox, c Change) (db.Sandbox, error) {
	if !sandbox.CanTransition(sb.Status, c.To) {
		return sb, fmt.Errorf("%w: %s → %s", ErrNotAllowed, sb.Status, c.To)
	}
	now := time.Now()
	c.Detail = truncate(c.Detail, maxDetail)
	p := db.UpdateSandboxStatusParams{
		ID: sb.ID, Version: sb.Version, Status: c.To, Recreated: sb.Recreated && keepsRecreated(c.To),
		PreviewURL: c.PreviewURL, EndAt: c.EndAt, KilledReason: c.KilledReason,
		FailureCause: c.FailureCause, EventAt: c.ProviderTimestamp,
		Channel: db.SandboxChannel, Payload: db.SandboxPayload(sb.ID, sb.OwnerID), FromStatus: sb.Status, Source: c.Source, Reason: c.Reason, Detail: c.Detail,
		ProviderEventID: nonEmpty(c.ProviderEventID),
	}
	if c.FailureCause != nil {
		p.FailureDetail = c.Detail
	}
	if c.SnapshotKind != nil || c.ClearSnap {
		p.SetSnapshotKind, p.SnapshotKind = true, c.SnapshotKind
	}
	if c.To.Gone() {
		p.KilledAt = &now
	}
	if c.Verified {
		p.VerifiedAt = &now
	}
	row, err := tx.UpdateSandboxStatus(ctx, p)
	if err != nil {
		if db.IsNotFound(err) {
			return sb, ErrStale
		}
		return sb, err
	}
	updated := db.Sandbox(row)
	// What it costs and what its sleep saves follow its state (docs/operations.md).
	if err := ops.Record(ctx, tx, &sb, updated, now); err != nil {
		return sb, err
	}
	// The founder's backend hears of the move with it (docs/api.md, "Webhooks").
	if t, ok := outbox.PreviewType(c.To); ok && c.To != sb.Status {
		if err := outbox.Record(ctx, tx, outbox.OfSandbox(t, updated, string(c.Reason))); err != nil {
			return sb, err
		}
	}
	return updated, nil
}

// announce records an event that is no move, so pages learn of it like of any change: a new
// sandbox row's first (from starting to starting), or a visitor's note (noteFoundGone). via is
// the name of the API token the founder came through ("" for none).
func announce(ctx context.Context, tx db.Tx, sb db.Sandbox, source sandbox.Source, reason sandbox.Reason, via string) error {
	return record(ctx, tx, db.InsertSandboxEventParams{SandboxID: sb.ID, FromStatus: sb.Status, ToStatus: sb.Status,
		Source: source, Reason: reason, ViaToken: nonEmpty(via)}, sb.OwnerID)
}

// notifyUnchanged announces a sandbox whose status did not change but whose pages should be
// drawn again (its idle deadline moved, its build reached another stage): the same message as a
// change, which carries the newest event id, so pages swap in the fresh fragments.
func (s *Service) notifyUnchanged(ctx context.Context, sb db.Sandbox) error {
	return db.NotifySandbox(ctx, s.q, sb.ID, sb.OwnerID)
}

// record inserts the event row of what is no move (a move's is UpdateSandboxStatus's) and
// NOTIFYs it (db.SandboxPayload), in one statement.
func record(ctx context.Context, tx db.Tx, ev db.InsertSandboxEventParams, owner uuid.UUID) error {
	ev.Channel, ev.Payload = db.SandboxChannel, db.SandboxPayload(ev.SandboxID, owner)
	if _, err := tx.InsertSandboxEvent(ctx, ev); err != nil {
		return err
	}
	t, ok := versionEventType(ev.Reason)
	if !ok {
		return nil
	}
	// The founder's backend hears of a version's outcome with its history's event.
	return recordVersionHook(ctx, tx, t, ev.SandboxID, ev.Reason, ev.VersionNumber)
}

// recordVersionHook records the webhook event of a version's outcome, with the version's number.
func recordVersionHook(ctx context.Context, tx db.Tx, t outbox.Type, id uuid.UUID, r sandbox.Reason, version *int32) error {
	sb, err := tx.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	e := outbox.OfSandbox(t, sb, string(r))
	if version != nil {
		e.Version = *version
	}
	return outbox.Record(ctx, tx, e)
}

// versionEventType is the webhook event of a history's event about a version, if it has one.
func versionEventType(r sandbox.Reason) (outbox.Type, bool) {
	switch r {
	case reasonVersionLive:
		return outbox.VersionLive, true
	case reasonVersionFailed, reasonWokeNotStarting:
		return outbox.VersionFailed, true
	}
	return "", false
}

// withFailure adds a version's failure to start to its event: its facts, its output the tail of
// what the command printed.
func withFailure(ev *db.InsertSandboxEventParams, f sandbox.Failure) {
	ev.FailureCode, ev.FailureExitCode, ev.FailurePort, ev.FailureLimitMs = db.FailureColumns(f)
	ev.FailureCommand, ev.Output = &f.Command, &f.Output
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
