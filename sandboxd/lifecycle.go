package sandboxd

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"sandman/sandboxd/machine"
	"sandman/sandboxd/store"
)

// opError is a lifecycle failure the API shows with its status.
type opError struct {
	Status  int
	Message string
}

func (e *opError) Error() string { return e.Message }

func notFound(id string) *opError {
	return &opError{http.StatusNotFound, fmt.Sprintf("Sandbox %q doesn't exist or you don't have access to it", id)}
}

func internalError(err error) *opError {
	return &opError{http.StatusInternalServerError, "Internal error: " + err.Error()}
}

// createParams is a validated create request.
type createParams struct {
	templateID      string
	timeout         time.Duration
	metadata        map[string]string
	envVars         map[string]string
	secure          bool
	allowInternet   *bool
	autoPause       bool
	autoPauseMemory bool
	autoResume      bool
}

func (s *Server) create(p createParams) (store.Record, error) {
	id := newSandboxID()
	dir := s.store.FilesDir(id)
	hostUID, err := s.reserve(nil)
	if err != nil {
		return store.Record{}, err
	}
	defer s.unreserve(hostUID)
	if err := s.makeSandboxFiles(id, hostUID); err != nil {
		s.removeSandboxFiles(id)
		return store.Record{}, internalError(err)
	}
	t := now()
	rec := store.Record{
		ID: id, TemplateID: p.templateID, Metadata: p.metadata, EnvVars: p.envVars,
		AllowInternet: p.allowInternet, AutoPause: p.autoPause, AutoPauseMemory: p.autoPauseMemory,
		AutoResume: p.autoResume, ResumeTimeout: int(p.timeout / time.Second),
		State: store.StateRunning, CreatedAt: t, StartedAt: t, EndAt: t.Add(p.timeout), ExecutionID: newUUID(),
		HostUID: hostUID, EnvdVersion: s.cfg.EnvdVersion,
	}
	if p.secure {
		rec.AccessToken = randomHex(32)
	}
	if err := s.store.Save(rec); err != nil {
		s.removeSandboxFiles(id)
		return store.Record{}, internalError(err)
	}
	sb := &sandbox{id: id, dir: dir, rec: rec}
	// Held until the created event is out, so no later event of this sandbox
	// can overtake it.
	sb.op.Lock()
	defer sb.op.Unlock()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		s.removeSandboxFiles(id)
		return store.Record{}, &opError{http.StatusServiceUnavailable, "sandboxd is shutting down"}
	}
	s.sandboxes[id] = sb
	s.byStart.add(sb)
	s.scheduleLocked(sb)
	ev := s.recordEventLocked(rec, EventCreated, nil)
	s.mu.Unlock()
	s.deliverEvent(ev)
	return rec.Clone(), nil
}

// makeSandboxFiles lays out a new sandbox's files: a disk image when the
// disk limit is in force, otherwise a directory booting fills in.
func (s *Server) makeSandboxFiles(id string, hostUID int) error {
	dir := s.store.FilesDir(id)
	if s.iso.Mode == IsolationNone {
		for _, d := range []string{"home", "tmp"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				return err
			}
		}
		return nil
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if s.iso.Limits.Disk > 0 {
		uid := hostUID
		if uid == 0 {
			uid = os.Geteuid()
		}
		return machine.CreateImage(s.store.ImagePath(id), s.iso.Limits.Disk, uid, uid)
	}
	return nil
}

// maxSandboxesError is the provider's answer at the concurrency limit.
func (s *Server) maxSandboxesError() *opError {
	return &opError{http.StatusTooManyRequests, fmt.Sprintf("you have reached the maximum number of concurrent E2B sandboxes (%d). "+
		"If you need more, please visit 'https://e2b.dev/docs/billing'", s.cfg.MaxSandboxes)}
}

