package sandboxd

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"sandman/sandboxd/faults"
	"sandman/sandboxd/machine"
	"sandman/sandboxd/store"
)

// Server is a running sandboxd: the control-plane API, the sandbox traffic
// proxy with its envd emulation, the sandboxes and their processes, the
// event log and the webhook deliverer.
type Server struct {
	cfg    Config
	log    *slog.Logger
	iso    *machine.Host
	teamID string

	events  *eventStore
	hooks   *webhookRegistry
	deliver *deliverer
	store   *store.Store
	faults  *faults.Set // nil unless Config.FaultInjection
	proxy   *sandboxProxy

	mu        sync.Mutex
	sandboxes map[string]*sandbox
	// byStart holds the same sandboxes in the list's ascending order (see sandboxIndex).
	byStart sandboxIndex
	closing bool
	// starting counts sandboxes being created or resumed, which the running
	// cap counts already; startingUIDs are host uids being handed out.
	starting     int
	startingUIDs map[int]bool

	apiLn, sbxLn   net.Listener
	apiSrv, sbxSrv *http.Server
	baseCtx        context.Context
	cancelBase     context.CancelFunc
	shutdownOnce   sync.Once
	shutdownErr    error
}

// New prepares a Server from cfg: it picks the isolation (refusing to start
// when cfg asks for one that cannot work here), logs it with the limits in
// force, and reads the state directory, turning what a previous run left
// running into filesystem snapshots (docs/sandboxd.md, "Restarts"). It
// does not listen yet.
func New(cfg Config) (_ *Server, err error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, sandboxes: map[string]*sandbox{}, startingUIDs: map[int]bool{}}
	if cfg.FaultInjection {
		s.faults = &faults.Set{}
	}
	s.baseCtx, s.cancelBase = context.WithCancel(context.Background())
	// One team per API key, stable across restarts.
	sum := sha256.Sum256([]byte(cfg.APIKey))
	s.teamID = formatUUID([16]byte(sum[:16]))

	if s.store, err = store.Open(cfg.StateDir); err != nil {
		return nil, fmt.Errorf("sandboxd: state dir: %w", err)
	}
	iso, err := machine.Detect(machine.Config{Isolation: cfg.Isolation, StateDir: cfg.StateDir, UIDBase: cfg.UIDBase, ShareOpt: cfg.ShareOpt, Limits: cfg.Limits})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			iso.Release()
		}
	}()
	s.iso = iso
	if iso.Root && iso.Mode == IsolationBwrap {
		// Sandbox users reach their own directories through these two.
		for _, d := range []string{cfg.StateDir, s.store.Dir()} {
			if err := os.Chmod(d, 0o711); err != nil {
				return nil, fmt.Errorf("sandboxd: state dir: %w", err)
			}
		}
	}
	machine.LogReport(s.log, iso.Report(cfg.MaxSandboxes, cfg.MaxStored, cfg.DiskReserve))

	if s.events, err = openEventStore(cfg.StateDir, cfg.EventRetention); err != nil {
		return nil, fmt.Errorf("sandboxd: events: %w", err)
	}
	var static *webhook
	if cfg.WebhookURL != "" {
		if err := validateWebhookURL(cfg.WebhookURL); err != nil {
			return nil, fmt.Errorf("sandboxd: webhook url: %w", err)
		}
		static = &webhook{ID: staticWebhookID, Name: "static", URL: cfg.WebhookURL, Enabled: true, Secret: cfg.WebhookSecret}
	}
	if s.hooks, err = openWebhookRegistry(cfg.StateDir, static); err != nil {
		return nil, fmt.Errorf("sandboxd: webhooks: %w", err)
	}
	if s.deliver, err = newDeliverer(s); err != nil {
		return nil, fmt.Errorf("sandboxd: pending deliveries: %w", err)
	}
	s.proxy = newSandboxProxy(s)
	if err := s.recover(); err != nil {
		return nil, err
	}
	return s, nil
}

