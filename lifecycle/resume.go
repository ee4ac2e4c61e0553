package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"sandman/apperr"
	"sandman/applog"
	"sandman/db"
	"sandman/outbox"
	"sandman/sandbox"
)

// Resume moves a founder's paused sandbox to resuming at once and resumes it in the background.
func (s *Service) Resume(ctx context.Context, owner, sandboxID uuid.UUID) (db.Sandbox, error) {
	if _, err := s.overview.OwnedSandbox(ctx, owner, sandboxID); err != nil {
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
		case sandbox.Resuming, sandbox.Running:
			return nil // a double click, or another tab was first
		case sandbox.Paused, sandbox.Unknown:
		default:
			return apperr.New(apperr.KindConflict, codeNotPaused, "This preview cannot be resumed; rebuild it instead.")
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
	reason := sandbox.ReasonResume
	if args.Visitor {
		reason = reasonVisitorWake
	}
	out, err := apply(ctx, tx, sb, Change{To: sandbox.Resuming, Source: args.source(), Reason: reason})
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
	if sb.Status != sandbox.Resuming || sb.ProviderID == nil {
		return nil
	}
	project, err := s.q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: sb.ProjectID, OwnerID: sb.OwnerID})
	if err != nil {
		return db.MapError(err)
	}
	// Every change of this resume is recorded as the one's who asked for it: the founder, or a
	// visitor of the share link.
	source := job.Args.source()
	// Files an attempt wrote stay written for the next one, which must still restart the dev
	// server on them and record them.
	var earlier convergence
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
		res, err := s.resumeOnce(actx, sb, project, earlier)
		earlier = res.conv
		cancel()
		if err == nil {
			changed := false
			_, err = s.transition(ctx, sb.ID, func(tx db.Tx, cur db.Sandbox) (*Change, error) {
				if cur.Status != sandbox.Resuming {
					return nil, nil
				}
				if err := s.recordWoke(ctx, tx, cur, source, res); err != nil {
					return nil, err
				}
				changed = true
				return &Change{To: sandbox.Running, Source: source, Reason: sandbox.ReasonResumed, PreviewURL: &res.preview,
					EndAt: &res.endAt, ClearSnap: true, Verified: true}, nil
			})
			if err == nil && changed {
				s.countIntegrity(res)
				s.settle(ctx, res.dev, res.st)
			} else {
				res.dev.abandon()
			}
			return err
		}
		lastErr = err
		s.log.Warn("resume attempt failed", "sandbox_id", sb.ID, "attempt", attempt, "err", err)
		if isNotFound(err) || isFilesLost(err) {
			break // a lost sandbox, or lost files, do not come back on a second try
		}
	}
	cause, reason := sandbox.CauseUnreachable, reasonResumeUnreachable
	switch {
	case isNotFound(lastErr):
		cause, reason = sandbox.CauseNotFound, reasonResumeNotFound
	case isFilesLost(lastErr):
		cause, reason = sandbox.CauseFilesLost, reasonResumeFilesLost
		s.metrics.resumeIntegrity.WithLabelValues(integrityFailed).Inc()
	}
	_, err = s.transition(context.WithoutCancel(ctx), sb.ID, func(_ db.Tx, cur db.Sandbox) (*Change, error) {
		if cur.Status != sandbox.Resuming {
			return nil, nil
		}
		return &Change{To: sandbox.ResumeFailed, Source: source, Reason: reason, Detail: lastErr.Error(), FailureCause: &cause}, nil
	})
	return err
}

// union is a and the elements of b it lacks, sorted.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}

func isFilesLost(err error) bool {
	var lost *filesLost
	return errors.As(err, &lost)
}

// resumed is what one successful resume attempt found.
type resumed struct {
	preview string
	endAt   time.Time
	// conv is what the integrity check did: the version it woke with and what it wrote (with
	// what earlier attempts wrote).
	conv      convergence
	checked   bool // the sandbox had slept, so its files were checked
	unchecked bool // … but the check itself could not be made
	// failed is, when the version the preview woke with changed its files and its dev server
	// did not start on them, or its dev server exited, why (with what the server printed): the
	// founder's code, not lost files.
	failed sandbox.Failure
	// dev is the dev server run the wake started (none when the server ran on through the
	// sleep), and st how its start went.
	dev devRun
	st  startup
}

// wokeVersion is the version whose files a waking preview's dev server starts on: the one its
// check converged to, else the one its files were.
func (s *Service) wokeVersion(ctx context.Context, sb db.Sandbox, c convergence) (int32, error) {
	if c.to.version.ID != uuid.Nil {
		return c.to.version.Number, nil
	}
	v, err := s.q.GetVersion(ctx, sb.DeployedVersionID)
	return v.Number, err
}

