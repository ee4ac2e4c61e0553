package machine

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Limits are what one sandbox may use (docs/sandboxd.md, "Limits"). In
// Config a zero field takes DefaultLimits' and a negative one turns that
// limit off; in force, a zero field is off.
type Limits struct {
	// Memory in bytes, swap included: past it the kernel's OOM killer ends a
	// process of the sandbox.
	Memory int64
	// Pids caps processes and threads.
	Pids int
	// CPUWeight is the sandbox's share of CPU time against the other
	// sandboxes, as cgroup v2's cpu.weight (1-10000, the kernel's default is
	// 100); v1's cpu.shares gets weight×1024/100.
	CPUWeight int
	// Disk caps the sandbox's writable files (home and /tmp) in bytes.
	Disk int64
	// IOWeight is the sandbox's share of disk time against the other
	// sandboxes, on cgroup v2's io.weight scale (1-10000, default 100); it
	// needs an I/O scheduler with weights (BFQ).
	IOWeight int
}

// cgroupController is where one controller lives: a directory under which
// sandboxd makes one group per sandbox, in a v1 or the v2 hierarchy.
type cgroupController struct {
	v2  bool
	dir string
}

// Cgroups places sandboxes in control groups under sandboxd's own: one
// directory "sandboxd-<instance>" per hierarchy, one group per sandbox in it.
type Cgroups struct {
	memory, pids, cpu, freezer, io *cgroupController
	// ioWeight is the weight file the I/O controller has here.
	ioWeight string
	// off says, per limit that cannot be enforced here, why.
	off map[string]string
}

// cgroupMount is a cgroup filesystem from /proc/self/mountinfo.
type cgroupMount struct {
	point       string
	root        string
	v2          bool
	controllers []string // v1 only
}

// setupCgroups finds, for each controller sandboxd needs, the hierarchy
// that has it (v2 first), prepares the instance directory under sandboxd's
// own cgroup there, and clears what a previous run left in it. A
// controller that is missing or not writable is reported in off.
func setupCgroups(instance string) *Cgroups {
	cg := &Cgroups{off: map[string]string{}}
	mounts, err := readCgroupMounts()
	var own map[string]string
	if err == nil {
		own, err = readOwnCgroups()
	}
	if err != nil {
		for _, c := range []string{"memory", "pids", "cpu", "freezer", "io"} {
			cg.off[c] = "cannot read this process's cgroups: " + err.Error()
		}
		return cg
	}
	var v2 *cgroupMount
	for i := range mounts {
		if mounts[i].v2 && v2 == nil {
			v2 = &mounts[i]
		}
	}
	var v2Own string
	var v2Controllers []string
	if v2 != nil {
		v2Own = filepath.Join(v2.point, relCgroup(own[""], v2.root))
		if b, err := os.ReadFile(filepath.Join(v2Own, "cgroup.controllers")); err == nil {
			v2Controllers = strings.Fields(string(b))
		}
	}
	v1For := func(controller string) string {
		if controller == "io" {
			controller = "blkio" // v1's name for it
		}
		for _, m := range mounts {
			if !m.v2 && slices.Contains(m.controllers, controller) {
				for key, p := range own {
					if slices.Contains(strings.Split(key, ","), controller) {
						return filepath.Join(m.point, relCgroup(p, m.root))
					}
				}
			}
		}
		return ""
	}

	var v2Want []string
	for _, c := range []string{"memory", "pids", "cpu", "io"} {
		if slices.Contains(v2Controllers, c) {
			v2Want = append(v2Want, c)
		}
	}
	var v2Inst string
	if v2 != nil && (len(v2Want) > 0 || v1For("freezer") == "") {
		var err error
		if v2Inst, err = prepareV2(v2Own, v2.point, instance, v2Want); err != nil {
			for _, c := range v2Want {
				cg.off[c] = offReason(v2Own, err)
			}
			v2Want = nil
			if !errors.Is(err, errNoFreeze) {
				cg.off["freezer"] = offReason(v2Own, err)
			}
			v2Inst = ""
		}
	}
	pick := func(controller string) *cgroupController {
		if slices.Contains(v2Want, controller) {
			return &cgroupController{v2: true, dir: v2Inst}
		}
		own := v1For(controller)
		if own == "" {
			if _, ok := cg.off[controller]; !ok {
				cg.off[controller] = "no " + controller + " controller is mounted"
			}
			return nil
		}
		dir := filepath.Join(own, "sandboxd-"+instance)
		if err := prepareDir(dir); err != nil {
			cg.off[controller] = offReason(own, err)
			return nil
		}
		delete(cg.off, controller)
		return &cgroupController{dir: dir}
	}
	cg.memory, cg.pids, cg.cpu, cg.io = pick("memory"), pick("pids"), pick("cpu"), pick("io")
	if c := cg.io; c != nil {
		files := []string{"blkio.weight", "blkio.bfq.weight"}
		if c.v2 {
			files = []string{"io.weight", "io.bfq.weight"}
		}
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(c.dir, f)); err == nil {
				cg.ioWeight = f
				break
			}
		}
		if cg.ioWeight == "" {
			cg.off["io"] = fmt.Sprintf("the I/O controller has no weights here (no %s or %s: the host's disks need the BFQ scheduler)", files[0], files[1])
			if !c.v2 {
				_ = syscall.Rmdir(c.dir)
			}
			cg.io = nil
		}
	}
	switch {
	case v1For("freezer") != "":
		cg.freezer = pick("freezer")
	case v2Inst != "":
		cg.freezer = &cgroupController{v2: true, dir: v2Inst}
	default:
		if _, ok := cg.off["freezer"]; !ok {
			cg.off["freezer"] = "neither a v1 freezer controller nor cgroup v2's cgroup.freeze is available"
		}
	}
	return cg
}

