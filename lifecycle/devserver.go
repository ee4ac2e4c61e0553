package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"sandman/applog"
	"sandman/db"
	"sandman/sandbox"
	"sandman/watch"
)

// A dev server run (docs/states.md, "The app"): the job that starts the dev server (a build, a
// version's apply, a wake) records a new run as starting before it stops the old server (so the
// old one's end is never taken for the new one's), starts it with its output stream open,
// follows it while it waits for it to answer, and learns of its end the moment it exits. Once
// it answered (or did not within the readiness timeout, running on), the job hands the run to
// the watch (package watch), which follows it for as long as the preview runs, on whichever
// instance holds its watch.

// devRun is a dev server run a job started and follows.
type devRun struct {
	run applog.Run
	f   *watch.Follower // nil: the server was not started by this run (it answered already)
}

// newAppRun records a new run of the sandbox's app, of version, as starting, before its server
// is (re)started.
func (s *Service) newAppRun(ctx context.Context, sb db.Sandbox, version int32, source applog.Source) (applog.Run, error) {
	run := applog.Run{ProjectID: sb.ProjectID, SandboxID: sb.ID, Version: version, Source: source, ID: uuid.New()}
	_, err := s.changeApp(ctx, sb.ID, appChange{run: run.ID, newRun: true, to: sandbox.AppStarting, version: version})
	return run, err
}

// startDevServer starts the dev server as run (newAppRun) unless it answers already (always
// when force), and records its process.
func (s *Service) startDevServer(ctx context.Context, h sandboxHandle, project db.Project, previewURL string, run applog.Run, force bool) (devRun, error) {
	if !force {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		up := s.answers(pctx, previewURL)
		cancel()
		if up {
			return devRun{run: run}, nil
		}
	}
	env, err := s.appEnv(ctx, run.SandboxID, run.ProjectID)
	if err != nil {
		return devRun{run: run}, err
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	p, err := s.providerStart(sctx, h, project.StartCommand, project.Port, env.Map())
	if err != nil {
		return devRun{run: run}, fmt.Errorf("start the dev server: %w", err)
	}
	// The variables it runs with: a preview behind the project's is given the change in place.
	// (Not recorded, it is only restarted once more.)
	if err := s.q.SetSandboxEnvRevision(ctx, db.SetSandboxEnvRevisionParams{ID: run.SandboxID, EnvRevision: env.Revision}); err != nil {
		s.log.Warn("record the variables a dev server runs with", "sandbox_id", run.SandboxID, "err", err)
	}
	d := devRun{run: run, f: s.watch.Follow(run, p)}
	pid := int32(p.PID)
	if _, err := s.changeApp(ctx, run.SandboxID, appChange{run: run.ID, to: sandbox.AppStarting, pid: &pid}); err != nil {
		d.f.Stop()
		return devRun{run: run}, err
	}
	return d, nil
}

// startup is how a dev server's start went.
type startup struct {
	up bool
	// exited: its process ended before it answered, with code.
	exited bool
	code   int32
	// output is its last lines (exited, or not answering).
	output string
}

// waitUp waits until d's server answers, its process ends, or ctx ends (the readiness timeout:
// an error, with what it printed by then in the startup).
func (s *Service) waitUp(ctx context.Context, url string, d devRun) (startup, error) {
	if d.f == nil {
		err := s.waitReady(ctx, url)
		return startup{up: err == nil}, err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-d.f.Done():
			if _, ended := d.f.Ended(); ended {
				cancel()
			}
		case <-wctx.Done():
		}
	}()
	err := s.waitReady(wctx, url)
	if err == nil {
		return startup{up: true}, nil
	}
	select {
	case <-d.f.Done():
		if code, ended := d.f.Ended(); ended && ctx.Err() == nil {
			s.flushLines(ctx, d.run) // the job's transaction records the exit with its problem
			return startup{exited: true, code: code, output: s.redactTail(ctx, d.run, d.f.Tail())}, nil
		}
	default:
	}
	return startup{output: s.redactTail(ctx, d.run, d.f.Tail())}, err
}

// failure is a startup that failed, as facts: what the start command did, and the tail of what
// it printed.
func (st startup) failure(project db.Project, ready time.Duration) sandbox.Failure {
	f := sandbox.Failure{Code: sandbox.FailStartNotAnswering, Command: project.StartCommand, Port: project.Port,
		Limit: ready, Output: tail(st.output, outputTail)}
	if st.exited {
		f.Code, f.ExitCode, f.Limit = sandbox.FailStartExited, st.code, 0
	}
	return f
}

