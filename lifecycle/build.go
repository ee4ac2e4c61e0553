package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"sandman/db"
)

// Build stages, shown under "Preparing sandbox…".
const (
	StageCreating   = "creating"
	StageUploading  = "uploading"
	StageInstalling = "installing"
	StageStarting   = "starting"
	StageWaiting    = "waiting"
)

// appDir is where a build's files live inside the sandbox.
const appDir = "/home/user/app"

// buildFailure is an error whose text a founder can read on the build page.
type buildFailure struct{ msg string }

func (e *buildFailure) Error() string { return e.msg }

func failf(format string, args ...any) error { return &buildFailure{msg: fmt.Sprintf(format, args...)} }

type buildWorker struct {
	river.WorkerDefaults[BuildArgs]
	s *Service
}

func (w *buildWorker) Timeout(*river.Job[BuildArgs]) time.Duration {
	return w.s.cfg.buildJobTimeout()
}

func (w *buildWorker) Work(ctx context.Context, job *river.Job[BuildArgs]) error {
	s := w.s
	sb, err := s.q.GetSandbox(ctx, job.Args.SandboxID)
	if err != nil {
		return db.MapError(err)
	}
	if sb.Status != Starting {
		return nil // finished, replaced or killed meanwhile: nothing to do
	}
	build, err := s.q.GetBuild(ctx, sb.BuildID)
	if err != nil {
		return err
	}
	project, err := s.q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: sb.ProjectID, OwnerID: sb.OwnerID})
	if err != nil {
		return db.MapError(err)
	}
	err = s.runBuild(ctx, sb, build, project)
	if err == nil {
		return nil
	}
	var bf *buildFailure
	final := errors.As(err, &bf) || job.Attempt >= job.MaxAttempts
	if !final {
		return err // River retries; every step is idempotent
	}
	msg := "The build could not finish: " + err.Error()
	if bf != nil {
		msg = bf.msg
	}
	return s.failBuild(context.WithoutCancel(ctx), sb.ID, msg)
}

// runBuild walks the build's steps, each under its own deadline.
func (s *Service) runBuild(ctx context.Context, sb db.Sandbox, build db.Build, project db.Project) error {
	stage := func(name string) error {
		if err := s.q.SetBuildStage(ctx, db.SetBuildStageParams{ID: build.ID, Stage: name}); err != nil {
			return err
		}
		return s.notifyUnchanged(ctx, sb) // "Preparing sandbox…" shows the stage as it goes
	}
	if err := stage(StageCreating); err != nil {
		return err
	}
	if sb.ProviderID == nil {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
		created, err := s.providerCreate(cctx, sb, project)
		cancel()
		if err != nil {
			return fmt.Errorf("create the sandbox: %w", err)
		}
		preview := s.previewURL(created, project.Port)
		sb, err = s.q.SetSandboxProvider(ctx, db.SetSandboxProviderParams{
			ID: sb.ID, ProviderID: &created.ID, PreviewURL: preview, EnvdToken: created.EnvdToken,
			ProviderDomain: created.Domain, EndAt: &created.EndAt,
		})
		if err != nil {
			// The row moved on (replaced or failed) while we created: give the sandbox back.
			_ = s.providerKill(context.WithoutCancel(ctx), created.ID)
			if db.IsNotFound(err) {
				return nil
			}
			return err
		}
	}
	handle := s.handleOf(sb)

	if err := stage(StageUploading); err != nil {
		return err
	}
	files, err := s.q.ListBuildFiles(ctx, build.ID)
	if err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, s.cfg.UploadTimeout)
	err = s.providerUpload(uctx, handle, files)
	cancel()
	if err != nil {
		return fmt.Errorf("upload the files: %w", err)
	}

	if strings.TrimSpace(project.InstallCommand) != "" {
		if err := stage(StageInstalling); err != nil {
			return err
		}
		ictx, cancel := context.WithTimeout(ctx, s.cfg.InstallTimeout)
		code, output, err := s.providerRun(ictx, handle, project.InstallCommand)
		cancel()
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return failf("The install command %q did not finish within %s.", project.InstallCommand, s.cfg.InstallTimeout)
		case err != nil:
			return fmt.Errorf("run the install command: %w", err)
		case code != 0:
			return failf("The install command %q failed with exit code %d: %s", project.InstallCommand, code, tail(output, 600))
		}
	}

	if err := stage(StageStarting); err != nil {
		return err
	}
	if err := s.ensureDevServer(ctx, handle, project, sb.PreviewURL, false); err != nil {
		return err
	}
	if err := stage(StageWaiting); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	err = s.waitReady(rctx, sb.PreviewURL)
	cancel()
	if err != nil {
		return failf("The dev server did not answer on port %d within %s. Check the start command %q and that the server listens on 0.0.0.0:%d.",
			project.Port, s.cfg.ReadyTimeout, project.StartCommand, project.Port)
	}
	return s.finishBuild(ctx, sb.ID)
}

// ensureDevServer starts the dev server unless it already answers (always when force).
func (s *Service) ensureDevServer(ctx context.Context, h sandboxHandle, project db.Project, previewURL string, force bool) error {
	if !force {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		up := s.answers(pctx, previewURL)
		cancel()
		if up {
			return nil
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.providerStart(sctx, h, project.StartCommand, project.Port); err != nil {
		return fmt.Errorf("start the dev server: %w", err)
	}
	return nil
}

// finishBuild marks the build Ready and the sandbox running, and schedules its idle pause.
func (s *Service) finishBuild(ctx context.Context, sandboxID uuid.UUID) error {
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, sandboxID)
		if err != nil {
			return err
		}
		if sb.Status != Starting {
			return nil
		}
		if err := tx.FinishBuild(ctx, db.FinishBuildParams{ID: sb.BuildID, Status: db.BuildStatusReady}); err != nil {
			return err
		}
		sb, err = apply(ctx, tx, sb, Change{To: Running, Source: db.EventSourceBuild, Reason: "ready", Verified: true})
		if err != nil {
			return err
		}
		return s.schedulePause(ctx, tx, sb, true)
	})
}

// failBuild marks the build Failed with its reason and stops the sandbox.
func (s *Service) failBuild(ctx context.Context, sandboxID uuid.UUID, reason string) error {
	var providerID *string
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, sandboxID)
		if err != nil {
			return err
		}
		if err := tx.FinishBuild(ctx, db.FinishBuildParams{ID: sb.BuildID, Status: db.BuildStatusFailed, Error: reason}); err != nil {
			return err
		}
		if sb.Status != Starting {
			return nil
		}
		providerID = sb.ProviderID
		if err := tx.SetSandboxKillRequested(ctx, sb.ID); err != nil {
			return err
		}
		_, err = apply(ctx, tx, sb, Change{To: Terminated, Source: db.EventSourceBuild, Reason: reasonBuildFailed, KilledReason: ptr(reasonBuildFailed)})
		if err != nil {
			return err
		}
		if providerID != nil {
			_, err = s.river.InsertTx(ctx, tx.Pgx(), KillArgs{ProviderID: *providerID}, nil)
		}
		return err
	})
	s.log.Warn("build failed", "sandbox_id", sandboxID.String(), "reason", reason)
	return err
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