// offReason words why a controller cannot be used under sandboxd's cgroup.
func offReason(own string, err error) string {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return fmt.Sprintf("sandboxd's cgroup %s is not writable by uid %d: run sandboxd as root, or in a cgroup delegated to it", own, os.Geteuid())
	}
	return err.Error()
}

var errNoFreeze = errors.New("this kernel's cgroup v2 has no cgroup.freeze")

// prepareV2 makes the instance directory in the v2 hierarchy with the
// controllers enabled for the groups below it. v2 allows processes only in
// leaves, so when sandboxd's own cgroup still holds sandboxd itself, it
// first moves into a leaf of its own.
func prepareV2(own, mountPoint, instance string, controllers []string) (string, error) {
	if len(controllers) > 0 {
		enabled, _ := os.ReadFile(filepath.Join(own, "cgroup.subtree_control"))
		var missing []string
		for _, c := range controllers {
			if !slices.Contains(strings.Fields(string(enabled)), c) {
				missing = append(missing, "+"+c)
			}
		}
		if len(missing) > 0 {
			if err := writeCgroupFile(own, "cgroup.subtree_control", strings.Join(missing, " ")); err != nil && errors.Is(err, syscall.EBUSY) && own != mountPoint {
				leaf := filepath.Join(own, "sandboxd-supervisor")
				if err := prepareDir(leaf); err != nil {
					return "", err
				}
				if err := writeCgroupFile(leaf, "cgroup.procs", strconv.Itoa(os.Getpid())); err != nil {
					return "", fmt.Errorf("move sandboxd into %s: %w", leaf, err)
				}
				if err := writeCgroupFile(own, "cgroup.subtree_control", strings.Join(missing, " ")); err != nil {
					return "", fmt.Errorf("enable %s in %s (other processes share sandboxd's cgroup; give it its own, e.g. systemd's Delegate=yes): %w", strings.Join(missing, " "), own, err)
				}
			} else if err != nil {
				return "", fmt.Errorf("enable %s in %s: %w", strings.Join(missing, " "), own, err)
			}
		}
	}
	dir := filepath.Join(own, "sandboxd-"+instance)
	if err := prepareDir(dir); err != nil {
		return "", err
	}
	// The root of a hierarchy has no cgroup.freeze; below it, a kernel
	// older than 5.2 has none either.
	if _, err := os.Stat(filepath.Join(dir, "cgroup.freeze")); err != nil && len(controllers) == 0 {
		_ = syscall.Rmdir(dir)
		return "", errNoFreeze
	}
	if len(controllers) > 0 {
		var plus []string
		for _, c := range controllers {
			plus = append(plus, "+"+c)
		}
		if err := writeCgroupFile(dir, "cgroup.subtree_control", strings.Join(plus, " ")); err != nil {
			return "", fmt.Errorf("enable controllers in %s: %w", dir, err)
		}
	}
	return dir, nil
}

// prepareDir makes a sandboxd-owned cgroup directory and empties it of the
// groups a previous run left behind (their processes died with it, or are
// killed now).
func prepareDir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			removeCgroupDir(filepath.Join(dir, e.Name()))
		}
	}
	return nil
}

// sandboxCgroup is one sandbox's group in each hierarchy in use.
type sandboxCgroup struct {
	memory, pids, cpu, freezer, io *cgroupController // dir is the sandbox's group
	ioWeight                       string
}

func (cg *Cgroups) enforced(controller string) bool {
	_, off := cg.off[controller]
	return !off
}

