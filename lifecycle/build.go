package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"sandman/applog"
	"sandman/credits"
	"sandman/db"
	"sandman/outbox"
	"sandman/sandbox"
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

// buildFailure is why a build failed, as facts (views writes what the founder reads on the build
// page) and, when the failure was the platform's and not the founder's code, the credit refunded
// with its cause.
type buildFailure struct {
	fact sandbox.Failure
	// refund gives the build's credit back (a refund's ledger row with cause as its detail), in the
	// transaction that marks the build failed.
	refund bool
	cause  string
}

func (e *buildFailure) Error() string { return "build failed: " + string(e.fact.Code) }

// codeFailure is a failure of the founder's code (an install that exits non-zero, a dev server
// that never answers): the credit stays spent, and the facts say which command and what it
// printed.
func codeFailure(f sandbox.Failure) error { return &buildFailure{fact: f} }

// providerFailure is a build the platform failed (the provider's errors after retries, its
// circuit breaker open, the sandbox lost mid-build): the credit is refunded.
func providerFailure(cause string) *buildFailure {
	return &buildFailure{fact: sandbox.Failure{Code: sandbox.FailProvider}, refund: true, cause: cause}
}

// replacedBuild is a build a rebuild replaced before it finished.
var replacedBuild = &buildFailure{fact: sandbox.Failure{Code: sandbox.FailReplaced}}

// workerLost is a build whose worker went away (the sweep finds it stuck): Sandman's doing, so the
// credit is refunded too.
var workerLost = &buildFailure{fact: sandbox.Failure{Code: sandbox.FailWorkerLost}, refund: true,
	cause: "the worker running the build went away"}

type buildWorker struct {
	river.WorkerDefaults[BuildArgs]
	s *Service
}

func (w *buildWorker) Timeout(*river.Job[BuildArgs]) time.Duration {
	return w.s.cfg.buildJobTimeout()
}

// NextRetry spaces a build's attempts (4 s, then 16 s in production): long enough for a provider
// hiccup to pass, short for a founder who is watching.
func (w *buildWorker) NextRetry(job *river.Job[BuildArgs]) time.Time {
	return time.Now().Add(w.s.cfg.BuildRetryWait * time.Duration(job.Attempt*job.Attempt))
}