// reserve takes a place under the running cap for a sandbox about to
// start (sb is nil for a new one, which also counts against the stored cap
// and gets a host uid when root sandboxd isolates), after checking that the
// host's disk can hold what the running sandboxes may still write. The
// caller must unreserve.
func (s *Server) reserve(sb *sandbox) (hostUID int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// sb (a paused sandbox being resumed) is not running; it is stored, but the stored cap is
	// only checked for a new one.
	running, stored := s.starting+s.byStart.running, s.starting+len(s.sandboxes)
	if s.cfg.MaxSandboxes > 0 && running >= s.cfg.MaxSandboxes {
		return 0, s.maxSandboxesError()
	}
	if sb == nil && s.cfg.MaxStored > 0 && stored >= s.cfg.MaxStored {
		return 0, &opError{http.StatusTooManyRequests, fmt.Sprintf("sandboxd already keeps %d sandboxes, running and paused, its limit "+
			"(--max-stored-sandboxes): kill the ones you no longer need to create more", s.cfg.MaxStored)}
	}
	if err := s.checkDiskBudgetLocked(sb); err != nil {
		return 0, err
	}
	if sb == nil && s.iso.Root && s.iso.Mode == IsolationBwrap {
		if hostUID, err = s.allocUIDLocked(); err != nil {
			return 0, err
		}
		s.startingUIDs[hostUID] = true
	}
	s.starting++
	return hostUID, nil
}

// checkDiskBudgetLocked refuses a sandbox start when the host's free space
// does not cover what the running sandboxes' disk images may still grow
// by, this one's included, beyond the reserve kept for the host: images
// are sparse, so --disk-limit alone promises space the disk may not have.
// sb is the sandbox being resumed, nil for a new one (a whole image).
func (s *Server) checkDiskBudgetLocked(sb *sandbox) error {
	limit := s.iso.Limits.Disk
	if limit <= 0 || s.cfg.DiskReserve < 0 {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.store.Dir(), &st); err != nil {
		return internalError(fmt.Errorf("free disk space: %w", err))
	}
	free := int64(st.Bavail) * st.Bsize
	others := int64(s.starting) * limit
	for _, other := range s.sandboxes {
		if other != sb && !other.gone && other.rec.State == store.StateRunning {
			others += ImageGrowth(s.store.ImagePath(other.id), limit)
		}
	}
	this := limit
	if sb != nil {
		this = ImageGrowth(s.store.ImagePath(sb.id), limit)
	}
	if others+this+s.cfg.DiskReserve <= free {
		return nil
	}
	return &opError{http.StatusInsufficientStorage, fmt.Sprintf("not enough disk space on the sandbox host: the running sandboxes may still write %s "+
		"and this one %s, but %s is free on %s beyond the %s kept for the host; pause or kill sandboxes, free space or lower --disk-limit",
		machine.FormatBytes(others), machine.FormatBytes(this), machine.FormatBytes(max(free-s.cfg.DiskReserve, 0)), s.cfg.StateDir, machine.FormatBytes(s.cfg.DiskReserve))}
}

// ImageGrowth is how much a disk image may still take on the host: its
// size (the limit) less what it already holds.
func ImageGrowth(img string, limit int64) int64 {
	var st unix.Stat_t
	if err := unix.Stat(img, &st); err != nil {
		return 0 // no image: the sandbox has no disk limit
	}
	return max(limit-st.Blocks*512, 0)
}

func (s *Server) unreserve(hostUID int) {
	s.mu.Lock()
	s.starting--
	delete(s.startingUIDs, hostUID)
	s.mu.Unlock()
}

// allocUIDLocked finds the lowest host uid of the range above the base
// that no sandbox has: a paused sandbox keeps its uid, since its files
// belong to it.
func (s *Server) allocUIDLocked() (int, error) {
	used := map[int]bool{}
	for _, sb := range s.sandboxes {
		used[sb.rec.HostUID] = true
	}
	for uid := s.iso.UIDBase + 1; uid < s.iso.UIDBase+UIDRangeSize; uid++ {
		if !used[uid] && !s.startingUIDs[uid] {
			return uid, nil
		}
	}
	return 0, &opError{http.StatusTooManyRequests, fmt.Sprintf("sandboxd has given out every host uid of its range (%d sandboxes): kill the sandboxes you no longer need", UIDRangeSize-1)}
}