// create makes the sandbox's groups and writes its limits.
func (cg *Cgroups) create(id string, l Limits) (*sandboxCgroup, error) {
	sc := &sandboxCgroup{}
	made := map[string]bool{}
	sub := func(c *cgroupController) (*cgroupController, error) {
		if c == nil {
			return nil, nil
		}
		dir := filepath.Join(c.dir, id)
		if !made[dir] {
			removeCgroupDir(dir)
			if err := os.Mkdir(dir, 0o755); err != nil {
				return nil, err
			}
			made[dir] = true
		}
		return &cgroupController{v2: c.v2, dir: dir}, nil
	}
	var err error
	fail := func(e error) (*sandboxCgroup, error) {
		sc.remove()
		return nil, fmt.Errorf("sandbox cgroup: %w", e)
	}
	if l.Memory > 0 {
		if sc.memory, err = sub(cg.memory); err != nil {
			return fail(err)
		}
	}
	if l.Pids > 0 {
		if sc.pids, err = sub(cg.pids); err != nil {
			return fail(err)
		}
	}
	if l.CPUWeight > 0 {
		if sc.cpu, err = sub(cg.cpu); err != nil {
			return fail(err)
		}
	}
	if l.IOWeight > 0 {
		if sc.io, err = sub(cg.io); err != nil {
			return fail(err)
		}
		sc.ioWeight = cg.ioWeight
	}
	if sc.freezer, err = sub(cg.freezer); err != nil {
		return fail(err)
	}
	if err := sc.setLimits(l); err != nil {
		return fail(err)
	}
	return sc, nil
}

func (sc *sandboxCgroup) setLimits(l Limits) error {
	if c := sc.memory; c != nil {
		mem := strconv.FormatInt(l.Memory, 10)
		if c.v2 {
			if err := writeCgroupFile(c.dir, "memory.max", mem); err != nil {
				return err
			}
			// No swap: the limit is the limit.
			_ = writeCgroupFile(c.dir, "memory.swap.max", "0")
		} else {
			if err := writeCgroupFile(c.dir, "memory.limit_in_bytes", mem); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(c.dir, "memory.memsw.limit_in_bytes")); err == nil {
				if err := writeCgroupFile(c.dir, "memory.memsw.limit_in_bytes", mem); err != nil {
					return err
				}
			}
		}
	}
	if c := sc.pids; c != nil {
		if err := writeCgroupFile(c.dir, "pids.max", strconv.Itoa(l.Pids)); err != nil {
			return err
		}
	}
	if c := sc.cpu; c != nil {
		var err error
		if c.v2 {
			err = writeCgroupFile(c.dir, "cpu.weight", strconv.Itoa(l.CPUWeight))
		} else {
			err = writeCgroupFile(c.dir, "cpu.shares", strconv.Itoa(max(2, l.CPUWeight*1024/100)))
		}
		if err != nil {
			return err
		}
	}
	if c := sc.io; c != nil {
		return writeCgroupFile(c.dir, sc.ioWeight, strconv.Itoa(ioWeightValue(sc.ioWeight, l.IOWeight)))
	}
	return nil
}