func (w *buildWorker) Work(ctx context.Context, job *river.Job[BuildArgs]) error {
	s := w.s
	sb, err := s.q.GetSandbox(ctx, job.Args.SandboxID)
	if err != nil {
		return db.MapError(err)
	}
	if sb.Status != sandbox.Starting {
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
	var f *buildFailure
	switch {
	case errors.As(err, &f):
	case isNotFound(err):
		// The sandbox was lost mid-build: no retry brings it back.
		f = providerFailure("the sandbox was lost mid-build: " + err.Error())
	case job.Attempt >= job.MaxAttempts:
		f = providerFailure("the provider failed after retries: " + err.Error())
	default:
		return err // River retries; every step is idempotent
	}
	return s.failBuild(context.WithoutCancel(ctx), sb.ID, f)
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
	w, err := s.versionFiles(ctx, build.FilesVersionID)
	if err != nil {
		return err
	}
	files, err := s.contents(ctx, sb.OwnerID, w, nil)
	if err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, s.cfg.UploadTimeout)
	err = s.providerUpload(uctx, handle, files)
	if x := w.executables(nil); err == nil && len(x) > 0 {
		err = s.providerRemove(uctx, handle, nil, x)
	}
	if err == nil {
		// The integrity check of a build: every file of its version arrived whole
		// (docs/states.md, "Integrity"); what did not is uploaded again.
		var restored []string
		if restored, err = s.healUpload(uctx, handle, sb, w); err == nil && len(restored) > 0 {
			err = s.recordBuildRestored(ctx, sb.ID, restored)
		}
	}
	cancel()
	if err != nil {
		return fmt.Errorf("upload the files: %w", err)
	}

	if strings.TrimSpace(project.InstallCommand) != "" {
		if err := stage(StageInstalling); err != nil {
			return err
		}
		ictx, cancel := context.WithTimeout(ctx, s.cfg.InstallTimeout)
		code, output, err := s.providerInstall(ictx, handle, project.InstallCommand, s.runOf(sb, w.version.Number, applog.SourceInstall))
		cancel()
		if err == nil && code != 0 || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			// The command's end is the founder's doing unless the sandbox itself went away.
			if err := s.stillThere(ctx, sb, code < 0); err != nil {
				return err
			}
		}
		if f := s.installFailure(ctx, project, code, output, err); f.Failed() {
			return codeFailure(f)
		} else if err != nil {
			return fmt.Errorf("run the install command: %w", err)
		}
	}

	if err := stage(StageStarting); err != nil {
		return err
	}
	run, err := s.newAppRun(ctx, sb, w.version.Number, applog.SourceApp)
	if err != nil {
		return err
	}
	if err := s.ensureProxy(ctx, handle, project); err != nil {
		return err
	}
	d, err := s.startDevServer(ctx, handle, project, s.appURL(sb, project.Port), run, false)
	if err != nil {
		return err
	}
	if err := stage(StageWaiting); err != nil {
		d.abandon()
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	st, err := s.waitUp(rctx, s.appURL(sb, project.Port), d)
	cancel()
	switch {
	case st.exited:
		// The founder's code: the build fails at once, saying so (docs/states.md, "The app").
		s.settle(ctx, d, st)
		if err := s.stillThere(ctx, sb, st.code < 0); err != nil {
			return err
		}
		return codeFailure(st.failure(project, s.cfg.ReadyTimeout))
	case err != nil:
		d.abandon()
		if ctx.Err() != nil {
			return ctx.Err() // the job's own time ran out: not the dev server's doing
		}
		if err := s.stillThere(ctx, sb, false); err != nil {
			return err
		}
		return codeFailure(st.failure(project, s.cfg.ReadyTimeout))
	}
	// What the install and start commands changed of the stored files is the app's from now on.
	s.lookAtFiles(ctx, handle, sb)
	if err := s.finishBuild(ctx, sb.ID, st.appOutcome(run)); err != nil {
		d.abandon()
		return err
	}
	s.settle(ctx, d, st)
	return nil
}

// runOf names a new run of source in sb, of version.
func (s *Service) runOf(sb db.Sandbox, version int32, source applog.Source) applog.Run {
	return applog.Run{ProjectID: sb.ProjectID, SandboxID: sb.ID, Version: version, Source: source, ID: uuid.New()}
}

// recordBuildRestored records the files a build's upload check restored, in its history.
func (s *Service) recordBuildRestored(ctx context.Context, sandboxID uuid.UUID, restored []string) error {
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, sandboxID)
		if err != nil || sb.Status != sandbox.Starting {
			return err
		}
		return recordRestored(ctx, tx, sb, sandbox.SourceBuild, restored)
	})
	if err == nil {
		s.metrics.filesRestored.WithLabelValues("build").Add(float64(len(restored)))
	}
	return err
}

