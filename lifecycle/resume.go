package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"sandman/apperr"
	"sandman/db"
)

// Resume moves a founder's paused sandbox to resuming at once and resumes it in the background.
func (s *Service) Resume(ctx context.Context, owner, sandboxID uuid.UUID) (db.Sandbox, error) {
	if _, err := s.OwnedSandbox(ctx, owner, sandboxID); err != nil {
		return db.Sandbox{}, err
	}
	var out db.Sandbox
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, sandboxID)
		if err != nil {
			return db.MapError(err)
		}
		out = sb
		switch sb.Status {
		case Resuming, Running:
			return nil // a double click, or another tab was first
		case Paused, Unknown:
		default:
			return apperr.New(apperr.KindConflict, "not_paused", "This preview cannot be resumed; rebuild it instead.")
		}
		out, err = s.startResume(ctx, tx, sb, ResumeArgs{SandboxID: sb.ID})
		return err
	})
	return out, err
}

// startResume moves the locked sandbox sb to resuming, counts it as activity and queues the
// resume job, in the caller's transaction: the one way a resume starts, for the founder
// (Resume) and for a visitor of the share link (VisitorWake) alike.
func (s *Service) startResume(ctx context.Context, tx db.Tx, sb db.Sandbox, args ResumeArgs) (db.Sandbox, error) {
	reason := "resume"
	if args.Visitor {
		reason = reasonVisitorWake
	}
	out, err := apply(ctx, tx, sb, Change{To: Resuming, Source: args.source(), Reason: reason})
	if err != nil {
		return out, err
	}
	if err := tx.TouchActivity(ctx, sb.ID); err != nil {
		return out, err
	}
	_, err = s.river.InsertTx(ctx, tx.Pgx(), args, nil)
	return out, err
}

type resumeWorker struct {
	river.WorkerDefaults[ResumeArgs]
	s *Service
}

func (w *resumeWorker) Timeout(*river.Job[ResumeArgs]) time.Duration {
	return w.s.cfg.resumeJobTimeout()
}

func (w *resumeWorker) Work(ctx context.Context, job *river.Job[ResumeArgs]) error {
	s := w.s
	sb, err := s.q.GetSandbox(ctx, job.Args.SandboxID)
	if err != nil {
		return db.MapError(err)
	}
	if sb.Status != Resuming || sb.ProviderID == nil {
		return nil
	}
	project, err := s.q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: sb.ProjectID, OwnerID: sb.OwnerID})
	if err != nil {
		return db.MapError(err)
	}
	var lastErr error
	for attempt := 1; attempt <= 2; attempt++ {
		if attempt == 2 {
			select {
			case <-time.After(s.cfg.ResumeRetryWait):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		actx, cancel := context.WithTimeout(ctx, s.cfg.ResumeTimeout)
		preview, endAt, err := s.resumeOnce(actx, sb, project)
		cancel()
		if err == nil {
			_, err = s.transition(ctx, sb.ID, func(_ db.Tx, cur db.Sandbox) (*Change, error) {
				if cur.Status != Resuming {
					return nil, nil
				}
				return &Change{To: Running, Source: job.Args.source(), Reason: "resumed", PreviewURL: &preview,
					EndAt: &endAt, ClearSnap: true, Verified: true}, nil
			})
			return err
		}
		lastErr = err
		s.log.Warn("resume attempt failed", "sandbox_id", sb.ID, "attempt", attempt, "err", err)
		if isNotFound(err) {
			break // a lost sandbox does not come back on a second try
		}
	}
	cause, reason := CauseUnreachable, reasonResumeUnreachable
	if isNotFound(lastErr) {
		cause, reason = CauseNotFound, reasonResumeNotFound
	}
	_, err = s.transition(context.WithoutCancel(ctx), sb.ID, func(_ db.Tx, cur db.Sandbox) (*Change, error) {
		if cur.Status != Resuming {
			return nil, nil
		}
		return &Change{To: ResumeFailed, Source: job.Args.source(), Reason: reason, FailureCause: cause}, nil
	})
	return err
}

// resumeOnce connects (which resumes a paused sandbox with a fresh lifetime), sets the timeout
// again, makes sure the dev server answers and returns the fresh preview URL and end time.
func (s *Service) resumeOnce(ctx context.Context, sb db.Sandbox, project db.Project) (string, time.Time, error) {
	connected, err := s.providerConnect(ctx, *sb.ProviderID)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("connect: %w", err)
	}
	if err := s.providerSetTimeout(ctx, *sb.ProviderID); err != nil && !isNotFound(err) {
		return "", time.Time{}, fmt.Errorf("set timeout: %w", err)
	} else if err != nil {
		return "", time.Time{}, err
	}
	connected.EnvdToken = firstNonEmpty(connected.EnvdToken, sb.EnvdToken)
	preview := s.previewURL(connected, project.Port)
	// After a filesystem-only snapshot nothing runs: always start the dev server again.
	coldBoot := sb.SnapshotKind != nil && *sb.SnapshotKind == db.PauseKindFilesystem
	if err := s.ensureDevServer(ctx, s.handleOf(withProvider(sb, connected)), project, preview, coldBoot); err != nil {
		return "", time.Time{}, err
	}
	if err := s.waitReady(ctx, preview); err != nil {
		return "", time.Time{}, fmt.Errorf("dev server did not answer: %w", err)
	}
	return preview, s.cfg.lifetimeEnd(time.Now()), nil
}

func withProvider(sb db.Sandbox, p providerSandbox) db.Sandbox {
	sb.EnvdToken = p.EnvdToken
	return sb
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Activity records that the founder is looking at the sandbox (the build page while visible,
// or Keep awake), moving its idle deadline. A running sandbox's pages are told, so every
// countdown to its sleep stays true.
func (s *Service) Activity(ctx context.Context, owner, sandboxID uuid.UUID) error {
	if _, err := s.OwnedSandbox(ctx, owner, sandboxID); err != nil {
		return err
	}
	sb, err := s.q.TouchSandboxActivity(ctx, db.TouchSandboxActivityParams{ID: sandboxID, OwnerID: owner})
	if db.IsNotFound(err) {
		return nil // touched within the last second already
	}
	if err != nil || sb.Status != Running {
		return err
	}
	return s.notifyUnchanged(ctx, sb)
}