// ioWeightsIgnored says why BFQ's weights (file) would do nothing for the
// disk dir is on: that disk's scheduler is another one. "" when they count.
func ioWeightsIgnored(file, dir string) string {
	if !strings.Contains(file, "bfq") {
		return ""
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return "cannot find the state directory's disk: " + err.Error()
	}
	dev := filepath.Join("/sys/dev/block", fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
	b, err := os.ReadFile(filepath.Join(dev, "queue", "scheduler"))
	if err != nil {
		// A partition: its disk's queue is one level up.
		b, err = os.ReadFile(filepath.Join(dev, "..", "queue", "scheduler"))
	}
	if err != nil {
		return "the state directory is not on a block device with an I/O scheduler (" + dev + ")"
	}
	sched := string(b)
	if i, j := strings.Index(sched, "["), strings.Index(sched, "]"); i >= 0 && j > i {
		sched = sched[i+1 : j]
	}
	if sched == "bfq" {
		return ""
	}
	name, _ := filepath.EvalSymlinks(dev)
	disk := filepath.Base(name)
	return fmt.Sprintf("the state directory's disk (%s) uses the %q I/O scheduler, which ignores %s; BFQ honours it (echo bfq > /sys/block/%s/queue/scheduler)",
		disk, strings.TrimSpace(sched), file, disk)
}

// ioWeightValue converts a weight on io.weight's scale (default 100) to the
// scale of file: blkio.weight's default is 500 (10-1000), the BFQ files'
// 100 (1-1000).
func ioWeightValue(file string, w int) int {
	switch file {
	case "blkio.weight":
		return min(max(w*5, 10), 1000)
	case "io.bfq.weight", "blkio.bfq.weight":
		return min(max(w, 1), 1000)
	}
	return w
}

func (sc *sandboxCgroup) dirs() []string {
	var out []string
	for _, c := range []*cgroupController{sc.memory, sc.pids, sc.cpu, sc.freezer, sc.io} {
		if c != nil && !slices.Contains(out, c.dir) {
			out = append(out, c.dir)
		}
	}
	return out
}

// add moves pid into every group of the sandbox.
func (sc *sandboxCgroup) add(pid int) error {
	for _, dir := range sc.dirs() {
		if err := writeCgroupFile(dir, "cgroup.procs", strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

func (sc *sandboxCgroup) canFreeze() bool { return sc.freezer != nil }

// freeze stops every process of the group and waits until the kernel says
// they all are.
func (sc *sandboxCgroup) freeze() error {
	c := sc.freezer
	if c.v2 {
		if err := writeCgroupFile(c.dir, "cgroup.freeze", "1"); err != nil {
			return err
		}
		return waitCgroupFile(c.dir, "cgroup.events", "frozen 1")
	}
	if err := writeCgroupFile(c.dir, "freezer.state", "FROZEN"); err != nil {
		return err
	}
	return waitCgroupFile(c.dir, "freezer.state", "FROZEN")
}

func (sc *sandboxCgroup) thaw() error {
	c := sc.freezer
	if c == nil {
		return nil
	}
	if c.v2 {
		return writeCgroupFile(c.dir, "cgroup.freeze", "0")
	}
	return writeCgroupFile(c.dir, "freezer.state", "THAWED")
}

// remove deletes the sandbox's groups; their processes must be gone.
func (sc *sandboxCgroup) remove() {
	for _, dir := range sc.dirs() {
		removeCgroupDir(dir)
	}
}

// removeCgroupDir kills what is left in a group (a crashed run's sandbox),
// thaws it so that the kill lands, and removes it.
func removeCgroupDir(dir string) {
	if b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs")); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	_ = writeCgroupFile(dir, "freezer.state", "THAWED")
	_ = writeCgroupFile(dir, "cgroup.freeze", "0")
	for i := 0; ; i++ {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) || i == 50 {
			return
		}
		// The last tasks of a killed group take a moment to leave it.
		time.Sleep(20 * time.Millisecond)
	}
}

func writeCgroupFile(dir, name, value string) error {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %q to %s: %w", value, filepath.Join(dir, name), err)
	}
	return nil
}

// waitCgroupFile polls dir/name until a line equals want, for up to 5s: a
// task in the middle of I/O freezes only when that returns.
func waitCgroupFile(dir, name, want string) error {
	delay := time.Millisecond
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(line) == want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no %q after 5s", filepath.Join(dir, name), want)
		}
		time.Sleep(delay)
		delay = min(2*delay, 20*time.Millisecond)
	}
}

// RemoveInstance removes the instance directories at shutdown.
func (cg *Cgroups) RemoveInstance() {
	seen := map[string]bool{}
	for _, c := range []*cgroupController{cg.memory, cg.pids, cg.cpu, cg.freezer, cg.io} {
		if c != nil && !seen[c.dir] {
			seen[c.dir] = true
			_ = syscall.Rmdir(c.dir)
		}
	}
}

// readCgroupMounts lists cgroup and cgroup2 mounts.
func readCgroupMounts() ([]cgroupMount, error) {
	mounts, err := readMountinfo()
	if err != nil {
		return nil, err
	}
	var out []cgroupMount
	for _, m := range mounts {
		switch m.fstype {
		case "cgroup2":
			out = append(out, cgroupMount{point: m.point, root: m.root, v2: true})
		case "cgroup":
			out = append(out, cgroupMount{point: m.point, root: m.root, controllers: strings.Split(m.super, ",")})
		}
	}
	return out, nil
}

// mountEntry is a line of /proc/self/mountinfo.
type mountEntry struct {
	root, point   string
	fstype, super string
}

func readMountinfo() ([]mountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []mountEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 {
			continue
		}
		out = append(out, mountEntry{root: unescapeMountinfo(fields[3]), point: unescapeMountinfo(fields[4]), fstype: tail[0], super: tail[2]})
	}
	return out, sc.Err()
}

// readOwnCgroups maps each hierarchy's controller list ("" for v2) to this
// process's cgroup path in it.
func readOwnCgroups() (map[string]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			own[parts[1]] = parts[2]
		}
	}
	return own, nil
}

// relCgroup makes a cgroup path relative to the root its hierarchy is
// mounted from (not "/" inside some containers).
func relCgroup(p, root string) string {
	if root != "/" && (p == root || strings.HasPrefix(p, root+"/")) {
		p = strings.TrimPrefix(p, root)
	}
	return filepath.Clean("/" + p)
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
