package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sandman/envvars"
	"sandman/versions"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"sandman/applog"
	"sandman/db"
	"sandman/outbox"
	"sandman/sandbox"
)

// Putting a version into a sandbox (docs/states.md, "Versions"). A new version reaches a running
// preview in place, at once and free: the deploy job converges its files to the version (one
// upload, one removal), runs the install command when the dependencies changed, then restarts
// the dev server and waits for it, or, for a project whose dev server reloads changed files
// itself, leaves it to the server. The preview stays running throughout; the apply's progress is
// announced on the sandbox's live channel ("Applying version 8…") and its outcome recorded in
// its history ("Version 8 is live …", "Version 8 didn't start: …"). A sleeping preview is never
// woken for a version: its resume converges to the current version (ensureIntact). A sandbox
// building, resuming or pausing gets the version when that ends (nowRunning). The newest
// version always wins; none is applied twice.

// Hooks are what the lifecycle does in the transactions of the packages that change what a
// preview runs: a new version (versions.New's hook), a change of variables (envvars.New's).
type Hooks struct {
	VersionMade versions.Hook
	EnvChanged  envvars.Hook
}

// Hooks returns the lifecycle's hooks, to give to versions.New and envvars.New.
func (s *Service) Hooks() Hooks { return Hooks{VersionMade: s.versionMade, EnvChanged: s.envChanged} }

// versionMade is the versions package's hook, in the transaction that makes a version: the
// project's running preview gets an apply job, and its pages are told (the card's "v9 waiting").
// The sandbox row is locked, so an apply under way either sees this version before it lets go or
// lets go before this job can run (deployWorker).
func (s *Service) versionMade(ctx context.Context, tx db.Tx, owner uuid.UUID, v db.Version) error {
	if err := outbox.Record(ctx, tx, outbox.Event{Owner: owner, Type: outbox.VersionCreated, ProjectID: v.ProjectID,
		Version: v.Number}); err != nil {
		return err
	}
	sb, err := tx.GetCurrentSandboxByProjectForUpdate(ctx, v.ProjectID)
	if db.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if sb.Status == sandbox.Running {
		if _, err := s.river.InsertTx(ctx, tx.Pgx(), DeployArgs{SandboxID: sb.ID}, nil); err != nil {
			return err
		}
	}
	return notifyInTx(ctx, tx, sb)
}

// nowRunning is what follows every move to running: the idle pause is scheduled, and a version
// made while the sandbox was building, resuming or pausing is applied.
func (s *Service) nowRunning(ctx context.Context, tx db.Tx, sb db.Sandbox, buildReady bool) error {
	if err := s.schedulePause(ctx, tx, sb, buildReady); err != nil {
		return err
	}
	cur, err := tx.GetCurrentVersion(ctx, sb.ProjectID)
	if err != nil {
		return err
	}
	rev, err := tx.GetProjectEnvRevision(ctx, sb.ProjectID)
	if err != nil || cur.ID == sb.DeployedVersionID && rev == sb.EnvRevision {
		return err
	}
	_, err = s.river.InsertTx(ctx, tx.Pgx(), DeployArgs{SandboxID: sb.ID}, nil)
	return err
}

// notifyInTx announces, at commit, a sandbox whose pages should be drawn again.
func notifyInTx(ctx context.Context, tx db.Tx, sb db.Sandbox) error {
	return db.NotifySandbox(ctx, tx, sb.ID, sb.OwnerID)
}

type deployWorker struct {
	river.WorkerDefaults[DeployArgs]
	s *Service
}

// deployTimeout bounds one job's applies; a claim older than it belongs to a worker that went
// away, and the next job takes it over.
func (s *Service) deployTimeout() time.Duration {
	return s.cfg.UploadTimeout + s.cfg.InstallTimeout + s.cfg.ReadyTimeout + time.Minute
}

func (w *deployWorker) Timeout(*river.Job[DeployArgs]) time.Duration { return w.s.deployTimeout() }