// acquire locks a sandbox for a transition; the caller must sb.op.Unlock().
func (s *Server) acquire(id string) (*sandbox, error) {
	s.mu.Lock()
	sb := s.sandboxes[id]
	s.mu.Unlock()
	if sb == nil {
		return nil, notFound(id)
	}
	sb.op.Lock()
	s.mu.Lock()
	gone := sb.gone
	s.mu.Unlock()
	if gone {
		sb.op.Unlock()
		return nil, notFound(id)
	}
	return sb, nil
}

// get returns a copy of a sandbox's record.
func (s *Server) get(id string) (store.Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sb := s.sandboxes[id]
	if sb == nil || sb.gone {
		return store.Record{}, false
	}
	return sb.rec.Clone(), true
}

// commit stores a new record for sb (whose op lock the caller holds),
// reschedules its timeout, records the event of the change (if typ is not
// empty) and persists the record. The new state and its event become
// visible together: whoever sees the state through the API finds the event
// in the events API.
func (s *Server) commit(sb *sandbox, rec store.Record, typ string, data map[string]any) {
	s.mu.Lock()
	s.byStart.update(sb, rec)
	s.scheduleLocked(sb)
	var ev *event
	if typ != "" {
		ev = s.recordEventLocked(rec, typ, data)
	}
	s.mu.Unlock()
	if err := s.store.Save(rec); err != nil {
		s.log.Error("save sandbox record", "sandbox_id", rec.ID, "err", err)
	}
	s.deliverEvent(ev)
}

func (s *Server) pause(id string, memory bool) error {
	sb, err := s.acquire(id)
	if err != nil {
		return err
	}
	defer sb.op.Unlock()
	return s.pauseLocked(sb, memory)
}

func (s *Server) pauseLocked(sb *sandbox, memory bool) error {
	rec := s.snapshot(sb)
	if rec.State == store.StatePaused {
		return &opError{http.StatusConflict, fmt.Sprintf("Error pausing sandbox - sandbox '%s' is already paused", rec.ID)}
	}
	kind := store.SnapshotFilesystem
	if memory {
		kind = store.SnapshotMemory
		if sb.vm != nil {
			if err := sb.vm.Freeze(); err != nil {
				// Better a cold boot later than a sandbox that runs on while paused.
				s.log.Error("freeze sandbox, stopping it instead", "sandbox_id", rec.ID, "err", err)
				sb.vm.Kill()
				sb.vm = nil
			}
		}
	} else if sb.vm != nil {
		sb.vm.Kill()
		sb.vm = nil
	}
	s.proxy.forget()
	started := rec.StartedAt
	t := now()
	rec.State, rec.Snapshot, rec.EndAt = store.StatePaused, kind, t
	s.commit(sb, rec, EventPaused, map[string]any{"execution": execution(started, t)})
	s.log.Info("sandbox paused", "sandbox_id", rec.ID, "snapshot", string(kind))
	return nil
}

func execution(started, ended time.Time) map[string]any {
	return map[string]any{
		"started_at":     started.Format(time.RFC3339),
		"vcpu_count":     machine.CPUCount,
		"memory_mb":      machine.MemoryMB,
		"execution_time": ended.Sub(started).Milliseconds(),
	}
}

// connect resumes a paused sandbox (resumed=true) or extends a running one.
// keepMemory=false cold-boots even a memory snapshot, like the SDK's
// onResume "reboot".
func (s *Server) connect(id string, timeout time.Duration, keepMemory bool) (rec store.Record, resumed bool, err error) {
	sb, err := s.acquire(id)
	if err != nil {
		return store.Record{}, false, err
	}
	defer sb.op.Unlock()
	return s.connectLocked(sb, timeout, keepMemory)
}

