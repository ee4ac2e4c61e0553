package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"time"

	"sandman/applog"
	"sandman/db"
	"sandman/e2b"
	"sandman/sandbox"
	"sandman/watch"
)

// This file is the lifecycle's only contact with the provider client.

// providerSandbox is what create and connect answer.
type providerSandbox struct {
	ID        string
	Domain    string
	EnvdToken string
	EndAt     time.Time
}

// sandboxHandle addresses a sandbox's envd: its id, domain and access token.
type sandboxHandle = e2b.Sandbox

func (s *Service) handleOf(sb db.Sandbox) sandboxHandle {
	return e2b.Sandbox{ID: deref(sb.ProviderID), EnvdAccessToken: sb.EnvdToken, Domain: sb.ProviderDomain}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func isNotFound(err error) bool { return errors.Is(err, e2b.ErrNotFound) }

func (s *Service) providerCreate(ctx context.Context, sb db.Sandbox, p db.Project) (providerSandbox, error) {
	created, err := s.provider.CreateSandbox(ctx, e2b.CreateParams{
		Template:   s.cfg.Template,
		TimeoutSec: int(s.cfg.SandboxTimeout.Seconds()),
		// Killed at the end of its lifetime: Sandman pauses idle sandboxes itself, and an
		// expiry is what the founder should see if that ever fails.
		OnTimeout: e2b.OnTimeoutKill,
		Secure:    true,
		// An ambiguous failure (timeout after sending) is resolved by finding this key, so a
		// retried create never makes a second sandbox.
		IdempotencyKey: sb.ID.String(),
		Metadata: map[string]string{
			MetaApp: "sandman", MetaSandbox: sb.ID.String(), MetaProject: sb.ProjectID.String(),
			MetaBuild: sb.BuildID.String(), MetaOwner: sb.OwnerID.String(),
		},
	})
	if err != nil {
		return providerSandbox{}, err
	}
	return s.toProviderSandbox(created), nil
}

// Metadata keys Sandman sets on every sandbox; the reconcile sweep lists by MetaApp.
const (
	MetaApp     = "sandman_app"
	MetaSandbox = "sandman_sandbox"
	MetaProject = "sandman_project"
	MetaBuild   = "sandman_build"
	MetaOwner   = "sandman_owner"
)

func (s *Service) providerUpload(ctx context.Context, h sandboxHandle, files []e2b.File) error {
	return s.provider.UploadFiles(ctx, h, files)
}

// providerRemove removes paths of the app directory and marks executable ones, in one command.
func (s *Service) providerRemove(ctx context.Context, h sandboxHandle, paths, executable []string) error {
	return s.provider.RemoveFiles(ctx, h, appDir, paths, executable)
}

// providerDigest reports the size and SHA-256 of each path of the app directory, in one envd
// command (docs/states.md, "Integrity").
func (s *Service) providerDigest(ctx context.Context, h sandboxHandle, paths []string) (e2b.DirDigest, error) {
	return s.provider.DigestFiles(ctx, h, appDir, paths)
}

// providerInstall runs the install command in the app directory and waits for it (ctx bounds
// the wait): its lines go to the log as run's (source install), and its last lines come back
// with its exit code.
func (s *Service) providerInstall(ctx context.Context, h sandboxHandle, cmd string, run applog.Run) (int, string, error) {
	env, _ := s.appEnv(ctx, run.SandboxID, run.ProjectID)
	p, err := s.provider.StartProcess(ctx, h, e2b.ProcessParams{Command: cmd, Cwd: appDir, Tag: "install", Envs: env.Map()})
	if err != nil {
		return 0, "", err
	}
	f := watch.Follow(run, p, s.sink)
	select {
	case <-f.Done():
	case <-ctx.Done():
		f.Stop()
	}
	code, ended := f.Ended()
	switch {
	case ended:
	case ctx.Err() != nil:
		return 0, s.redactTail(context.WithoutCancel(ctx), run, f.Tail()), ctx.Err()
	default:
		return 0, s.redactTail(ctx, run, f.Tail()), f.Err()
	}
	if code != 0 {
		s.installFailed(context.WithoutCancel(ctx), run, code)
	}
	return int(code), s.redactTail(ctx, run, f.Tail()), nil
}

// devServerPID is where the dev server's process id and start time are written, so that it can
// be stopped without the process list (E2B#1031). The start time tells the process from a later
// one that got the same id after a cold boot.
const devServerPID = "/home/user/dev-server.pid"

// providerStart starts the dev server and returns its process with its output stream open: the
// watch follows it (its output, and its end when it exits). exec keeps the shell's pid, so the
// process envd reports, the one written down and the one connected to again after a restart of
// Sandman are the start command's own. The shells are not login shells: a login shell first
// reads profiles that the template, not Sandman, decides (one that starts a version manager
// costs seconds), and envd's environment has the PATH already (docs/states.md, "The app").
// The project's variables come first: Sandman's own (refused as names of variables) win.
func (s *Service) providerStart(ctx context.Context, h sandboxHandle, cmd string, port int32, vars map[string]string) (*e2b.Process, error) {
	env := map[string]string{}
	maps.Copy(env, vars)
	maps.Copy(env, map[string]string{"PORT": strconv.Itoa(int(port)), "HOST": "0.0.0.0", "SANDMAN_START_COMMAND": cmd})
	return s.provider.StartProcess(ctx, h, e2b.ProcessParams{
		// The start command is the founder's shell text (it may be several commands): a shell of
		// its own runs it whole, in the same process (exec), and bash runs a lone command in its
		// own place too, so the process ends when the command does.
		Argv: []string{"/bin/bash", "-c", `read -r s < /proc/$$/stat; set -- ${s##*) }; echo "$$ ${20}" > ` + devServerPID +
			`; c=$SANDMAN_START_COMMAND; unset SANDMAN_START_COMMAND; exec /bin/bash -c "$c"`},
		Cwd: appDir, Tag: "dev-server",
		Envs: env,
	})
}

// startTime defines start_time PID: the process's start time (field 22 of /proc/PID/stat,
// read after the command name, which may hold spaces), with the shell's own read.
const startTime = `start_time() { read -r s < "/proc/$1/stat" 2>/dev/null || return 1; set -- ${s##*) }; echo "${20}"; }
`

// stopDevServer is one command that stops the dev server and everything it started: first the
// process tree whose root devServerPID names (if that process still runs: the same id and start
// time), which is the server nearly always; then, only while the port is still taken, any
// process of the app directory listening on the port (a server that outlived its parent or
// double-forked, or one started before the pid file was written), found through /proc rather
// than envd's process list, which can miss a process that survived a memory snapshot
// (E2B#1031). That scan reads every process's descriptors, so it is the fallback, not the
// rule. SIGTERM first, SIGKILL about 5 s later; it exits 0 once nothing listens on the port, 1
// if something still does 5 s after the SIGKILL. It needs only sh, cat, readlink, find, seq
// and sleep.
const stopDevServer = startTime + `port=$(printf '%04X' "$PORT")
app=$(pwd -P)
listeners() {
  for f in /proc/net/tcp /proc/net/tcp6; do
    while read -r _ local _ st _ _ _ _ _ inode _; do
      [ "$st" = 0A ] && [ "${local##*:}" = "$port" ] && echo "$inode"
    done < "$f"
  done 2>/dev/null
}
known() {
  read -r p started < ` + devServerPID + ` 2>/dev/null && [ -n "$started" ] && [ "$(start_time "$p")" = "$started" ] && echo "$p"
}
listening() {
  for inode in $(listeners); do
    for fd in $(find /proc/[0-9]*/fd -lname "socket:\[$inode\]" 2>/dev/null); do
      p=${fd#/proc/}; p=${p%%/*}
      case $(readlink "/proc/$p/cwd" 2>/dev/null) in "$app"|"$app"/*) echo "$p" ;; esac
    done
  done
}
kill_tree() {
  for c in $(cat /proc/$2/task/*/children 2>/dev/null); do kill_tree "$1" "$c"; done
  kill "-$1" "$2" 2>/dev/null
}
free() { [ -z "$(listeners)" ]; }
stop() {
  k=$(known)
  if [ -n "$k" ]; then
    kill_tree "$1" "$k"
    for _ in $(seq 25); do free && exit 0; sleep 0.02; done
  fi
  for p in $(listening); do kill_tree "$1" "$p"; done
  for _ in $(seq 250); do free && exit 0; sleep 0.02; done
}
stop TERM
stop KILL
free
`

// providerStopDevServer stops the running dev server (stopDevServer), before one is started on
// new files, in one envd command run by a plain (not login) shell.
func (s *Service) providerStopDevServer(ctx context.Context, h sandboxHandle, port int32) error {
	p, err := s.provider.StartProcess(ctx, h, e2b.ProcessParams{Argv: []string{"/bin/bash", "-c", stopDevServer}, Cwd: appDir,
		Tag: "sandman-stop", Envs: map[string]string{"PORT": strconv.Itoa(int(port))}})
	if err != nil {
		return err
	}
	res, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("the dev server still holds port %d after SIGKILL (exit %d): %s", port, res.ExitCode, tail(res.Stdout+res.Stderr, 300))
	}
	return nil
}

