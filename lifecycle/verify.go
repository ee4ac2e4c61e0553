package lifecycle

import (
	"context"
	"errors"
	"sandman/overview"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"sandman/db"
	"sandman/sandbox"
)

// ProviderState is what the provider says of one sandbox.
type ProviderState struct {
	Found bool
	State sandbox.Status // Running or Paused when Found
	EndAt time.Time
	// StartedAt is when the provider created it (known from the list only).
	StartedAt time.Time
	// KillReason is the provider's kill_reason for a sandbox it no longer has, when known.
	KillReason *string
	// VCPUs and MemoryMiB are its size (cpuCount, memoryMB), when the list reports them.
	VCPUs, MemoryMiB int32
}

// goneStatus classifies a sandbox the provider no longer has (docs/states.md, "Why a sandbox is
// gone"). killReason is the provider's kill_reason when an event said so, or nil when the
// sandbox was simply found missing: then it expired (a running one past its end time), was
// Sandman's own kill, or else the provider lost it (reasonLost), which goneChange declares only
// after the catch-up window.
// detail is the provider's own kill reason when no code names it.
func goneStatus(sb db.Sandbox, killReason *string, now time.Time) (to sandbox.Status, reason sandbox.Reason, detail string) {
	if killReason != nil {
		switch *killReason {
		case "timeout":
			return sandbox.Expired, sandbox.ReasonProviderTimeout, ""
		case "request":
			if sb.KillRequested {
				return sandbox.Terminated, sandbox.ReasonProviderRequest, ""
			}
			return sandbox.Killed, sandbox.ReasonProviderRequest, ""
		default:
			return sandbox.Killed, sandbox.ReasonProviderOther, *killReason
		}
	}
	// A paused sandbox's end time is its pause time, not an expiry: pastExpiry never reads it.
	if sb.Status == sandbox.Running && pastExpiry(sb, now) {
		return sandbox.Expired, sandbox.ReasonMissingPastEnd, ""
	}
	if sb.KillRequested {
		return sandbox.Terminated, sandbox.ReasonMissingAfterKill, ""
	}
	return sandbox.Killed, reasonLost, ""
}

// goneChange is the change for a sandbox the provider no longer has, in the transaction that
// read cur. A loss nobody explains (no kill event, no expiry, not Sandman's kill) is declared
// only once no killed event has come within the events' catch-up window since it was first
// seen (lostAfter): until then it returns no change and remembers when it was first seen. A
// killed event in the meantime is applied by its webhook or the events reader with its reason.
func (s *Service) goneChange(ctx context.Context, tx db.Tx, cur db.Sandbox, killReason *string, source sandbox.Source) (*Change, error) {
	now := time.Now()
	to, reason, detail := goneStatus(cur, killReason, now)
	if reason == reasonLost {
		since, err := tx.SetSandboxMissing(ctx, cur.ID)
		if err != nil {
			return nil, err
		}
		if now.Before(s.cfg.lostAfter(since)) {
			return nil, nil
		}
		s.log.Warn("the provider lost a sandbox: gone with no event", "sandbox_id", cur.ID, "provider_id", deref(cur.ProviderID),
			"missing_since", since, "status", cur.Status)
	}
	return &Change{To: to, Source: source, Reason: reason, Detail: detail, KilledReason: &reason, Verified: true}, nil
}

// markGone records that the provider no longer has the sandbox (see goneChange).
func (s *Service) markGone(ctx context.Context, sb db.Sandbox, source sandbox.Source, killReason *string) error {
	_, err := s.transition(ctx, sb.ID, func(tx db.Tx, cur db.Sandbox) (*Change, error) {
		if cur.Status.Gone() {
			return nil, nil
		}
		return s.goneChange(ctx, tx, cur, killReason, source)
	})
	return err
}

