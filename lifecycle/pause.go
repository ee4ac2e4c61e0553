package lifecycle

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"sandman/apperr"
	"sandman/db"
	"sandman/sandbox"
)

// schedulePause arranges the pause of a sandbox that now runs: at once when a build just became
// Ready with SANDMAN_PAUSE_AFTER_READY=immediate, else at its idle deadline, by the idle queue,
// where a running row already is: the queue's loop is only told its next deadline may be
// nearer (lifecycle/idle.go), when it is: the loop sleeps idleMaxSleep at most, so a deadline
// further than that (twice, for clocks a little apart) is met by its own next look, and a wake
// would only cost its round of queries. Only the build's Ready pauses at once: a resumed
// sandbox is one the founder asked to see.
func (s *Service) schedulePause(ctx context.Context, tx db.Tx, sb db.Sandbox, buildReady bool) error {
	if buildReady && s.cfg.PauseAfterReady == "immediate" {
		_, err := s.river.InsertTx(ctx, tx.Pgx(), PauseArgs{SandboxID: sb.ID, Version: sb.Version, Ready: true}, nil)
		return err
	}
	if s.cfg.IdleDeadline(sb).After(time.Now().Add(2 * idleMaxSleep)) {
		return nil
	}
	return idleWake(ctx, tx)
}

// pauseCause is why a sandbox is paused: the event's source and its reason, typed together so
// neither is guessed from the other.
type pauseCause struct {
	source sandbox.Source
	reason sandbox.Reason
}

var (
	pauseIdle       = pauseCause{sandbox.SourceScheduler, sandbox.ReasonIdle}
	pauseAfterBuild = pauseCause{sandbox.SourceScheduler, sandbox.ReasonAfterBuild}
	pauseRequested  = pauseCause{sandbox.SourceUser, sandbox.ReasonRequested}
	pauseByOperator = pauseCause{sandbox.SourceOperator, sandbox.ReasonRequested}
)

// cause is why the job pauses its sandbox.
func (a PauseArgs) cause() pauseCause {
	switch {
	case a.Idle:
		return pauseIdle
	case a.Ready:
		return pauseAfterBuild
	case a.Operator:
		return pauseByOperator
	}
	return pauseRequested
}

type pauseWorker struct {
	river.WorkerDefaults[PauseArgs]
	s *Service
}

func (w *pauseWorker) Timeout(*river.Job[PauseArgs]) time.Duration { return pauseJobTimeout }

func (w *pauseWorker) Work(ctx context.Context, job *river.Job[PauseArgs]) error {
	s := w.s
	sb, err := s.q.GetSandbox(ctx, job.Args.SandboxID)
	if err != nil {
		return db.MapError(err)
	}
	if sb.Status != sandbox.Running || sb.ProviderID == nil {
		return nil
	}
	if (job.Args.Idle || job.Args.Ready) && sb.Version != job.Args.Version {
		return nil // the sandbox stopped running since: this stretch is over
	}
	if job.Args.Idle && touchedSinceClaim(sb) {
		return s.returnToIdleQueue(ctx, sb)
	}
	return s.pauseNow(ctx, sb, job.Args.cause())
}

// pauseNow asks the provider to pause (already paused counts as success) and records it.
func (s *Service) pauseNow(ctx context.Context, sb db.Sandbox, cause pauseCause) error {
	project, err := s.q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: sb.ProjectID, OwnerID: sb.OwnerID})
	if err != nil {
		return db.MapError(err)
	}
	keepMemory := project.PauseKind == sandbox.PauseMemory
	// Say so first: the provider's own report of this pause may reach the reconcile or the
	// events reader before the transition below, and must not be recorded as the provider's.
	if err := s.q.SetSandboxPauseRequested(ctx, sb.ID); err != nil {
		return err
	}
	// What the app changed of its stored files while it ran is its own: the integrity check
	// after the resume leaves those alone (docs/states.md, "Integrity").
	s.lookAtFiles(ctx, s.handleOf(sb), sb)
	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = s.providerPause(pctx, *sb.ProviderID, keepMemory)
	cancel()
	if err != nil {
		if isNotFound(err) {
			return s.markGone(ctx, sb, sandbox.SourceScheduler, s.providerKillReason(ctx, *sb.ProviderID))
		}
		return err
	}
	kind := project.PauseKind
	_, err = s.transition(ctx, sb.ID, func(_ db.Tx, cur db.Sandbox) (*Change, error) {
		if cur.Status != sandbox.Running && cur.Status != sandbox.Unknown {
			return nil, nil
		}
		return &Change{To: sandbox.Paused, Source: cause.source, Reason: cause.reason, SnapshotKind: &kind, Verified: true}, nil
	})
	return err
}

// RequestPause pauses a founder's running sandbox in the background (idempotent).
func (s *Service) RequestPause(ctx context.Context, owner, sandboxID uuid.UUID) (db.Sandbox, error) {
	sb, err := s.overview.OwnedSandbox(ctx, owner, sandboxID)
	if err != nil {
		return sb, err
	}
	switch sb.Status {
	case sandbox.Paused:
		return sb, nil
	case sandbox.Running, sandbox.Unknown:
		_, err := s.river.Insert(ctx, PauseArgs{SandboxID: sb.ID, Version: sb.Version}, nil)
		return sb, err
	}
	return sb, apperr.New(apperr.KindConflict, codeNotRunning, "Only a running preview can be paused.")
}

// transition reads the sandbox under a row lock, lets decide pick the change (nil: none) and
// applies it, all in one transaction. decide must write through tx: the row is locked, so a
// write on another connection would wait for this transaction forever.
func (s *Service) transition(ctx context.Context, id uuid.UUID, decide func(db.Tx, db.Sandbox) (*Change, error)) (db.Sandbox, error) {
	var out db.Sandbox
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, id)
		if err != nil {
			return db.MapError(err)
		}
		out, err = s.transitionLocked(ctx, tx, sb, decide)
		return err
	})
	return out, err
}

// transitionLocked is transition inside the caller's transaction, for a row it has read under
// its lock (a webhook's group, which stores deliveries and applies them together).
func (s *Service) transitionLocked(ctx context.Context, tx db.Tx, sb db.Sandbox, decide func(db.Tx, db.Sandbox) (*Change, error)) (db.Sandbox, error) {
	c, err := decide(tx, sb)
	if err != nil || c == nil {
		return sb, err
	}
	out, err := apply(ctx, tx, sb, *c)
	if err != nil {
		return out, err
	}
	if c.To == sandbox.Running {
		return out, s.nowRunning(ctx, tx, out, false)
	}
	return out, nil
}