func (s *Service) providerPause(ctx context.Context, id string, keepMemory bool) error {
	_, err := s.provider.Pause(ctx, id, keepMemory)
	return err
}

// providerConnect resumes a paused sandbox (fromSnapshot) or extends a running one.
func (s *Service) providerConnect(ctx context.Context, id string) (p providerSandbox, fromSnapshot bool, err error) {
	c, resumed, err := s.provider.Connect(ctx, id, int(s.cfg.SandboxTimeout.Seconds()))
	if err != nil {
		return providerSandbox{}, false, err
	}
	return s.toProviderSandbox(c), resumed, nil
}

func (s *Service) providerSetTimeout(ctx context.Context, id string) error {
	return s.provider.SetTimeout(ctx, id, int(s.cfg.SandboxTimeout.Seconds()))
}

func (s *Service) providerKill(ctx context.Context, id string) error {
	return s.provider.Kill(ctx, id)
}

// providerGet asks for one sandbox; not found is an answer (Found false, with the provider's
// kill reason when its events tell it), not an error.
func (s *Service) providerGet(ctx context.Context, id string) (ProviderState, error) {
	d, err := s.provider.GetSandbox(ctx, id)
	if isNotFound(err) {
		return ProviderState{KillReason: s.providerKillReason(ctx, id)}, nil
	}
	if err != nil {
		return ProviderState{}, err
	}
	return ProviderState{Found: true, State: stateOf(d.State), EndAt: d.EndAt}, nil
}