// appOutcome is the app change a startup makes (inside the job's own transaction).
func (st startup) appOutcome(run applog.Run) appChange {
	c := appChange{run: run.ID, to: sandbox.AppUp}
	switch {
	case st.exited:
		code := st.code
		c.to, c.exitCode = sandbox.AppExited, &code
	case !st.up:
		c.to = sandbox.AppNotAnswering
	}
	return c
}

// settle ends a job's part in a run, once its outcome is committed: a server that runs (up, or
// not answering) is handed to the watch; the end of one that exited is told to the log.
func (s *Service) settle(ctx context.Context, d devRun, st startup) {
	if st.exited {
		s.log.Info("app exited", "sandbox_id", d.run.SandboxID, "version", d.run.Version, "exit_code", st.code)
	}
	if d.f == nil {
		s.watch.Kick() // a server that ran on (a wake): its holder connects to it
		return
	}
	if st.exited || !s.work {
		d.f.Stop()
		return
	}
	s.watch.Hold(context.WithoutCancel(ctx), d.f)
}

// abandon stops following a run whose job failed otherwise (its sandbox is ended, or the job is
// tried again).
func (d devRun) abandon() {
	if d.f != nil {
		d.f.Stop()
	}
}

// appEnded is the watch's report of a held run's end (watch.Options.OnExit): the app exited,
// recorded with its history entry, unless the sandbox holds another run by now or is not
// running (a pause ends the server too).
func (s *Service) appEnded(ctx context.Context, e watch.Exit) error {
	if e.Signalled || e.ExitCode == nil {
		// A sandbox being killed or paused ends its processes too, moments before its own state
		// says so: the provider is asked whether it still runs (twice for a signal, 2 s apart,
		// as stillThere does for a build's command) before the app is said to have exited.
		if running, err := s.stillRunning(ctx, e.Run.SandboxID, e.Signalled); err != nil || !running {
			return err
		}
	}
	s.flushLines(ctx, e.Run)
	_, err := s.changeApp(ctx, e.Run.SandboxID, appChange{run: e.Run.ID, to: sandbox.AppExited, exitCode: e.ExitCode,
		onlyRunning: true, event: reasonAppExited, source: sandbox.SourceWatch, output: s.redactTail(ctx, e.Run, e.Tail)})
	return err
}

// watches reports whether this instance holds the watch of the sandbox's dev server and follows
// its stream.
func (s *Service) watches(sandboxID uuid.UUID) bool { return s.watch.Holds(sandboxID) }

// stillRunning reports whether the provider still runs the sandbox: the row's provider id asked
// once, or twice 2 s apart when signalled.
func (s *Service) stillRunning(ctx context.Context, sandboxID uuid.UUID, signalled bool) (bool, error) {
	sb, err := s.q.GetSandbox(ctx, sandboxID)
	if db.IsNotFound(err) {
		return false, nil
	}
	if err != nil || sb.ProviderID == nil || sb.Status != sandbox.Running {
		return false, err
	}
	for look := 1; ; look++ {
		ps, err := s.providerGet(ctx, *sb.ProviderID)
		if err != nil {
			return false, err
		}
		if !ps.Found || ps.State != sandbox.Running {
			return false, nil
		}
		if !signalled || look == 2 {
			return true, nil
		}
		select {
		case <-time.After(2 * time.Second):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// probeNotAnswering waits for the dev servers that run without answering to answer: every
// AnswerProbeEvery, each preview whose watch this instance holds (so one instance probes each)
// and whose app is not_answering is asked once; one that answers is up (setApp, which closes
// older versions' problems as any up does). Previews up or exited are never probed: their
// process's stream tells their end.
func (s *Service) probeNotAnswering(ctx context.Context) {
	t := time.NewTicker(s.cfg.AnswerProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		held := s.watch.Held()
		if len(held) == 0 {
			continue
		}
		rows, err := s.q.ListNotAnsweringApps(ctx, held)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("app: list the previews that do not answer", "err", err)
			}
			continue
		}
		for _, r := range rows {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			up := s.answers(pctx, r.PreviewURL)
			cancel()
			if !up {
				continue
			}
			if _, err := s.changeApp(ctx, r.ID, appChange{run: r.AppRunID, to: sandbox.AppUp, onlyRunning: true}); err != nil && ctx.Err() == nil {
				s.log.Warn("app: record a dev server that answers now", "sandbox_id", r.ID, "err", err)
			}
		}
	}
}
