package machine

import (
	"os"
	"strconv"
	"strings"
)

// descendants returns pid and every process below it, parents first, as
// the /proc of the caller's PID namespace shows them.
func descendants(pid int) []int {
	children := map[int][]int{}
	for _, p := range allPids() {
		if pp := parentPid(p); pp > 0 {
			children[pp] = append(children[pp], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

func allPids() []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	pids := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parentPid reads the ppid field of /proc/<pid>/stat. The command name in
// parentheses may hold spaces and parentheses, so fields are counted from
// the last ')'.
func parentPid(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(fields[1])
	return pp
}