// providerKillReason reads why the provider killed a sandbox it no longer has, from the
// sandbox's newest killed event; nil when the events do not say (or cannot be read now). Our
// own copy of the end time is only an estimate (taken after the provider set it, on another
// clock, and blind to changes made elsewhere), so a sandbox that timed out moments before it
// would be classified as killed; the provider's reason is exact. One call per missing
// sandbox, which is rare: the list-based sweep stays a few calls.
func (s *Service) providerKillReason(ctx context.Context, id string) *string {
	evs, err := s.provider.ListEvents(ctx, e2b.EventsParams{SandboxID: id, Types: []string{EventKilled}, Limit: 1})
	if err != nil {
		s.log.Warn("read the kill reason", "provider_id", id, "err", err)
		return nil
	}
	if len(evs) == 0 || evs[0].KillReason == "" || evs[0].KillReason == "unknown" {
		return nil
	}
	return &evs[0].KillReason
}

func (s *Service) toProviderSandbox(sb e2b.Sandbox) providerSandbox {
	end := sb.EndAt
	if end.IsZero() {
		end = s.cfg.lifetimeEnd(time.Now())
	}
	return providerSandbox{ID: sb.ID, Domain: sb.Domain, EnvdToken: sb.EnvdAccessToken, EndAt: end}
}

func stateOf(s e2b.State) sandbox.Status {
	if s == e2b.StatePaused {
		return sandbox.Paused
	}
	return sandbox.Running
}

// providerWalk lists every Sandman sandbox the provider has, a page at a time: visit gets each
// one's provider id and state as its page arrives.
func (s *Service) providerWalk(ctx context.Context, visit func(id string, ps ProviderState)) error {
	return s.provider.WalkSandboxes(ctx, e2b.ListParams{Metadata: map[string]string{MetaApp: "sandman"}, Limit: e2b.MaxListLimit},
		func(page []e2b.Sandbox) error {
			for _, l := range page {
				visit(l.ID, ProviderState{Found: true, State: stateOf(l.State), EndAt: l.EndAt, StartedAt: l.StartedAt,
					VCPUs: int32(l.CPUCount), MemoryMiB: int32(l.MemoryMB)})
			}
			return nil
		})
}

// providerEventsSince returns the events at or after since, oldest first.
func (s *Service) providerEventsSince(ctx context.Context, since time.Time) ([]ProviderEvent, error) {
	evs, _, err := s.provider.CatchUpEvents(ctx, since, 50)
	if err != nil {
		return nil, err
	}
	out := make([]ProviderEvent, len(evs))
	for i, ev := range evs {
		out[i] = toProviderEvent(ev)
	}
	return out, nil
}

// toProviderEvent converts a parsed provider event (webhook or events API).
func toProviderEvent(ev e2b.Event) ProviderEvent {
	pe := ProviderEvent{ID: ev.ID, Type: ev.Type, SandboxID: ev.SandboxID, Timestamp: ev.Timestamp}
	if ev.Type == EventKilled {
		reason := ev.KillReason
		pe.KillReason = &reason
	}
	if !ev.SetTimeout.IsZero() {
		t := ev.SetTimeout
		pe.SetTimeout = &t
	}
	return pe
}

// answers reports whether the preview URL gets an answer from the dev server (the provider's
// proxy answers 502 while nothing listens on the port).
func (s *Service) answers(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	res, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode != http.StatusBadGateway && res.StatusCode != http.StatusServiceUnavailable &&
		res.StatusCode != http.StatusGatewayTimeout
}

// waitReady polls the preview until it answers or ctx ends: often at first (a dev server
// restarted on a new version is up within tens of milliseconds), then every 150 ms.
func (s *Service) waitReady(ctx context.Context, url string) error {
	wait := 20 * time.Millisecond
	for {
		if s.answers(ctx, url) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 150*time.Millisecond)
	}
}
