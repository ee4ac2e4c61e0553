package machine

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Usage is what a sandbox uses at one moment: the CPU time its processes have had, its
// memory as its cgroup counts it, its disk as its image's filesystem does. A figure the host
// cannot give (no cgroup, no image) is zero.
type Usage struct {
	CPUNanos           uint64
	MemUsed, MemCache  int64
	DiskUsed, DiskSize int64
}

// Usage measures m now.
func (m *Machine) Usage() Usage { return m.b.usage() }

func (b *nsBackend) usage() Usage {
	var u Usage
	if b.cg != nil {
		u = b.cg.usage()
	}
	b.mu.Lock()
	mounted := b.mounted
	b.mu.Unlock()
	if mounted {
		u.DiskUsed, u.DiskSize = diskUsage(b.cfg.Dir)
	}
	return u
}

// usage without isolation is nothing: no group holds the sandbox's processes alone.
func (b *plainBackend) usage() Usage { return Usage{} }

// diskUsage is the used and total bytes of the filesystem at dir, as df counts them.
func diskUsage(dir string) (used, total int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, int64(st.Blocks) * st.Bsize
}

// usage reads the sandbox's groups. Memory used leaves out the page cache the kernel can
// drop (inactive files), as envd's "used" does; CPU is the group's own counter where there
// is one (v2's cpu.stat, v1's cpuacct), else the CPU time of the group's processes and of
// the children they reaped.
func (sc *sandboxCgroup) usage() Usage {
	var u Usage
	if c := sc.memory; c != nil {
		stat := readKeyed(filepath.Join(c.dir, "memory.stat"))
		if c.v2 {
			u.MemUsed = readInt(filepath.Join(c.dir, "memory.current")) - stat["inactive_file"]
			u.MemCache = stat["file"]
		} else {
			u.MemUsed = readInt(filepath.Join(c.dir, "memory.usage_in_bytes")) - stat["total_inactive_file"]
			u.MemCache = stat["total_cache"]
		}
		u.MemUsed = max(u.MemUsed, 0)
	}
	if c := sc.cpu; c != nil && c.v2 {
		u.CPUNanos = uint64(readKeyed(filepath.Join(c.dir, "cpu.stat"))["usage_usec"]) * 1000
		return u
	}
	if c := sc.cpu; c != nil {
		if n := readInt(filepath.Join(c.dir, "cpuacct.usage")); n > 0 {
			u.CPUNanos = uint64(n)
			return u
		}
	}
	for _, c := range []*cgroupController{sc.pids, sc.memory, sc.freezer} {
		if c != nil {
			u.CPUNanos = procsCPU(filepath.Join(c.dir, "cgroup.procs"))
			break
		}
	}
	return u
}

// procsCPU sums utime, stime, cutime and cstime of the processes listed in procsFile.
func procsCPU(procsFile string) uint64 {
	b, err := os.ReadFile(procsFile)
	if err != nil {
		return 0
	}
	var ticks uint64
	for _, pid := range strings.Fields(string(b)) {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			continue
		}
		// The command name may hold spaces; the fields after its ")" are fixed.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		// After ")": state is field 3 of proc(5), so utime (14) is f[11] … cstime (17) f[14].
		if len(f) < 15 {
			continue
		}
		for _, s := range f[11:15] {
			n, _ := strconv.ParseUint(s, 10, 64)
			ticks += n
		}
	}
	// USER_HZ is 100 on every architecture Linux runs Go on.
	return ticks * 1e7
}

func readInt(file string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// readKeyed reads a "key value" per line file (memory.stat, cpu.stat).
func readKeyed(file string) map[string]int64 {
	out := map[string]int64{}
	f, err := os.Open(file)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}