// recordWoke records, in the resume's transaction, what its check did: the version it applied
// ("Woke with version 8 (3 files changed since it slept)"), the files it restored, and the
// version's failure to start; and that the sandbox's files are now that version's.
func (s *Service) recordWoke(ctx context.Context, tx db.Tx, sb db.Sandbox, source sandbox.Source, r resumed) error {
	c := r.conv
	if r.dev.run.ID != uuid.Nil {
		if _, _, err := s.setApp(ctx, tx, sb.ID, r.st.appOutcome(r.dev.run)); err != nil {
			return err
		}
		if r.st.exited && (c.to.version.ID == uuid.Nil || c.to.version.ID == sb.DeployedVersionID) {
			// "Woke with version 2, which doesn't start": the version it slept with.
			n := r.dev.run.Version
			ev := db.InsertSandboxEventParams{SandboxID: sb.ID, FromStatus: sb.Status, ToStatus: sb.Status,
				Source: source, Reason: reasonWokeNotStarting, VersionNumber: &n}
			withFailure(&ev, r.failed)
			if err := record(ctx, tx, ev, sb.OwnerID); err != nil {
				return err
			}
		}
	}
	if c.to.version.ID == uuid.Nil {
		return nil // not checked: nothing slept
	}
	if len(c.restored) > 0 {
		if err := recordRestored(ctx, tx, sb, source, c.restored); err != nil {
			return err
		}
	}
	if c.to.version.ID == sb.DeployedVersionID {
		return nil
	}
	if err := tx.SetSandboxDeployed(ctx, db.SetSandboxDeployedParams{ID: sb.ID, VersionID: c.to.version.ID}); err != nil {
		return err
	}
	n := c.to.version.Number
	if err := record(ctx, tx, db.InsertSandboxEventParams{SandboxID: sb.ID, FromStatus: sb.Status, ToStatus: sb.Status,
		Source: source, Reason: reasonWokeWithVersion, Files: nonNilStrings(c.changes.Paths()), VersionNumber: &n}, sb.OwnerID); err != nil {
		return err
	}
	if !r.failed.Failed() {
		// "Woke with version 8" is that version live: the founder's backend hears it as it hears
		// an apply's, and only when it did not fail (never live, then failed).
		return recordVersionHook(ctx, tx, outbox.VersionLive, sb.ID, reasonWokeWithVersion, &n)
	}
	ev := db.InsertSandboxEventParams{SandboxID: sb.ID, FromStatus: sb.Status, ToStatus: sb.Status,
		Source: source, Reason: reasonVersionFailed, VersionNumber: &n}
	withFailure(&ev, r.failed)
	return record(ctx, tx, ev, sb.OwnerID)
}

// countIntegrity counts a resume that reached running by what its integrity check found.
func (s *Service) countIntegrity(r resumed) {
	switch {
	case !r.checked:
		return // it was running all along: nothing slept, nothing to prove
	case r.unchecked:
		s.metrics.resumeIntegrity.WithLabelValues(integrityUnchecked).Inc()
	case len(r.conv.restored) > 0:
		s.metrics.resumeIntegrity.WithLabelValues(integrityHealed).Inc()
		s.metrics.filesRestored.WithLabelValues("resume").Add(float64(len(r.conv.restored)))
	default:
		s.metrics.resumeIntegrity.WithLabelValues(integrityIntact).Inc()
	}
}