func (s *Server) connectLocked(sb *sandbox, timeout time.Duration, keepMemory bool) (store.Record, bool, error) {
	rec := s.snapshot(sb)
	t := now()
	if rec.State == store.StateRunning {
		if end := t.Add(timeout); end.After(rec.EndAt) {
			rec.EndAt = end
			s.commit(sb, rec, EventUpdated, map[string]any{"set_timeout": end.Format(time.RFC3339)})
		}
		return rec, false, nil
	}
	if _, err := s.reserve(sb); err != nil {
		return store.Record{}, false, err
	}
	defer s.unreserve(0)
	thawed := false
	if rec.Snapshot == store.SnapshotMemory && keepMemory && sb.vm != nil && sb.vm.Alive() {
		if err := sb.vm.Thaw(); err != nil {
			s.log.Error("thaw sandbox, cold-booting it instead", "sandbox_id", rec.ID, "err", err)
		} else {
			thawed = true
		}
	}
	if !thawed && sb.vm != nil {
		sb.vm.Kill()
		sb.vm = nil
	}
	rec.State, rec.Snapshot = store.StateRunning, ""
	rec.StartedAt, rec.EndAt, rec.ExecutionID = t, t.Add(timeout), newUUID()
	// envd is upgraded at resume: the sandbox now runs the version in force.
	rec.EnvdVersion = s.cfg.EnvdVersion
	for _, f := range s.faults.Files(rec.ID) {
		s.damageFiles(sb, f)
	}
	s.commit(sb, rec, EventResumed, nil)
	s.log.Info("sandbox resumed", "sandbox_id", rec.ID)
	return rec, true, nil
}

// setTimeout moves a running sandbox's end to now+timeout, shorter or longer.
func (s *Server) setTimeout(id string, timeout time.Duration) error {
	sb, err := s.acquire(id)
	if err != nil {
		return err
	}
	defer sb.op.Unlock()
	rec := s.snapshot(sb)
	if rec.State != store.StateRunning {
		return notFound(id)
	}
	rec.EndAt = now().Add(timeout)
	s.commit(sb, rec, EventUpdated, map[string]any{"set_timeout": rec.EndAt.Format(time.RFC3339)})
	return nil
}

// refresh extends a running sandbox's end to now+d if that is later.
func (s *Server) refresh(id string, d time.Duration) error {
	sb, err := s.acquire(id)
	if err != nil {
		return err
	}
	defer sb.op.Unlock()
	rec := s.snapshot(sb)
	if rec.State != store.StateRunning {
		return notFound(id)
	}
	if end := now().Add(d); end.After(rec.EndAt) {
		rec.EndAt = end
		s.commit(sb, rec, EventUpdated, map[string]any{"set_timeout": end.Format(time.RFC3339)})
	}
	return nil
}

func (s *Server) kill(id, reason string) error {
	sb, err := s.acquire(id)
	if err != nil {
		return err
	}
	defer sb.op.Unlock()
	s.killLocked(sb, reason)
	return nil
}

func (s *Server) killLocked(sb *sandbox, reason string) {
	s.removeLocked(sb, func() *event { return s.recordEventLocked(sb.rec, EventKilled, killData(sb.rec, reason)) })
	s.log.Info("sandbox killed", "sandbox_id", sb.id, "reason", reason)
}

// lose removes a sandbox with no event and no webhook: what the provider's users report of
// 1–3 % of sandboxes (E2B#1381), and the admin endpoint's "lose".
func (s *Server) lose(id string) error {
	sb, err := s.acquire(id)
	if err != nil {
		return err
	}
	defer sb.op.Unlock()
	s.removeLocked(sb, func() *event { return nil })
	s.log.Warn("sandbox lost: removed with no event", "sandbox_id", id)
	return nil
}

// removeLocked stops a sandbox and deletes it and its files; record, called with s.mu held,
// records the event of its end (or none).
func (s *Server) removeLocked(sb *sandbox, record func() *event) {
	// Gone first, then stopped: a client whose command stream breaks as the processes die
	// asks at once whether the sandbox is still there, and must hear that it is not.
	s.mu.Lock()
	sb.gone = true
	if sb.timer != nil {
		sb.timer.Stop()
	}
	delete(s.sandboxes, sb.id)
	s.byStart.remove(sb)
	ev := record()
	s.mu.Unlock()
	// Its end is told as soon as it is gone from the list, not after the processes and files
	// are cleared (hundreds of milliseconds under load): a client that lists in between must not
	// see a sandbox missing whose end it has not been told.
	s.deliverEvent(ev)
	if sb.vm != nil {
		sb.vm.Kill()
		sb.vm = nil
	}
	s.proxy.forget()
	s.removeSandboxFiles(sb.id)
}