func (w *deployWorker) Work(ctx context.Context, job *river.Job[DeployArgs]) error {
	s := w.s
	sb, err := s.q.GetSandbox(ctx, job.Args.SandboxID)
	if err != nil {
		return db.MapError(err)
	}
	if sb.Status != sandbox.Running || sb.ProviderID == nil {
		return nil // a sandbox that is not running gets the version when it runs again
	}
	to, err := s.currentFiles(ctx, sb.ProjectID)
	if err != nil {
		return err
	}
	rev, err := s.q.GetProjectEnvRevision(ctx, sb.ProjectID)
	if err != nil || to.version.ID == sb.DeployedVersionID && rev == sb.EnvRevision && sb.DeployingVersionID == nil {
		return err
	}
	sb, err = s.q.ClaimSandboxDeploy(ctx, db.ClaimSandboxDeployParams{ID: sb.ID, VersionID: &to.version.ID, JobID: &job.ID,
		StaleSecs: s.deployTimeout().Seconds()})
	if db.IsNotFound(err) {
		return nil // another apply runs: it applies the newest version before it lets go
	}
	if err != nil {
		return err
	}
	if sb.DeployedVersionID == to.version.ID && sb.EnvRevision >= rev { // another apply finished it between the read and the claim
		return s.letGo(ctx, sb, nil)
	}
	project, err := s.q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: sb.ProjectID, OwnerID: sb.OwnerID})
	if err != nil {
		return s.letGo(ctx, sb, db.MapError(err))
	}
	for {
		if err := s.notifyUnchanged(ctx, sb); err != nil { // "Applying version N…"
			return s.letGo(ctx, sb, err)
		}
		from, err := s.versionFiles(ctx, sb.DeployedVersionID)
		if err != nil {
			return s.letGo(ctx, sb, err)
		}
		out, err := s.deployOnce(ctx, sb, project, from, to)
		if err != nil && out.dev != nil {
			out.dev.abandon()
		}
		if err != nil {
			s.log.Warn("apply a version", "sandbox_id", sb.ID, "version", to.version.Number, "err", err)
			return s.letGo(ctx, sb, err) // River tries again; the files converge from wherever they are
		}
		next, more, err := s.deployed(ctx, sb.ID, to, out)
		if out.dev != nil {
			if err != nil {
				out.dev.abandon()
			} else {
				s.settle(ctx, *out.dev, out.st)
			}
		}
		if err != nil || !more {
			return err
		}
		if sb, err = s.q.GetSandbox(ctx, sb.ID); err != nil {
			return s.letGo(ctx, sb, err)
		}
		// Its variables may have changed too.
		if project, err = s.q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: sb.ProjectID, OwnerID: sb.OwnerID}); err != nil {
			return s.letGo(ctx, sb, db.MapError(err))
		}
		to = next
	}
}

// letGo releases the sandbox's claim after a failed apply (the files stay whatever version they
// are) and returns err.
func (s *Service) letGo(ctx context.Context, sb db.Sandbox, err error) error {
	ctx = context.WithoutCancel(ctx)
	if e := s.q.EndSandboxDeploy(ctx, db.EndSandboxDeployParams{ID: sb.ID}); e != nil {
		return errors.Join(err, e)
	}
	return errors.Join(err, s.notifyUnchanged(ctx, sb))
}

// applied is what one apply did, for its history entry.
type applied struct {
	conv   convergence
	took   time.Duration
	failed sandbox.Failure // the install's or the dev server's failure when the version did not start
	// dev is the dev server run it started (none when the server reloads changed files itself),
	// and st how its start went.
	dev *devRun
	st  startup
	// envOnly: the project's variables changed, not its files (the history says so).
	envOnly bool
}