// resumeOnce connects (which resumes a paused sandbox with a fresh lifetime), sets the timeout
// again, proves the app's files whole and of the current version (restoring what the provider
// lost and applying a version made while it slept, docs/states.md, "Integrity" and "Versions"),
// runs the install command when the version changed the dependencies, makes sure the dev server
// answers (started again on written files) and returns the fresh preview URL and end time.
// earlier is what an earlier attempt wrote; the answer's conv holds it too, on failure as on
// success.
func (s *Service) resumeOnce(ctx context.Context, sb db.Sandbox, project db.Project, earlier convergence) (resumed, error) {
	fail := func(err error) (resumed, error) { return resumed{conv: earlier}, err }
	connected, fromSnapshot, err := s.providerConnect(ctx, *sb.ProviderID)
	if err != nil {
		return fail(fmt.Errorf("connect: %w", err))
	}
	if err := s.providerSetTimeout(ctx, *sb.ProviderID); err != nil && !isNotFound(err) {
		return fail(fmt.Errorf("set timeout: %w", err))
	} else if err != nil {
		return fail(err)
	}
	connected.EnvdToken = firstNonEmpty(connected.EnvdToken, sb.EnvdToken)
	// The handle comes from this connect's answer: the provider upgrades envd at resume
	// (envdVersion may change), so nothing learnt of envd before the pause is carried over.
	h := s.handleOf(withProvider(sb, connected))
	r := resumed{preview: s.previewURL(connected, project.Port), conv: earlier}
	app := s.appURL(withProvider(sb, connected), project.Port)
	// Checked when it slept: this connect woke it, or the row says it was paused (an earlier
	// attempt, or a job cut short, may have woken it already). A sandbox that was running all
	// along (a resume from a connection issue) had nothing snapshotted to lose, and the app may
	// have changed its files since Sandman's last look; a newer version reaches it once it runs.
	if fromSnapshot || sb.SnapshotKind != nil {
		r.checked = true
		now, err := s.ensureIntact(ctx, h, sb)
		r.conv = merge(earlier, now)
		switch {
		case errors.Is(err, errUnchecked):
			// Not the files' fault: resume as before the check existed, and say so.
			s.log.Error("resume: the integrity check could not be made, resuming unchecked", "sandbox_id", sb.ID, "err", err)
			r.unchecked, r.conv = true, earlier
		case err != nil:
			return resumed{conv: r.conv}, err
		}
	}
	fail = func(err error) (resumed, error) { return resumed{conv: r.conv}, err }
	c := r.conv
	restart := c.touched()
	// After a filesystem-only snapshot nothing runs: always start the dev server again.
	coldBoot := sb.SnapshotKind != nil && *sb.SnapshotKind == sandbox.PauseFilesystem
	newVersion := !c.changes.Empty()
	if newVersion && c.dependencies() && strings.TrimSpace(project.InstallCommand) != "" {
		if f, err := s.install(ctx, h, sb, c.to.version.Number, project); err != nil {
			return fail(err)
		} else if f.Failed() {
			r.failed = f
		}
	}
	if restart && !coldBoot {
		// The running server may hold the lost files' old contents, or have failed on them.
		if err := s.providerStopDevServer(ctx, h, project.Port); err != nil {
			if isNotFound(err) {
				return fail(err)
			}
			return fail(&filesLost{why: "the dev server could not be stopped to start it on the restored files: " + err.Error()})
		}
	}
	// The proxy ran on through a memory snapshot; after a filesystem-only one, or for a
	// preview built before Sandman ran one, it starts here.
	if err := s.ensureProxy(ctx, h, project); err != nil {
		return fail(err)
	}
	start := coldBoot || restart
	if !start {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		start = !s.answers(pctx, app)
		cancel()
	}
	if start {
		version, err := s.wokeVersion(ctx, sb, c)
		if err != nil {
			return fail(err)
		}
		run, err := s.newAppRun(ctx, sb, version, applog.SourceApp)
		if err != nil {
			return fail(err)
		}
		if r.dev, err = s.startDevServer(ctx, h, project, app, run, true); err != nil {
			if restart && !isNotFound(err) {
				return fail(&filesLost{why: err.Error()})
			}
			return fail(err)
		}
		fail = func(err error) (resumed, error) {
			r.dev.abandon()
			return resumed{conv: r.conv}, err
		}
	}
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if newVersion {
		// The version's own server may never start: it has a build's time to, and the resume
		// still ends in time to say so.
		rctx, cancel = context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	}
	r.st, err = s.waitUp(rctx, app, r.dev)
	cancel()
	if err != nil || r.st.exited {
		switch {
		case r.st.exited && (newVersion || !restart):
			// A server that exits is the version's own code, not the sandbox: the wake worked,
			// and the founder is told which version does not start (docs/states.md, "The app").
			// Not so on files the check restored: then the restore did not bring it back.
			if !r.failed.Failed() {
				r.failed = r.st.failure(project, s.cfg.ReadyTimeout)
			}
		case newVersion || r.failed.Failed():
			// The version's own code did not start: the sandbox is up and running it, and the
			// founder is told why, with the previous version one click away.
			if !r.failed.Failed() {
				r.failed = r.st.failure(project, s.cfg.ReadyTimeout)
			}
		case restart:
			return fail(&filesLost{why: fmt.Sprintf("the dev server did not answer on the %d restored files: %v", len(c.restored), err)})
		default:
			return fail(fmt.Errorf("dev server did not answer: %w", err))
		}
	}
	r.endAt = s.cfg.lifetimeEnd(time.Now())
	return r, nil
}

// merge is what two attempts wrote: the later one's version and changes, both's files.
func merge(earlier, now convergence) convergence {
	now.written = union(earlier.written, now.written)
	now.restored = union(earlier.restored, now.restored)
	return now
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
	if _, err := s.overview.OwnedSandbox(ctx, owner, sandboxID); err != nil {
		return err
	}
	sb, err := s.q.TouchSandboxActivity(ctx, db.TouchSandboxActivityParams{ID: sandboxID, OwnerID: owner})
	if db.IsNotFound(err) {
		return nil // touched within the last second already
	}
	if err != nil || sb.Status != sandbox.Running {
		return err
	}
	return s.notifyUnchanged(ctx, sb)
}