// syncTo corrects a row in running, paused or unknown to what the provider says.
func (s *Service) syncTo(ctx context.Context, id uuid.UUID, ps ProviderState, source sandbox.Source) error {
	_, err := s.transition(ctx, id, func(tx db.Tx, cur db.Sandbox) (*Change, error) {
		switch cur.Status {
		case sandbox.Running, sandbox.Paused, sandbox.Unknown:
		default:
			return nil, nil // transitional states belong to their worker; gone is final
		}
		if !ps.Found {
			return s.goneChange(ctx, tx, cur, ps.KillReason, source)
		}
		if cur.Status == ps.State {
			return nil, tx.MarkSandboxVerified(ctx, db.MarkSandboxVerifiedParams{ID: cur.ID})
		}
		if ps.State == sandbox.Paused && pauseInFlight(cur, time.Now()) {
			return nil, nil // Sandman's own pause: its job records it, with its cause
		}
		c := &Change{To: ps.State, Source: source, Reason: sandbox.ReasonSynced, Verified: true}
		if ps.State == sandbox.Running && !ps.EndAt.IsZero() {
			c.EndAt = &ps.EndAt
		}
		if ps.State == sandbox.Paused {
			kind, err := snapshotKindOf(ctx, tx, cur)
			if err != nil {
				return nil, err
			}
			c.SnapshotKind = kind
		}
		return c, nil
	})
	return err
}

// snapshotKindOf is the kind of snapshot a pause of sb keeps: its project's, which every pause
// Sandman asks for uses. The provider reports a pause but not its kind, and its report can be
// applied before the pause job records its own (a reconcile or a webhook in between).
func snapshotKindOf(ctx context.Context, tx db.Tx, sb db.Sandbox) (*sandbox.PauseKind, error) {
	p, err := tx.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: sb.ProjectID, OwnerID: sb.OwnerID})
	if err != nil {
		return nil, err
	}
	return &p.PauseKind, nil
}

// markUnknown records that the provider cannot be asked now (errors, or the breaker is open).
func (s *Service) markUnknown(ctx context.Context, id uuid.UUID, cause error) error {
	_, err := s.transition(ctx, id, func(_ db.Tx, cur db.Sandbox) (*Change, error) {
		if cur.Status != sandbox.Running && cur.Status != sandbox.Paused {
			return nil, nil
		}
		return &Change{To: sandbox.Unknown, Source: sandbox.SourceReconciler, Reason: sandbox.ReasonCannotVerify, Detail: cause.Error()}, nil
	})
	return err
}

// Verify queues a verification of the founder's sandbox now.
func (s *Service) Verify(ctx context.Context, owner, sandboxID uuid.UUID) error {
	if _, err := s.overview.OwnedSandbox(ctx, owner, sandboxID); err != nil {
		return err
	}
	_, err := s.river.Insert(ctx, VerifyArgs{SandboxID: sandboxID}, nil)
	return err
}

// VerifyStale queues a verification of each sandbox shown that was last verified too long ago.
// Pages call it when they are opened (never when a card is rendered for the live feed), and
// nobody waits for the provider: the page shows the database's state, and the verification's
// outcome arrives like any other change. A failure to queue is logged, not the page's failure.
func (s *Service) VerifyStale(ctx context.Context, shown ...overview.ProjectView) {
	now := time.Now()
	for _, v := range shown {
		if v.Sandbox == nil || !s.cfg.verifyDue(*v.Sandbox, now) {
			continue
		}
		if _, err := s.river.Insert(ctx, VerifyArgs{SandboxID: v.Sandbox.ID}, nil); err != nil {
			s.log.Warn("queue verification", "sandbox_id", v.Sandbox.ID, "err", err)
		}
	}
}

type verifyWorker struct {
	river.WorkerDefaults[VerifyArgs]
	s *Service
}

func (w *verifyWorker) Timeout(*river.Job[VerifyArgs]) time.Duration { return time.Minute }

func (w *verifyWorker) Work(ctx context.Context, job *river.Job[VerifyArgs]) error {
	s := w.s
	sb, err := s.q.GetSandbox(ctx, job.Args.SandboxID)
	if err != nil {
		return db.MapError(err)
	}
	if sb.ProviderID == nil {
		return nil
	}
	switch sb.Status {
	case sandbox.Running, sandbox.Paused, sandbox.Unknown:
	default:
		return nil
	}
	ps, err := s.providerGet(ctx, *sb.ProviderID)
	if err != nil {
		if _, ferr := s.q.IncrementVerificationFailures(ctx, sb.ID); ferr != nil {
			return ferr
		}
		return s.markUnknown(ctx, sb.ID, err)
	}
	return s.syncTo(ctx, sb.ID, ps, sandbox.SourceReconciler)
}

type reconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	s *Service
}

func (w *reconcileWorker) Timeout(*river.Job[ReconcileArgs]) time.Duration { return 2 * time.Minute }

func (w *reconcileWorker) Work(ctx context.Context, _ *river.Job[ReconcileArgs]) error {
	return w.s.reconcile(ctx)
}

// reconcile lists the provider's sandboxes (a few paginated calls, not one per sandbox) and
// corrects every row in running, paused or unknown that disagrees. A row missing from the list
// is confirmed with one GET before it is declared gone, so a sandbox that changed state while
// the list was paged is not misread. The rows that agree, nearly all of them, only need their
// verification time, written a batch at a time while the next pages are fetched: a pass costs
// about its list walk (docs/architecture.md, "Reconcile").
func (s *Service) reconcile(ctx context.Context) error {
	rows, err := s.q.ListReconcileRows(ctx)
	if err != nil {
		return err
	}
	byProvider := make(map[string]db.ListReconcileRowsRow, len(rows))
	for _, sb := range rows {
		byProvider[sb.ProviderID] = sb
	}
	listed := make(map[string]ProviderState, len(rows))
	marker := s.startMarkingVerified(ctx)
	var agree db.MarkSandboxesVerifiedParams
	err = s.providerWalk(ctx, func(id string, ps ProviderState) {
		listed[id] = ps
		if sb, ok := byProvider[id]; ok && sb.Status == ps.State {
			agree.Ids, agree.Statuses = append(agree.Ids, sb.ID), append(agree.Statuses, string(sb.Status))
			if len(agree.Ids) == verifiedBatch {
				marker.batches <- agree
				agree = db.MarkSandboxesVerifiedParams{}
			}
		}
	})
	if len(agree.Ids) > 0 {
		marker.batches <- agree
	}
	if merr := marker.wait(); merr != nil {
		return merr
	}
	if err != nil {
		for _, sb := range rows {
			if sb.Status == sandbox.Unknown {
				continue // already says so; markUnknown would change nothing
			}
			if uerr := s.markUnknown(ctx, sb.ID, err); uerr != nil {
				return uerr
			}
		}
		return nil // the next sweep tries again; the failure is recorded as unknown states
	}
	// The sizes the provider reports, where they differ from the rows': what a sandbox costs
	// awake from its next start on (docs/operations.md).
	var sizes db.SetSandboxSizesParams
	for _, sb := range rows {
		ps, ok := listed[sb.ProviderID]
		if ok && ps.VCPUs > 0 && ps.MemoryMiB > 0 && (ps.VCPUs != sb.Vcpus || ps.MemoryMiB != sb.MemoryMib) {
			sizes.ProviderIds = append(sizes.ProviderIds, sb.ProviderID)
			sizes.Vcpus, sizes.MemoryMib = append(sizes.Vcpus, ps.VCPUs), append(sizes.MemoryMib, ps.MemoryMiB)
		}
		if ok && ps.State == sb.Status {
			continue // marked verified during the walk
		}
		if !ok {
			ps, err = s.providerGet(ctx, sb.ProviderID)
			if err != nil {
				if uerr := s.markUnknown(ctx, sb.ID, err); uerr != nil {
					return uerr
				}
				continue
			}
		}
		if err := s.syncTo(ctx, sb.ID, ps, sandbox.SourceReconciler); err != nil && !errors.Is(err, ErrStale) {
			return err
		}
	}
	if len(sizes.ProviderIds) > 0 {
		if err := s.q.SetSandboxSizes(ctx, sizes); err != nil {
			return err
		}
	}
	return s.killOrphans(ctx, listed, rows)
}

// verifiedBatch is how many agreeing rows one statement marks verified: 20 pages of the list,
// about as long to write as those pages take to fetch.
const verifiedBatch = 2000

// verifiedMarker writes the batches of agreeing rows sent to it, one statement each, on a
// goroutine of its own; wait ends it and answers the first error.
type verifiedMarker struct {
	batches chan db.MarkSandboxesVerifiedParams
	done    chan error
}

