package lifecycle

import (
	"context"

	"github.com/google/uuid"

	"sandman/applog"
	"sandman/db"
	"sandman/sandbox"
)

// appChange is one change of a sandbox's app state.
type appChange struct {
	// run is the dev server run the change is about; newRun starts it (replacing whatever run
	// the row held), else the change applies only while the row still holds run.
	run    uuid.UUID
	newRun bool
	to     sandbox.AppStatus
	// version is the run's version (a new run's); pid its process, once known.
	version  int32
	pid      *int32
	exitCode *int32
	// onlyRunning: the change applies only while the sandbox runs with no pause asked for.
	onlyRunning bool
	// event, when set, records the change in the history, with output (the run's last lines).
	event  sandbox.Reason
	source sandbox.Source
	output string
	// announced: the caller's transaction announces the sandbox itself (an event row, a status
	// move), so a change the history does not tell adds no announcement of its own: one
	// notification, one render of the pages.
	announced bool
}

// setApp is the app state's writer, the status writer's neighbour (apply): inside the caller's
// transaction it changes the app columns of one run (SetSandboxApp: a run the row no longer
// holds changes nothing, so a late report of an earlier run never overwrites a later one),
// records the newest good version when the app is up, and records the change's event row
// (NOTIFYing it) or, for a change the history does not tell, NOTIFYs alone, so that pages and
// the API's readers learn of it at commit. The sandbox's own status is never touched. ok is
// false when the run is not the row's.
func (s *Service) setApp(ctx context.Context, tx db.Tx, sandboxID uuid.UUID, c appChange) (sb db.Sandbox, ok bool, err error) {
	row, err := tx.SetSandboxApp(ctx, db.SetSandboxAppParams{ID: sandboxID, AppStatus: c.to, NewRun: c.newRun,
		AppVersion: c.version, AppExitCode: c.exitCode, AppRunID: c.run, AppPid: c.pid, OnlyRunning: c.onlyRunning})
	if db.IsNotFound(err) {
		return sb, false, nil
	}
	if err != nil {
		return sb, false, err
	}
	sb = db.Sandbox(row)
	if c.to == sandbox.AppUp && sb.AppVersion != nil {
		// What broke in older versions is not what runs now (docs/states.md, "The app").
		if _, err := applog.CloseProblems(ctx, tx, sb.ProjectID, *sb.AppVersion); err != nil {
			return sb, false, err
		}
	}
	if c.to == sandbox.AppExited && sb.AppVersion != nil {
		// The exit's problem is committed with the exit: the one announcement of the change draws
		// the card's count and the pane's detail (the run's lines were flushed before, flushLines).
		code := -1 // found gone: no end to read
		if c.exitCode != nil {
			code = int(*c.exitCode)
		}
		run := applog.Run{ProjectID: sb.ProjectID, SandboxID: sb.ID, Version: *sb.AppVersion, Source: applog.SourceApp, ID: c.run}
		p, err := applog.OpenExitProblem(ctx, tx, run, code)
		if err != nil {
			return sb, false, err
		}
		s.problemOpened(run, p)
	}
	if c.event == "" {
		if c.announced {
			return sb, true, nil
		}
		return sb, true, notifyInTx(ctx, tx, sb)
	}
	ev := db.InsertSandboxEventParams{SandboxID: sb.ID, FromStatus: sb.Status, ToStatus: sb.Status, Source: c.source,
		Reason: c.event, VersionNumber: sb.AppVersion, Output: nonEmpty(c.output), FailureExitCode: c.exitCode}
	return sb, true, record(ctx, tx, ev, sb.OwnerID)
}

// changeApp is setApp in a transaction of its own.
func (s *Service) changeApp(ctx context.Context, sandboxID uuid.UUID, c appChange) (ok bool, err error) {
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		_, ok, err = s.setApp(ctx, tx, sandboxID, c)
		return err
	})
	return ok, err
}

// flushLines stores the lines the sink took so far, before the transaction that records a run's
// end reads that run's last lines into its problem. A flush that fails costs the problem's
// detail those lines, never the end itself.
func (s *Service) flushLines(ctx context.Context, run applog.Run) {
	if err := s.sink.Flush(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("app: a run's last lines were not stored before its end", "sandbox_id", run.SandboxID, "err", err)
	}
}

// installFailed records an install that exited non-zero as its version's problem, with that
// run's lines. The build's failure, recorded next, announces the sandbox with it.
func (s *Service) installFailed(ctx context.Context, run applog.Run, exitCode int32) {
	s.flushLines(ctx, run)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		p, err := applog.OpenExitProblem(ctx, tx, run, int(exitCode))
		if err == nil {
			s.problemOpened(run, p)
		}
		return err
	})
	if err != nil && ctx.Err() == nil {
		s.log.Warn("app: the install's problem was not recorded", "sandbox_id", run.SandboxID, "err", err)
	}
}

// problemOpened tells Sandman's own log of a run's exit recorded as its version's problem: an
// event at INFO, as an app's exit and a flood's dropped lines are (River's heartbeats are DEBUG).
func (s *Service) problemOpened(run applog.Run, p applog.Problem) {
	s.log.Info("problem opened", "project_id", run.ProjectID, "version", run.Version, "source", run.Source, "message", p.Message)
}
