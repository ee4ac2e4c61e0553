package sandboxd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"
)

// isolation is what sandboxd found it can enforce here, decided once at
// start and reported in its log and at GET /_sandboxd/isolation.
type isolation struct {
	mode   Isolation
	reason string
	bwrap  string
	// root: sandboxd runs as root, and each sandbox's user is a host uid of
	// its own from uidBase up; otherwise it is sandboxd's own uid.
	root    bool
	uidBase int
	// limits holds what is in force; a zero field is off, and off says why.
	limits Limits
	off    map[string]string
	cg     *cgroups
	// pause is how a memory pause stops a sandbox.
	pause string
	// system is what of the host's system directories sandboxes see.
	system hostSystem
	// uidLock holds this root sandboxd's uid range (uidlock.go).
	uidLock *os.File
}

// release gives up what detectIsolation claimed.
func (iso *isolation) release() {
	unlockUIDRange(iso.uidLock)
	iso.uidLock = nil
}

// IsolationReport is the isolation and limits in force, as sandboxd logs
// them at start and answers them at GET /_sandboxd/isolation.
type IsolationReport struct {
	Mode   Isolation `json:"mode"`
	Reason string    `json:"reason"`
	// User says who a sandbox's processes are, inside and on the host.
	User string `json:"user"`
	// HostUIDs is the first and last host uid of root sandboxd's range.
	HostUIDs []int `json:"hostUIDs,omitempty"`
	// Limits maps each limit in force to its value.
	Limits map[string]string `json:"limits"`
	// Off maps each limit not in force to the reason.
	Off map[string]string `json:"off,omitempty"`
	// Pause says how a memory pause stops a sandbox.
	Pause string `json:"pause"`
	// MaxSandboxes is the cap on running sandboxes (0: none).
	MaxSandboxes int `json:"maxSandboxes"`
	// MaxStored is the cap on sandboxes kept, running and paused (0: none).
	MaxStored int `json:"maxStored"`
	// DiskReserve is the free space disk images may never take ("" when
	// the disk budget is not checked).
	DiskReserve string `json:"diskReserve,omitempty"`
	// Syscalls is the system-call filter every sandbox process runs under.
	Syscalls *SyscallFilter `json:"syscalls,omitempty"`
	// HostPaths are the host's paths a sandbox sees, read-only.
	HostPaths []string `json:"hostPaths,omitempty"`
	// Masked are the host's sockets, FIFOs and devices under HostPaths,
	// which sandboxes see as /dev/null.
	Masked []string `json:"masked,omitempty"`
	// Confinement lists what else holds every sandbox process.
	Confinement []string `json:"confinement,omitempty"`
}

// errNoIsolation is wrapped by New's error when sandboxes cannot be
// isolated here and IsolationNone was not asked for.
var errNoIsolation = errors.New("cannot isolate sandboxes here")

// ErrNoIsolation reports whether New failed because isolation is
// unavailable (and --isolation=none is the way to start anyway).
func ErrNoIsolation(err error) bool { return errors.Is(err, errNoIsolation) }