func (s *Service) startMarkingVerified(ctx context.Context) *verifiedMarker {
	m := &verifiedMarker{batches: make(chan db.MarkSandboxesVerifiedParams, 2), done: make(chan error, 1)}
	go func() {
		var err error
		for b := range m.batches {
			if err == nil {
				err = s.q.MarkSandboxesVerified(ctx, b) // after an error the rest are drained, not written
			}
		}
		m.done <- err
	}()
	return m
}

func (m *verifiedMarker) wait() error {
	close(m.batches)
	return <-m.done
}

// orphanGhosts remembers, for this instance, the listed sandboxes whose orphan kill answered 404
// on the last pass (docs/states.md, "Flows"): for each, whether the disagreement was logged.
// Each instance that runs the reconcile says it once; nothing is stored for it.
type orphanGhosts struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (g *orphanGhosts) take() map[string]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := g.ids
	g.ids = nil
	return ids
}

func (g *orphanGhosts) put(ids map[string]bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ids = ids
}

// killOrphans kills the listed provider sandboxes (all carry Sandman's metadata) that no row
// wants, once they are older than OrphanAge: one created just before a crash, whose row never
// learnt its id, or one whose row has ended but the kill never reached the provider. Each runs
// up a bill until its timeout otherwise. The age leaves a build the moment between its create
// and the row's update. The rows the reconcile read before listing want theirs (one that ended
// since is killed by the next pass), so only the old enough listed sandboxes none of them names
// are asked about: a handful, where asking about every listed id cost a scan of 100,000. A kill
// that answers 404 killed nothing and is not recorded as one.
func (s *Service) killOrphans(ctx context.Context, listed map[string]ProviderState, rows []db.ListReconcileRowsRow) error {
	named := make(map[string]bool, len(rows))
	for _, sb := range rows {
		named[sb.ProviderID] = true
	}
	bornBefore := time.Now().Add(-s.cfg.OrphanAge)
	var ids []string
	for id, ps := range listed {
		if !named[id] && !ps.StartedAt.IsZero() && ps.StartedAt.Before(bornBefore) {
			ids = append(ids, id)
		}
	}
	ghosts := s.ghosts.take()
	defer func() { s.ghosts.put(ghosts) }()
	if len(ids) == 0 {
		ghosts = nil
		return nil
	}
	wanted, err := s.q.ListWantedProviderIDs(ctx, ids)
	if err != nil {
		return err
	}
	// Only the ids whose kill answers 404 on this pass are remembered: one the provider stops
	// listing is forgotten, so the memory is never more than the ghosts listed now.
	seen := ghosts
	ghosts = map[string]bool{}
	for _, id := range ids {
		if slices.Contains(wanted, id) {
			continue
		}
		ps := listed[id]
		err := s.providerKill(ctx, id)
		if isNotFound(err) {
			// Nothing to kill: no orphan kill to count or record. Once is a race (killed between
			// the list and the kill); listed again after it, the provider's list disagrees with
			// its own kill, which is said once, not every pass. The kill is still asked for on
			// each pass: were the list right, it is the only way to stop the bill.
			said, again := seen[id]
			if again && !said {
				s.log.Warn("the provider still lists a sandbox its kill answered not found for: its list disagrees with its kill",
					"provider_id", id, "started_at", ps.StartedAt, "state", ps.State)
				said = true
			}
			ghosts[id] = said
			continue
		}
		if err != nil {
			s.log.Warn("kill an orphaned sandbox", "provider_id", id, "err", err)
			continue // the next reconcile tries again
		}
		s.metrics.orphansKilled.Inc()
		// Recorded for the console of every instance (the counter is this instance's).
		if err := s.q.InsertOrphanKill(ctx, db.InsertOrphanKillParams{ProviderID: id, StartedAt: &ps.StartedAt}); err != nil {
			return err
		}
		s.log.Warn("killed an orphaned sandbox: the provider had it, no sandbox row wanted it",
			"provider_id", id, "started_at", ps.StartedAt, "state", ps.State)
	}
	return nil
}