func killData(rec store.Record, reason string) map[string]any {
	data := map[string]any{"kill_reason": reason}
	if rec.State == store.StateRunning {
		data["execution"] = execution(rec.StartedAt, now())
	}
	return data
}

func (s *Server) snapshot(sb *sandbox) store.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sb.rec.Clone()
}

// scheduleLocked (re)arms the timeout of a running sandbox.
func (s *Server) scheduleLocked(sb *sandbox) {
	if sb.timer != nil {
		sb.timer.Stop()
		sb.timer = nil
	}
	if sb.rec.State != store.StateRunning || sb.gone || s.closing {
		return
	}
	end := sb.rec.EndAt
	sb.timer = time.AfterFunc(time.Until(end), func() { s.expire(sb.id, end) })
}

// expire runs the on-timeout action, unless the end moved meanwhile.
func (s *Server) expire(id string, end time.Time) {
	sb, err := s.acquire(id)
	if err != nil {
		return
	}
	defer sb.op.Unlock()
	rec := s.snapshot(sb)
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing || rec.State != store.StateRunning || !rec.EndAt.Equal(end) {
		return
	}
	if rec.AutoPause {
		_ = s.pauseLocked(sb, rec.AutoPauseMemory)
		return
	}
	s.killLocked(sb, KillReasonTimeout)
}

// recordEventLocked appends a lifecycle event to the log; s.mu is held so
// that the change it reports becomes visible at the same time. It returns
// nil when the event could not be written.
func (s *Server) recordEventLocked(rec store.Record, typ string, data map[string]any) *event {
	if len(rec.Metadata) > 0 {
		if data == nil {
			data = map[string]any{}
		}
		data["sandbox_metadata"] = store.CloneMap(rec.Metadata)
	}
	ev := &event{
		Type: typ, EventData: data, SandboxID: rec.ID, SandboxExecution: rec.ExecutionID,
		SandboxTemplateID: rec.TemplateID, SandboxBuildID: baseBuildID, SandboxTeamID: s.teamID,
	}
	if err := s.events.append(ev); err != nil {
		s.log.Error("record event", "sandbox_id", rec.ID, "type", typ, "err", err)
		return nil
	}
	return ev
}

// deliverEvent queues an event for the webhooks subscribed to it.
func (s *Server) deliverEvent(ev *event) {
	if ev != nil {
		s.deliver.enqueue(ev, s.hooks.subscribers(ev.Type))
	}
}

// machineFor returns the sandbox's running machine, booting one when nothing
// has run yet (or after a filesystem snapshot). The caller holds sb.op.
func (s *Server) machineFor(sb *sandbox) (*machine.Machine, error) {
	if sb.vm != nil && sb.vm.Alive() {
		return sb.vm, nil
	}
	if sb.vm != nil {
		s.log.Warn("sandbox stopped on its own, booting it again", "sandbox_id", sb.id)
		sb.vm.Kill()
		sb.vm = nil
	}
	var b machine.Backend
	var err error
	if s.iso.Mode == IsolationNone {
		b, err = machine.BootPlain(sb.dir, s.existingImage(sb.id))
	} else {
		b, err = machine.BootNS(s.nsConfig(sb))
	}
	if err != nil {
		return nil, err
	}
	sb.vm = machine.NewMachine(b)
	return sb.vm, nil
}

func (s *Server) nsConfig(sb *sandbox) machine.NSConfig {
	s.mu.Lock()
	hostUID := sb.rec.HostUID
	s.mu.Unlock()
	cfg := machine.NSConfig{
		ID: sb.id, Dir: sb.dir, HostUID: -1, HostGID: -1, Bwrap: s.iso.Bwrap,
		Cgroups: s.iso.Cgroups, Limits: s.iso.Limits, System: s.iso.System, Log: s.log,
	}
	if s.iso.Root {
		cfg.HostUID, cfg.HostGID = hostUID, hostUID
	}
	cfg.Image = s.existingImage(sb.id)
	return cfg
}

// existingImage is the sandbox's disk image, or "" for a sandbox created
// while the disk limit was off (its files are a plain directory).
func (s *Server) existingImage(id string) string {
	if _, err := os.Stat(s.store.ImagePath(id)); err != nil {
		return ""
	}
	return s.store.ImagePath(id)
}
