package machine

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

// Isolation selects how sandbox processes are contained.
type Isolation string

const (
	// IsolationAuto isolates with what works here (today: bubblewrap) and
	// refuses to start when nothing does. It never falls back to none.
	IsolationAuto Isolation = "auto"
	// IsolationBwrap runs every sandbox in its own user, PID, mount,
	// network, IPC and UTS namespaces through bubblewrap, as an unprivileged
	// user with no capabilities, under the limits (docs/sandboxd.md).
	IsolationBwrap Isolation = "bwrap"
	// IsolationNone runs commands as host processes of sandboxd's user in
	// the sandbox directory, on the host network, with no limits: only for
	// trusted code. Two sandboxes cannot listen on the same port.
	IsolationNone Isolation = "none"
)

const (
	// UIDRangeSize is how many host uids one root sandboxd uses, from
	// its base: the base for its start-up probe, the rest for sandboxes.
	UIDRangeSize = 1 << 16
	// CPUCount is the CPUs a sandbox reports; MemoryMB and DiskSizeMB are
	// its nominal size, as the API reports it where no limit is in force.
	CPUCount   = 2
	MemoryMB   = 512
	DiskSizeMB = 1024
)

// Config is what Detect needs of sandboxd's configuration.
type Config struct {
	Isolation Isolation
	StateDir  string
	UIDBase   int
	ShareOpt  bool
	Limits    Limits
}

// Host is what sandboxd found it can enforce here, decided once at
// start and reported in its log and at GET /_sandboxd/isolation.
type Host struct {
	Mode   Isolation
	Reason string
	Bwrap  string
	// root: sandboxd runs as root, and each sandbox's user is a host uid of
	// its own from uidBase up; otherwise it is sandboxd's own uid.
	Root    bool
	UIDBase int
	// limits holds what is in force; a zero field is off, and off says why.
	Limits  Limits
	off     map[string]string
	Cgroups *Cgroups
	// pause is how a memory pause stops a sandbox.
	pause string
	// system is what of the host's system directories sandboxes see.
	System hostSystem
	// uidLock holds this root sandboxd's uid range (uidlock.go).
	uidLock *os.File
}

