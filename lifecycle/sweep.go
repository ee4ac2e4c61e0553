package lifecycle

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"sandman/db"
	"sandman/sandbox"
)

type sweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	s *Service
}

func (w *sweepWorker) Timeout(*river.Job[SweepArgs]) time.Duration { return time.Minute }

func (w *sweepWorker) Work(ctx context.Context, _ *river.Job[SweepArgs]) error {
	return w.s.sweep(ctx)
}

// sweep is the safety net behind the build and resume jobs: it ends every sandbox stuck in
// starting or resuming past the longest its worker may take. (The idle pause needs none: its
// queue is the running rows themselves, lifecycle/idle.go.)
func (s *Service) sweep(ctx context.Context) error {
	now := time.Now()
	stuck, err := s.q.ListStuckSandboxes(ctx, db.ListStuckSandboxesParams{
		StartingBefore: now.Add(-s.cfg.buildStuckAfter()),
		ResumingBefore: now.Add(-s.cfg.resumeStuckAfter()),
	})
	if err != nil {
		return err
	}
	for _, sb := range stuck {
		switch sb.Status {
		case sandbox.Starting:
			if err := s.failBuild(ctx, sb.ID, workerLost); err != nil {
				return err
			}
		case sandbox.Resuming:
			if _, err := s.transition(ctx, sb.ID, func(_ db.Tx, cur db.Sandbox) (*Change, error) {
				if cur.Status != sandbox.Resuming {
					return nil, nil
				}
				return &Change{To: sandbox.ResumeFailed, Source: sandbox.SourceScheduler, Reason: reasonResumeTimedOut, FailureCause: ptr(sandbox.CauseUnreachable)}, nil
			}); err != nil {
				return err
			}
		}
	}
	return nil
}