// deployOnce applies to to a running sandbox whose files are from's: converge, install when the
// dependencies changed, restart the dev server (unless it reloads changed files itself) and
// probe it. A version whose code fails is no error: applied.failed says what it printed.
func (s *Service) deployOnce(ctx context.Context, sb db.Sandbox, project db.Project, from, to wanted) (applied, error) {
	start := time.Now()
	h := s.handleOf(sb)
	uctx, cancel := context.WithTimeout(ctx, s.cfg.UploadTimeout)
	c, err := s.converge(uctx, h, sb, from, to, judgeVersion)
	cancel()
	a := applied{conv: c}
	if err != nil {
		return a, err
	}
	if err := s.q.SetSandboxFilesSeen(ctx, db.SetSandboxFilesSeenParams{ID: sb.ID, AppChangedFiles: nonNilStrings(c.appChanged)}); err != nil {
		return a, err
	}
	deps := c.dependencies() && strings.TrimSpace(project.InstallCommand) != ""
	if deps {
		if a.failed, err = s.install(ctx, h, sb, to.version.Number, project); err != nil || a.failed.Failed() {
			a.took = time.Since(start)
			return a, err
		}
	}
	var d devRun
	// The variables are read by the dev server at its start: a change of them restarts it.
	envBehind := project.EnvRevision != sb.EnvRevision
	a.envOnly = envBehind && !c.touched()
	if c.touched() && (deps || !project.ReloadsItself) || envBehind {
		// A new run before the old server stops: its end is not this version's.
		run, err := s.newAppRun(ctx, sb, to.version.Number, applog.SourceApp)
		if err != nil {
			return a, err
		}
		if err := s.providerStopDevServer(ctx, h, project.Port); err != nil {
			return a, fmt.Errorf("stop the dev server: %w", err)
		}
		if d, err = s.startDevServer(ctx, h, project, s.appURL(sb, project.Port), run, true); err != nil {
			return a, err
		}
		a.dev = &d
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	st, err := s.waitUp(rctx, s.appURL(sb, project.Port), d)
	cancel()
	a.st = st
	if err != nil && ctx.Err() != nil {
		d.abandon()
		return a, ctx.Err()
	}
	if !st.up {
		a.failed = st.failure(project, s.cfg.ReadyTimeout)
	}
	a.took = time.Since(start)
	return a, nil
}

// install runs the project's install command; a non-zero exit or a timeout is the founder's code
// (the failure says what it printed), any other error the provider's.
func (s *Service) install(ctx context.Context, h sandboxHandle, sb db.Sandbox, version int32, project db.Project) (sandbox.Failure, error) {
	ictx, cancel := context.WithTimeout(ctx, s.cfg.InstallTimeout)
	code, output, err := s.providerInstall(ictx, h, project.InstallCommand, s.runOf(sb, version, applog.SourceInstall))
	cancel()
	if f := s.installFailure(ctx, project, code, output, err); f.Failed() || err == nil {
		return f, nil
	}
	return sandbox.Failure{}, fmt.Errorf("run the install command: %w", err)
}

// installFailure is how an install command's end (code, output, err) fails the founder's code:
// it ran out of its time (ctx itself still on), or exited non-zero; none otherwise.
func (s *Service) installFailure(ctx context.Context, project db.Project, code int, output string, err error) sandbox.Failure {
	f := sandbox.Failure{Command: project.InstallCommand, Output: tail(output, outputTail)}
	switch {
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		f.Code, f.Limit = sandbox.FailInstallTimedOut, s.cfg.InstallTimeout
	case err == nil && code != 0:
		f.Code, f.ExitCode = sandbox.FailInstallFailed, int32(code)
	default:
		return sandbox.Failure{}
	}
	return f
}

// deployed records an apply in one transaction: the sandbox's files are to's now, its history
// says how it went. When a newer version was made meanwhile and the sandbox still runs, the claim
// moves on to it (more); otherwise it is released.
func (s *Service) deployed(ctx context.Context, id uuid.UUID, to wanted, a applied) (next wanted, more bool, err error) {
	ctx = context.WithoutCancel(ctx)
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if err := tx.SetSandboxDeployed(ctx, db.SetSandboxDeployedParams{ID: id, VersionID: to.version.ID}); err != nil {
			return err
		}
		if a.dev != nil {
			c := a.st.appOutcome(a.dev.run)
			c.announced = true // by the event recorded below
			if _, _, err := s.setApp(ctx, tx, id, c); err != nil {
				return err
			}
		} else if sb.AppRunID != nil && !a.failed.Failed() && a.st.up {
			// A server that reloads changed files itself runs the version now.
			if err := tx.SetSandboxAppVersion(ctx, db.SetSandboxAppVersionParams{ID: id, AppVersion: to.version.Number}); err != nil {
				return err
			}
		}
		n, ms := to.version.Number, int32(a.took.Milliseconds())
		ev := db.InsertSandboxEventParams{SandboxID: id, FromStatus: sb.Status, ToStatus: sb.Status, Source: sandbox.SourceUser,
			Reason: reasonVersionLive, VersionNumber: &n, DurationMs: &ms, Files: nonNilStrings(a.conv.changes.Paths())}
		if a.envOnly {
			ev.Reason = reasonEnvApplied
		}
		if a.failed.Failed() {
			ev.Reason = reasonVersionFailed
			withFailure(&ev, a.failed)
		}
		if err := record(ctx, tx, ev, sb.OwnerID); err != nil {
			return err
		}
		cur, err := tx.GetCurrentVersion(ctx, sb.ProjectID)
		if err != nil {
			return err
		}
		rev, err := tx.GetProjectEnvRevision(ctx, sb.ProjectID)
		if err != nil {
			return err
		}
		if (cur.ID != to.version.ID || rev != sb.EnvRevision) && sb.Status == sandbox.Running {
			more = true
			return tx.SetSandboxDeploying(ctx, db.SetSandboxDeployingParams{ID: id, VersionID: &cur.ID})
		}
		return tx.EndSandboxDeploy(ctx, db.EndSandboxDeployParams{ID: id})
	})
	if err != nil || !more {
		return wanted{}, false, err
	}
	next, err = s.currentFiles(ctx, to.version.ProjectID)
	return next, err == nil, s.letGoOnError(ctx, id, err)
}

func (s *Service) letGoOnError(ctx context.Context, id uuid.UUID, err error) error {
	if err == nil {
		return nil
	}
	return errors.Join(err, s.q.EndSandboxDeploy(ctx, db.EndSandboxDeployParams{ID: id}))
}
