package lifecycle

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sandman/db"
	"sandman/sandbox"
)

// Provider event types (docs/provider.md, "Lifecycle events").
const (
	EventCreated = "sandbox.lifecycle.created"
	EventResumed = "sandbox.lifecycle.resumed"
	EventUpdated = "sandbox.lifecycle.updated"
	EventPaused  = "sandbox.lifecycle.paused"
	EventKilled  = "sandbox.lifecycle.killed"
)

// ProviderEvent is one lifecycle event from a webhook or the events API.
type ProviderEvent struct {
	ID         string
	Type       string
	SandboxID  string
	Timestamp  time.Time
	KillReason *string
	SetTimeout *time.Time
}

// applyEvent applies one provider event to its sandbox row, in provider-timestamp
// order: an event older than the newest one seen (or than Sandman's own last change) is
// ignored, so a late or replayed event never overwrites newer state. Unknown sandboxes and event types
// are ignored. It reports whether the row changed.
func (s *Service) applyEvent(ctx context.Context, ev ProviderEvent, source sandbox.Source) (changed bool, err error) {
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		changed, err = s.applyProviderEvent(ctx, tx, ev, source)
		return err
	})
	return changed, err
}

// applyProviderEvent is applyEvent inside the caller's transaction.
func (s *Service) applyProviderEvent(ctx context.Context, tx db.Tx, ev ProviderEvent, source sandbox.Source) (bool, error) {
	row, err := tx.GetSandboxByProviderIDForUpdate(ctx, &ev.SandboxID)
	if db.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	changed := false
	_, err = s.transitionLocked(ctx, tx, row.Sandbox, func(tx db.Tx, cur db.Sandbox) (*Change, error) {
		if cur.LastEventAt != nil && !ev.Timestamp.After(*cur.LastEventAt) {
			return nil, nil
		}
		// An event that changes nothing is still the newest word from the provider: remember
		// its time, or an older event arriving later would be applied over it.
		seen := func() (*Change, error) {
			return nil, tx.MarkSandboxVerified(ctx, db.MarkSandboxVerifiedParams{ID: cur.ID, EventAt: &ev.Timestamp})
		}
		// Our own transitions carry no provider time, only our clock. No skew is allowed: the
		// provider's record of what Sandman itself just did (a build's created event, our
		// connect's resumed event, our pause's paused event) is stamped before Sandman records
		// the change, often well under a second before, and the events reader re-reads the
		// recent past, so any allowance would replay those facts over newer state (a paused
		// row flipping to running and back). A genuinely newer event stamped early by a
		// provider clock behind ours is ignored instead, and reconcile corrects that. A change
		// made by a provider event is ordered by last_event_at above: its state_changed_at is
		// merely when the delivery arrived, and retried or caught-up deliveries of newer
		// events routinely arrive seconds later. The row says which made its last change
		// (changed_by_provider).
		if ev.Timestamp.Before(cur.StateChangedAt) && !cur.ChangedByProvider {
			return seen()
		}
		c := Change{Source: source, ProviderEventID: ev.ID, ProviderTimestamp: &ev.Timestamp}
		switch ev.Type {
		case EventKilled:
			if cur.Status.Gone() {
				return seen()
			}
			c.To, c.Reason, c.Detail = goneStatus(cur, ev.KillReason, ev.Timestamp)
			c.KilledReason = &c.Reason
			if cur.Status == sandbox.Starting {
				// Lost mid-build: the build fails, and its credit is refunded, with this change.
				if err := s.finishFailed(ctx, tx, cur, providerFailure("the sandbox was lost mid-build: killed ("+deref(ev.KillReason)+")")); err != nil {
					return nil, err
				}
			}
		case EventPaused:
			// A pause we are already resuming from, or one the row shows, changes nothing.
			if cur.Status != sandbox.Running && cur.Status != sandbox.Unknown || pauseInFlight(cur, time.Now()) {
				return seen() // or Sandman's own pause, which its job records with its cause
			}
			// The kind snapshotKindOf would read, read with the lock.
			c.To, c.Reason, c.SnapshotKind = sandbox.Paused, sandbox.ReasonProviderPaused, &row.PauseKind
		case EventResumed, EventCreated:
			// Resuming and starting rows belong to their workers, which check readiness first.
			if cur.Status != sandbox.Paused && cur.Status != sandbox.Unknown && cur.Status != sandbox.ResumeFailed {
				return seen()
			}
			c.To, c.Reason = sandbox.Running, sandbox.ReasonProviderResumed
			c.ClearSnap = true
		case EventUpdated:
			if ev.SetTimeout != nil {
				if err := tx.SetSandboxEndAt(ctx, db.SetSandboxEndAtParams{ID: cur.ID, EndAt: ev.SetTimeout}); err != nil {
					return nil, err
				}
			}
			return seen()
		default:
			return nil, nil
		}
		if !sandbox.CanTransition(cur.Status, c.To) {
			return seen()
		}
		changed = true
		return &c, nil
	})
	return changed, err
}

type eventsWorker struct {
	river.WorkerDefaults[EventsArgs]
	s *Service
}

func (w *eventsWorker) Timeout(*river.Job[EventsArgs]) time.Duration { return time.Minute }

func (w *eventsWorker) Work(ctx context.Context, _ *river.Job[EventsArgs]) error {
	return w.s.catchUpEvents(ctx)
}

const (
	eventsCursorName = "events_api"
	eventsMargin     = 5 * time.Second
)

// catchUpEvents reads the provider's events API from the stored cursor (the timestamp of the
// newest event already read, less a margin for events that become visible out of order) and
// applies what it finds oldest first. Webhooks normally deliver the same events sooner;
// applying twice is harmless because applyEvent ignores what is not newer.
func (s *Service) catchUpEvents(ctx context.Context) error {
	var since time.Time
	if raw, err := s.q.GetProviderCursor(ctx, eventsCursorName); err == nil {
		since, _ = time.Parse(time.RFC3339Nano, raw)
	} else if !db.IsNotFound(err) {
		return err
	}
	if since.IsZero() {
		// First run: nothing before now is news; reconciliation covers the past.
		since = time.Now().Add(-time.Minute)
	}
	events, err := s.providerEventsSince(ctx, since.Add(-eventsMargin))
	if err != nil {
		return err
	}
	newest := since
	for _, ev := range events {
		if _, err := s.applyEvent(ctx, ev, sandbox.SourceEventsAPI); err != nil {
			return err
		}
		if ev.Timestamp.After(newest) {
			newest = ev.Timestamp
		}
	}
	return s.q.UpsertProviderCursor(ctx, db.UpsertProviderCursorParams{Name: eventsCursorName, Cursor: newest.Format(time.RFC3339Nano)})
}