// stillThere checks, before a failed command is blamed on the founder's code, that the provider
// still has the sandbox: a sandbox lost mid-build also ends its commands. It answers a platform
// failure when the sandbox is gone, and the provider's error when it cannot tell. A command
// killed by a signal (signalled) is what a sandbox being killed looks like from inside, moments
// before the provider stops listing it: then it looks a second time, shortly after.
func (s *Service) stillThere(ctx context.Context, sb db.Sandbox, signalled bool) error {
	for look := 1; ; look++ {
		ps, err := s.providerGet(ctx, *sb.ProviderID)
		if err != nil {
			return fmt.Errorf("check the sandbox after a failed command: %w", err)
		}
		if !ps.Found {
			return providerFailure("the sandbox was lost mid-build")
		}
		if !signalled || look == 2 {
			return nil
		}
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// outputTail is how much of a failed command's output is kept, for the build page.
const outputTail = 1500

// finishBuild marks the build Ready and the sandbox running, and schedules its idle pause. A
// preview that has just become ready counts as used: its idle timeout starts now, not when its
// build began (a build longer than the timeout would otherwise be paused the moment it is ready).
func (s *Service) finishBuild(ctx context.Context, sandboxID uuid.UUID, app appChange) error {
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, sandboxID)
		if err != nil {
			return err
		}
		if sb.Status != sandbox.Starting {
			return nil
		}
		if _, err := tx.FinishBuild(ctx, db.FinishBuildParams{ID: sb.BuildID, Status: sandbox.BuildReady}); err != nil {
			return err
		}
		ready := outbox.OfSandbox(outbox.BuildReady, sb, string(sandbox.BuildReady))
		ready.State, ready.Version = string(sandbox.BuildReady), app.version
		if err := outbox.Record(ctx, tx, ready); err != nil {
			return err
		}
		if err := tx.TouchActivity(ctx, sb.ID); err != nil {
			return err
		}
		app.announced = true // by the move to running below
		if _, _, err := s.setApp(ctx, tx, sb.ID, app); err != nil {
			return err
		}
		sb, err = apply(ctx, tx, sb, Change{To: sandbox.Running, Source: sandbox.SourceBuild, Reason: sandbox.ReasonReady, Verified: true})
		if err != nil {
			return err
		}
		return s.nowRunning(ctx, tx, sb, true)
	})
}

// failBuild marks the build failed, with why, and stops its sandbox, all in
// one transaction; a platform failure refunds the build's credit in the same transaction.
func (s *Service) failBuild(ctx context.Context, sandboxID uuid.UUID, f *buildFailure) error {
	var providerID *string
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, sandboxID)
		if err != nil {
			return err
		}
		if err := s.finishFailed(ctx, tx, sb, f); err != nil {
			return err
		}
		if sb.Status != sandbox.Starting {
			return nil
		}
		providerID = sb.ProviderID
		if err := tx.SetSandboxKillRequested(ctx, sb.ID); err != nil {
			return err
		}
		reason := reasonBuildFailed
		if f.refund {
			reason = reasonBuildFailedRefunded
		}
		_, err = apply(ctx, tx, sb, Change{To: sandbox.Terminated, Source: sandbox.SourceBuild, Reason: reason, KilledReason: ptr(reasonBuildFailed)})
		if err != nil {
			return err
		}
		if providerID != nil {
			_, err = s.river.InsertTx(ctx, tx.Pgx(), KillArgs{ProviderID: *providerID}, nil)
		}
		return err
	})
	s.log.Warn("build failed", "sandbox_id", sandboxID.String(), "code", f.fact.Code, "refunded", f.refund, "cause", f.cause)
	return err
}

// finishFailed marks the sandbox's build failed (once: a build already finished stays as it
// is) and, for a platform failure, gives its credit back with a ledger row saying why.
func (s *Service) finishFailed(ctx context.Context, tx db.Tx, sb db.Sandbox, f *buildFailure) error {
	code, exit, port, limit := db.FailureColumns(f.fact)
	n, err := tx.FinishBuild(ctx, db.FinishBuildParams{ID: sb.BuildID, Status: sandbox.BuildFailed, FailureCode: code,
		FailureDetail: f.fact.Output, FailureCommand: f.fact.Command, FailureExitCode: exit, FailurePort: port, FailureLimitMs: limit})
	if err != nil || n == 0 {
		return err
	}
	failed := outbox.OfSandbox(outbox.BuildFailed, sb, string(f.fact.Code))
	failed.State = string(sandbox.BuildFailed)
	if err := outbox.Record(ctx, tx, failed); err != nil {
		return err
	}
	if !f.refund {
		return nil
	}
	return credits.Refund(ctx, tx, sb.OwnerID, sb.BuildID, truncate(f.cause, maxDetail))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