// recover loads the sandboxes of the previous run. Their processes died
// with it, their files did not: a sandbox that was running or paused with
// its memory comes back paused with a filesystem snapshot, and the ones
// that were running get the paused event the provider sends. A sandbox
// whose files are gone is reported killed.
func (s *Server) recover() error {
	// A crashed run may have left disk images mounted.
	if mounts, err := machine.MountsUnder(s.store.Dir()); err == nil {
		for _, m := range mounts {
			s.log.Warn("unmounting a sandbox disk left by the previous run", "path", m)
			if err := machine.Unmount(m); err != nil {
				s.log.Error("unmount", "path", m, "err", err)
			}
		}
	}
	recs, bad, err := s.store.Load()
	if err != nil {
		return fmt.Errorf("sandboxd: read sandboxes: %w", err)
	}
	// In the list's order, so that each joins the index at its end.
	slices.SortFunc(recs, func(a, b store.Record) int { return compareStart(positionOf(&a), positionOf(&b)) })
	known := map[string]bool{}
	// Nothing else runs yet, so s.mu need not be held.
	for _, r := range recs {
		known[r.ID] = true
		if !s.hasFiles(r.ID) {
			s.log.Warn("sandbox files lost with the previous run, killing it", "sandbox_id", r.ID, "state", string(r.State))
			s.removeSandboxFiles(r.ID)
			s.deliverEvent(s.recordEventLocked(r, EventKilled, killData(r, KillReasonOrphaned)))
			continue
		}
		var ev *event
		switch {
		case r.State == store.StateRunning:
			t := now()
			ev = s.recordEventLocked(r, EventPaused, map[string]any{"execution": execution(r.StartedAt, t)})
			r.State, r.Snapshot, r.EndAt = store.StatePaused, store.SnapshotFilesystem, t
		case r.Snapshot == store.SnapshotMemory:
			r.Snapshot = store.SnapshotFilesystem
		}
		if r.HostUID == 0 && s.iso.Root && s.iso.Mode == IsolationBwrap {
			if r.HostUID, err = s.allocUIDLocked(); err != nil {
				return err
			}
		}
		if err := s.store.Save(r); err != nil {
			return fmt.Errorf("sandboxd: save sandbox %s: %w", r.ID, err)
		}
		if ev != nil {
			s.log.Info("sandbox stopped with the previous run, kept as a filesystem snapshot", "sandbox_id", r.ID)
			s.deliverEvent(ev)
		}
		sb := &sandbox{id: r.ID, dir: s.store.FilesDir(r.ID), rec: r}
		s.sandboxes[r.ID] = sb
		s.byStart.add(sb)
	}
	for _, id := range bad {
		s.log.Error("unreadable sandbox record, removing it", "sandbox_id", id)
		s.removeSandboxFiles(id)
	}
	// Files without a record are leftovers of an interrupted create or kill.
	entries, err := os.ReadDir(s.store.Dir())
	if err != nil {
		return err
	}
	for _, e := range entries {
		id, isImage := strings.CutSuffix(e.Name(), store.ImageSuffix)
		if (e.IsDir() || isImage) && !known[id] {
			_ = os.RemoveAll(filepath.Join(s.store.Dir(), e.Name()))
		}
	}
	return nil
}