// Release gives up what Detect claimed.
func (iso *Host) Release() {
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

func Detect(cfg Config) (_ *Host, err error) {
	iso := &Host{Mode: cfg.Isolation, Root: os.Geteuid() == 0, UIDBase: cfg.UIDBase, off: map[string]string{}}
	if cfg.Isolation == IsolationNone {
		iso.Reason = "configured: --isolation=none"
		for _, l := range []string{"memory", "pids", "cpu", "disk", "io"} {
			iso.off[l] = "no isolation"
		}
		iso.pause = "SIGSTOP to the sandbox's process group"
		return iso, nil
	}
	fail := func(why error) (*Host, error) {
		return nil, fmt.Errorf("sandboxd: %w: %v; --isolation=none runs them as plain host processes instead, "+
			"which is unsafe for untrusted code", errNoIsolation, why)
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return fail(errors.New("bwrap not found (apt-get install bubblewrap)"))
	}
	iso.Bwrap = bwrap
	if iso.Root {
		if err := checkSearchable(cfg.StateDir); err != nil {
			return nil, fmt.Errorf("sandboxd: %w", err)
		}
		// Before the probe, which runs as the range's first uid.
		if iso.uidLock, err = lockUIDRange(cfg.UIDBase, cfg.StateDir); err != nil {
			return nil, fmt.Errorf("sandboxd: %w", err)
		}
		defer func() {
			if err != nil {
				iso.Release()
			}
		}()
	}
	if iso.System, err = hostSystemDirs(cfg.ShareOpt, iso.probeUID()); err != nil {
		return nil, fmt.Errorf("sandboxd: %w", err)
	}
	if err := probeNamespaces(bwrap, iso.probeUID(), iso.System); err != nil {
		return fail(err)
	}
	iso.Mode = IsolationBwrap
	iso.Reason = "bubblewrap with unprivileged user namespaces works"

	want := cfg.Limits
	iso.Cgroups = setupCgroups(instanceName(cfg.StateDir))
	check := func(name, controller string, on bool) bool {
		switch {
		case !on:
			iso.off[name] = "turned off by configuration"
		case !iso.Cgroups.enforced(controller):
			iso.off[name] = iso.Cgroups.off[controller]
		default:
			return true
		}
		return false
	}
	if check("memory", "memory", want.Memory > 0) {
		iso.Limits.Memory = want.Memory
	}
	if check("pids", "pids", want.Pids > 0) {
		iso.Limits.Pids = want.Pids
	}
	if check("cpu", "cpu", want.CPUWeight > 0) {
		iso.Limits.CPUWeight = want.CPUWeight
	}
	if check("io", "io", want.IOWeight > 0) {
		if why := ioWeightsIgnored(iso.Cgroups.ioWeight, cfg.StateDir); why != "" {
			iso.off["io"] = why
		} else {
			iso.Limits.IOWeight = want.IOWeight
		}
	}
	switch {
	case want.Disk <= 0:
		iso.off["disk"] = "turned off by configuration"
	default:
		if err := diskTools(); err != nil {
			iso.off["disk"] = err.Error()
		} else {
			iso.Limits.Disk = want.Disk
		}
	}
	if iso.Cgroups.enforced("freezer") {
		iso.pause = "freezer cgroup"
	} else {
		iso.pause = "SIGSTOP to every process of the sandbox (" + iso.Cgroups.off["freezer"] + ")"
	}
	return iso, nil
}

// probeUID is the host uid a probe sandbox runs as: the one below the
// sandboxes' range as root, sandboxd's own otherwise.
func (iso *Host) probeUID() int {
	if iso.Root {
		return iso.UIDBase
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
	b, err := BootNS(NSConfig{
		ID: "probe", Dir: filepath.Join(dir, "sandbox"), HostUID: uid, HostGID: uid, Bwrap: bwrap,
		System: system, Log: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	defer b.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, _, err := b.do(ctx, agentRequest{Op: opIsDir, Path: HomeDir}, 0)
	if err != nil {
		return fmt.Errorf("sandbox agent: %w", err)
	}
	if !resp.IsDir {
		return errors.New("the probe sandbox has no home directory")
	}
	return nil
}

// Report is the isolation and limits in force with sandboxd's caps: running
// and kept sandboxes, and the disk reserve (negative: not checked).
func (iso *Host) Report(maxSandboxes, maxStored int, diskReserve int64) IsolationReport {
	r := IsolationReport{Mode: iso.Mode, Reason: iso.Reason, Limits: map[string]string{}, Off: iso.off, Pause: iso.pause,
		MaxSandboxes: maxSandboxes, MaxStored: maxStored}
	if iso.Mode == IsolationBwrap {
		r.Syscalls = syscallFilterReport()
		for _, e := range iso.System.entries {
			r.HostPaths = append(r.HostPaths, e.path)
		}
		etc, masks := etcEntries(iso.probeUID())
		for _, e := range etc {
			r.HostPaths = append(r.HostPaths, e.path)
		}
		r.Masked = append(masks, iso.System.masks...)
		r.Confinement = []string{
			"a fresh, empty session keyring; /proc/keys and /proc/key-users read empty",
			"RLIMIT_CORE 0, soft and hard: no core dumps",
			fmt.Sprintf("at most %d pseudo-terminals (its own devpts)", maxPtys),
			"the agent, PID 1, drops every signal sent to it",
		}
		r.Limits["ptys"] = strconv.Itoa(maxPtys)
		if iso.Limits.Disk > 0 && diskReserve >= 0 {
			r.DiskReserve = FormatBytes(diskReserve)
		}
	}
	switch {
	case iso.Mode == IsolationNone:
		r.User = fmt.Sprintf("sandboxd's own user (uid %d) on the host, with its rights", os.Geteuid())
	case iso.Root:
		r.User = fmt.Sprintf("uid %d (%s) in the sandbox's user namespace, host uid %d+ (one per sandbox), no capabilities", sandboxUID, sandboxUser, iso.UIDBase+1)
		r.HostUIDs = []int{iso.UIDBase + 1, iso.UIDBase + UIDRangeSize - 1}
	default:
		r.User = fmt.Sprintf("uid %d (%s) in the sandbox's user namespace, host uid %d (sandboxd's own), no capabilities", sandboxUID, sandboxUser, os.Geteuid())
	}
	l := iso.Limits
	if l.Memory > 0 {
		r.Limits["memory"] = FormatBytes(l.Memory)
	}
	if l.Pids > 0 {
		r.Limits["pids"] = strconv.Itoa(l.Pids)
	}
	if l.CPUWeight > 0 {
		r.Limits["cpu"] = "weight " + strconv.Itoa(l.CPUWeight)
	}
	if l.Disk > 0 {
		r.Limits["disk"] = FormatBytes(l.Disk)
	}
	if l.IOWeight > 0 {
		r.Limits["io"] = "weight " + strconv.Itoa(l.IOWeight)
	}
	return r
}

// MemoryMB is the memory a sandbox may use, as the API reports its size: the
// limit in force, else the nominal size.
func (iso *Host) MemoryMB() int {
	if iso.Limits.Memory > 0 {
		return int(iso.Limits.Memory >> 20)
	}
	return MemoryMB
}

// DiskMB is the disk a sandbox may fill, like MemoryMB.
func (iso *Host) DiskMB() int {
	if iso.Limits.Disk > 0 {
		return int(iso.Limits.Disk >> 20)
	}
	return DiskSizeMB
}

// LogReport writes the report at start: one line for the isolation, one
// per limit in force, one warning per limit that is off.
func LogReport(log *slog.Logger, r IsolationReport) {
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