func detectIsolation(cfg Config) (_ *isolation, err error) {
	iso := &isolation{mode: cfg.Isolation, root: os.Geteuid() == 0, uidBase: cfg.UIDBase, off: map[string]string{}}
	if cfg.Isolation == IsolationNone {
		iso.reason = "configured: --isolation=none"
		for _, l := range []string{"memory", "pids", "cpu", "disk", "io"} {
			iso.off[l] = "no isolation"
		}
		iso.pause = "SIGSTOP to the sandbox's process group"
		return iso, nil
	}
	fail := func(why error) (*isolation, error) {
		return nil, fmt.Errorf("sandboxd: %w: %v; --isolation=none runs them as plain host processes instead, "+
			"which is unsafe for untrusted code", errNoIsolation, why)
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return fail(errors.New("bwrap not found (apt-get install bubblewrap)"))
	}
	iso.bwrap = bwrap
	if iso.root {
		if err := checkSearchable(cfg.StateDir); err != nil {
			return nil, fmt.Errorf("sandboxd: %w", err)
		}
		// Before the probe, which runs as the range's first uid.
		if iso.uidLock, err = lockUIDRange(cfg.UIDBase, cfg.StateDir); err != nil {
			return nil, fmt.Errorf("sandboxd: %w", err)
		}
		defer func() {
			if err != nil {
				iso.release()
			}
		}()
	}
	if iso.system, err = hostSystemDirs(cfg.ShareOpt, iso.probeUID()); err != nil {
		return nil, fmt.Errorf("sandboxd: %w", err)
	}
	if err := probeNamespaces(bwrap, iso.probeUID(), iso.system); err != nil {
		return fail(err)
	}
	iso.mode = IsolationBwrap
	iso.reason = "bubblewrap with unprivileged user namespaces works"

	want := cfg.Limits
	iso.cg = setupCgroups(instanceName(cfg.StateDir))
	check := func(name, controller string, on bool) bool {
		switch {
		case !on:
			iso.off[name] = "turned off by configuration"
		case !iso.cg.enforced(controller):
			iso.off[name] = iso.cg.off[controller]
		default:
			return true
		}
		return false
	}
	if check("memory", "memory", want.Memory > 0) {
		iso.limits.Memory = want.Memory
	}
	if check("pids", "pids", want.Pids > 0) {
		iso.limits.Pids = want.Pids
	}
	if check("cpu", "cpu", want.CPUWeight > 0) {
		iso.limits.CPUWeight = want.CPUWeight
	}
	if check("io", "io", want.IOWeight > 0) {
		if why := ioWeightsIgnored(iso.cg.ioWeight, cfg.StateDir); why != "" {
			iso.off["io"] = why
		} else {
			iso.limits.IOWeight = want.IOWeight
		}
	}
	switch {
	case want.Disk <= 0:
		iso.off["disk"] = "turned off by configuration"
	default:
		if err := diskTools(); err != nil {
			iso.off["disk"] = err.Error()
		} else {
			iso.limits.Disk = want.Disk
		}
	}
	if iso.cg.enforced("freezer") {
		iso.pause = "freezer cgroup"
	} else {
		iso.pause = "SIGSTOP to every process of the sandbox (" + iso.cg.off["freezer"] + ")"
	}
	return iso, nil
}

// probeUID is the host uid a probe sandbox runs as: the one below the
// sandboxes' range as root, sandboxd's own otherwise.
func (iso *isolation) probeUID() int {
	if iso.root {
		return iso.uidBase
	}
	return -1
}

// instanceName names this sandboxd's cgroups after its state directory, so
// that a restart finds and clears what a crashed run left.
func instanceName(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:6])
}

// checkSearchable makes sure a sandbox's user, another host uid, can reach
// the sandbox's directory: bubblewrap resolves what it binds with that
// user's rights. Only search permission is needed, not listing.
func checkSearchable(stateDir string) error {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("sandbox users cannot reach the state directory %s: %s is mode %04o; "+
				"chmod o+x it or choose another --state-dir", abs, dir, fi.Mode().Perm())
		}
		if dir == "/" {
			return nil
		}
	}
}

var (
	probeMu sync.Mutex
	probes  = map[string]error{}
)

// probeNamespaces boots one throwaway sandbox with its agent and asks it
// one question: the whole path sandboxd relies on, its confinement
// included, checked once per process.
func probeNamespaces(bwrap string, uid int, system hostSystem) error {
	key := bwrap + "/" + strconv.Itoa(uid) + "/" + fmt.Sprint(system.entries)
	probeMu.Lock()
	defer probeMu.Unlock()
	if err, ok := probes[key]; ok {
		return err
	}
	err := probeOnce(bwrap, uid, system)
	probes[key] = err
	return err
}