// hasFiles reports whether a sandbox's files are still on disk.
func (s *Server) hasFiles(id string) bool {
	for _, p := range []string{s.store.ImagePath(id), s.store.FilesDir(id)} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

func (s *Server) removeSandboxFiles(id string) {
	dir := s.store.FilesDir(id)
	// Never delete through a mount: unmount first, or leave the files.
	if mounts, _ := machine.MountsUnder(dir); len(mounts) > 0 {
		for _, m := range mounts {
			if err := machine.Unmount(m); err != nil {
				s.log.Error("remove sandbox files: unmount", "sandbox_id", id, "err", err)
				return
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		s.log.Error("remove sandbox files", "sandbox_id", id, "err", err)
	}
	for _, p := range []string{s.store.ImagePath(id), s.store.RecordPath(id)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Error("remove sandbox files", "sandbox_id", id, "path", p, "err", err)
		}
	}
}

// Start listens on the API and sandbox addresses and starts serving.
func (s *Server) Start() error {
	var err error
	if s.apiLn, err = net.Listen("tcp", s.cfg.APIAddr); err != nil {
		return fmt.Errorf("sandboxd: api listen: %w", err)
	}
	if s.sbxLn, err = net.Listen("tcp", s.cfg.SandboxAddr); err != nil {
		s.apiLn.Close()
		return fmt.Errorf("sandboxd: sandbox listen: %w", err)
	}
	base := func(net.Listener) context.Context { return s.baseCtx }
	s.apiSrv = &http.Server{Handler: s.apiHandler(), BaseContext: base, ReadHeaderTimeout: 10 * time.Second}
	s.sbxSrv = &http.Server{Handler: s.proxy, BaseContext: base, ReadHeaderTimeout: 10 * time.Second}
	go s.serve(s.apiSrv, s.apiLn, "api")
	go s.serve(s.sbxSrv, s.sbxLn, "sandbox")
	s.deliver.start()
	go s.sampleMetrics()
	s.log.Info("sandboxd listening", "api_url", s.APIURL(), "sandbox_url", s.SandboxURL(), "state_dir", s.cfg.StateDir)
	return nil
}

func (s *Server) serve(srv *http.Server, ln net.Listener, name string) {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("serve", "listener", name, "err", err)
	}
}

// APIURL is the control-plane base URL (E2B_API_URL), e.g. http://127.0.0.1:49982.
func (s *Server) APIURL() string {
	return "http://" + s.apiLn.Addr().String()
}

// SandboxDomain is the sandbox domain (E2B_DOMAIN for sandbox hosts):
// localhost and the sandbox port, so that a browser reaches port P of
// sandbox ID at http://P-ID.localhost:PORT/.
func (s *Server) SandboxDomain() string {
	return "localhost:" + strconv.Itoa(s.sbxLn.Addr().(*net.TCPAddr).Port)
}

// SandboxURL is what E2B_SANDBOX_URL should be: envd is reached on it with
// the E2b-Sandbox-Id and E2b-Sandbox-Port headers.
func (s *Server) SandboxURL() string {
	return "http://" + s.SandboxDomain()
}

// Isolation reports the isolation in use.
func (s *Server) Isolation() Isolation { return s.iso.Mode }

// IsolationReport reports the isolation and the limits in force.
func (s *Server) IsolationReport() IsolationReport {
	return s.iso.Report(s.cfg.MaxSandboxes, s.cfg.MaxStored, s.cfg.DiskReserve)
}

// Shutdown stops serving, stops every sandbox process, delivers the webhooks
// that are due until ctx ends and saves the rest, and closes the event log.
// Every sandbox's files stay on disk; the next start turns the running and
// memory-paused ones into filesystem snapshots.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	sandboxes := make([]*sandbox, 0, len(s.sandboxes))
	for _, sb := range s.sandboxes {
		if sb.timer != nil {
			sb.timer.Stop()
		}
		sandboxes = append(sandboxes, sb)
	}
	s.mu.Unlock()

	// Streams (process output, proxied connections) never go idle on their
	// own: cancel them first so that the servers can drain.
	s.cancelBase()
	var errs []error
	for _, srv := range []*http.Server{s.apiSrv, s.sbxSrv} {
		if srv == nil {
			continue
		}
		if err := srv.Shutdown(ctx); err != nil {
			srv.Close()
		}
	}
	var wg sync.WaitGroup
	for _, sb := range sandboxes {
		wg.Go(func() {
			sb.op.Lock()
			defer sb.op.Unlock()
			if sb.vm != nil {
				sb.vm.Kill()
				sb.vm = nil
			}
		})
	}
	wg.Wait()
	if s.iso.Cgroups != nil {
		s.iso.Cgroups.RemoveInstance()
	}
	s.iso.Release()
	if err := s.deliver.shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("save pending deliveries: %w", err))
	}
	if err := s.events.close(); err != nil {
		errs = append(errs, fmt.Errorf("close events: %w", err))
	}
	s.log.Info("sandboxd stopped")
	return errors.Join(errs...)
}