func probeOnce(bwrap string, uid int, system hostSystem) error {
	dir, err := os.MkdirTemp("", "sandboxd-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	b, err := bootNS(nsConfig{
		id: "probe", dir: filepath.Join(dir, "sandbox"), hostUID: uid, hostGID: uid, bwrap: bwrap,
		system: system, log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	defer b.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, _, err := b.do(ctx, agentRequest{Op: opIsDir, Path: homeDir}, 0)
	if err != nil {
		return fmt.Errorf("sandbox agent: %w", err)
	}
	if !resp.IsDir {
		return errors.New("the probe sandbox has no home directory")
	}
	return nil
}

func (iso *isolation) report(cfg Config) IsolationReport {
	r := IsolationReport{Mode: iso.mode, Reason: iso.reason, Limits: map[string]string{}, Off: iso.off, Pause: iso.pause,
		MaxSandboxes: cfg.MaxSandboxes, MaxStored: cfg.MaxStored}
	if iso.mode == IsolationBwrap {
		r.Syscalls = syscallFilterReport()
		for _, e := range iso.system.entries {
			r.HostPaths = append(r.HostPaths, e.path)
		}
		etc, masks := etcEntries(iso.probeUID())
		for _, e := range etc {
			r.HostPaths = append(r.HostPaths, e.path)
		}
		r.Masked = append(masks, iso.system.masks...)
		r.Confinement = []string{
			"a fresh, empty session keyring; /proc/keys and /proc/key-users read empty",
			"RLIMIT_CORE 0, soft and hard: no core dumps",
			fmt.Sprintf("at most %d pseudo-terminals (its own devpts)", maxPtys),
			"the agent, PID 1, drops every signal sent to it",
		}
		r.Limits["ptys"] = strconv.Itoa(maxPtys)
		if iso.limits.Disk > 0 && cfg.DiskReserve >= 0 {
			r.DiskReserve = formatBytes(cfg.DiskReserve)
		}
	}
	switch {
	case iso.mode == IsolationNone:
		r.User = fmt.Sprintf("sandboxd's own user (uid %d) on the host, with its rights", os.Geteuid())
	case iso.root:
		r.User = fmt.Sprintf("uid %d (%s) in the sandbox's user namespace, host uid %d+ (one per sandbox), no capabilities", sandboxUID, sandboxUser, iso.uidBase+1)
		r.HostUIDs = []int{iso.uidBase + 1, iso.uidBase + UIDRangeSize - 1}
	default:
		r.User = fmt.Sprintf("uid %d (%s) in the sandbox's user namespace, host uid %d (sandboxd's own), no capabilities", sandboxUID, sandboxUser, os.Geteuid())
	}
	l := iso.limits
	if l.Memory > 0 {
		r.Limits["memory"] = formatBytes(l.Memory)
	}
	if l.Pids > 0 {
		r.Limits["pids"] = strconv.Itoa(l.Pids)
	}
	if l.CPUWeight > 0 {
		r.Limits["cpu"] = "weight " + strconv.Itoa(l.CPUWeight)
	}
	if l.Disk > 0 {
		r.Limits["disk"] = formatBytes(l.Disk)
	}
	if l.IOWeight > 0 {
		r.Limits["io"] = "weight " + strconv.Itoa(l.IOWeight)
	}
	return r
}

// memoryMB is the memory a sandbox may use, as the API reports its size: the
// limit in force, else the nominal size.
func (iso *isolation) memoryMB() int {
	if iso.limits.Memory > 0 {
		return int(iso.limits.Memory >> 20)
	}
	return memoryMB
}

// diskMB is the disk a sandbox may fill, like memoryMB.
func (iso *isolation) diskMB() int {
	if iso.limits.Disk > 0 {
		return int(iso.limits.Disk >> 20)
	}
	return diskSizeMB
}

// logReport writes the report at start: one line for the isolation, one
// per limit in force, one warning per limit that is off.
func logReport(log *slog.Logger, r IsolationReport) {
	if r.Mode == IsolationNone {
		log.Warn("sandbox isolation", "mode", string(r.Mode), "reason", r.Reason, "user", r.User,
			"warning", "sandboxes run as plain host processes: their code can read and change whatever sandboxd's user can; use only with trusted code")
	} else {
		log.Info("sandbox isolation", "mode", string(r.Mode), "reason", r.Reason, "user", r.User, "pause", r.Pause)
	}
	names := make([]string, 0, len(r.Limits))
	for n := range r.Limits {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		log.Info("sandbox limit", "limit", n, "value", r.Limits[n])
	}
	names = names[:0]
	for n := range r.Off {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		log.Warn("sandbox limit off", "limit", n, "reason", r.Off[n])
	}
	if r.MaxSandboxes > 0 {
		log.Info("sandbox limit", "limit", "running sandboxes", "value", r.MaxSandboxes)
	} else {
		log.Warn("sandbox limit off", "limit", "running sandboxes", "reason", "turned off by configuration")
	}
	if r.MaxStored > 0 {
		log.Info("sandbox limit", "limit", "stored sandboxes", "value", r.MaxStored)
	}
	if r.DiskReserve != "" {
		log.Info("sandbox limit", "limit", "disk budget", "value", "the host's free space less "+r.DiskReserve)
	}
	if r.Syscalls != nil {
		log.Info("sandbox system calls", "denied", deniedNames(), "refusal", r.Syscalls.Refusal)
	}
	for _, m := range r.Masked {
		log.Warn("masking a socket, FIFO or device the sandboxes would see", "path", m)
	}
}
