package machine

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// On a host whose controllers live in cgroup v1 (this project's CI), the
// v2 code still runs for real where v2 needs no controller: a cgroup2
// mount always has cgroup.freeze and cgroup.kill.
func TestCgroupV2FreezesAndThaws(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: this test needs root")
		}
		t.Skip("needs root (CI=true makes this a failure)")
	}
	mounts, err := readCgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	own, err := readOwnCgroups()
	if err != nil {
		t.Fatal(err)
	}
	var v2 *cgroupMount
	for i := range mounts {
		if mounts[i].v2 {
			v2 = &mounts[i]
			break
		}
	}
	if v2 == nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: no cgroup2 mount")
		}
		t.Skip("no cgroup2 mount")
	}
	ownDir := filepath.Join(v2.point, relCgroup(own[""], v2.root))
	inst, err := prepareV2(ownDir, v2.point, "test-"+strconv.Itoa(os.Getpid()), nil)
	if err != nil {
		t.Fatalf("prepare the instance group: %v", err)
	}
	cg := &Cgroups{freezer: &cgroupController{v2: true, dir: inst}, off: map[string]string{}}
	defer cg.RemoveInstance()
	sc, err := cg.create("sandbox", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = sleep.Wait(); close(done) }()
	if err := sc.add(sleep.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := sc.freeze(); err != nil {
		t.Fatalf("freeze: %v", err)
	}
	events, _ := os.ReadFile(filepath.Join(sc.freezer.dir, "cgroup.events"))
	if !strings.Contains(string(events), "frozen 1") {
		t.Fatalf("cgroup.events after freeze: %s", events)
	}
	if err := sc.thaw(); err != nil {
		t.Fatalf("thaw: %v", err)
	}
	if err := waitCgroupFile(sc.freezer.dir, "cgroup.events", "frozen 0"); err != nil {
		t.Fatal(err)
	}
	// remove kills what is left, frozen or not, and deletes the group.
	if err := sc.freeze(); err != nil {
		t.Fatal(err)
	}
	sc.remove()
	<-done
	if _, err := os.Stat(sc.freezer.dir); !os.IsNotExist(err) {
		t.Fatalf("the sandbox's group outlived remove: %v", err)
	}
}

// The limit files take the kernel's formats, per cgroup version.
func TestCgroupLimitFiles(t *testing.T) {
	for _, v2 := range []bool{true, false} {
		dir := t.TempDir()
		files := []string{"memory.max", "memory.swap.max", "pids.max", "cpu.weight"}
		if !v2 {
			files = []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "pids.max", "cpu.shares"}
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c := &cgroupController{v2: v2, dir: dir}
		sc := &sandboxCgroup{memory: c, pids: c, cpu: c}
		if err := sc.setLimits(Limits{Memory: 256 << 20, Pids: 300, CPUWeight: 50}); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"memory.max": "268435456", "memory.swap.max": "0", "pids.max": "300", "cpu.weight": "50"}
		if !v2 {
			want = map[string]string{"memory.limit_in_bytes": "268435456", "memory.memsw.limit_in_bytes": "268435456", "pids.max": "300", "cpu.shares": "512"}
		}
		for f, v := range want {
			if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != v {
				t.Errorf("v2=%v: %s = %q, want %q", v2, f, b, v)
			}
		}
	}
}

func TestCgroupPaths(t *testing.T) {
	for _, tt := range []struct{ path, root, want string }{
		{"/process_api/abc", "/", "/process_api/abc"},
		{"/docker/x/sub", "/docker/x", "/sub"},
		{"/docker/x", "/docker/x", "/"},
		{"/other", "/docker/x", "/other"},
	} {
		if got := relCgroup(tt.path, tt.root); got != tt.want {
			t.Errorf("relCgroup(%q, %q) = %q, want %q", tt.path, tt.root, got, tt.want)
		}
	}
	if got := unescapeMountinfo(`/state\040dir/x\134y`); got != `/state dir/x\y` {
		t.Errorf("unescape: %q", got)
	}
}

func TestIOWeightKeepsItsMeaningOnEveryScale(t *testing.T) {
	for _, tt := range []struct {
		file   string
		weight int
		want   int
	}{
		{"io.weight", 100, 100},
		{"io.weight", 10000, 10000},
		{"blkio.weight", 100, 500}, // v1's default
		{"blkio.weight", 1, 10},
		{"blkio.weight", 10000, 1000},
		{"blkio.bfq.weight", 100, 100},
		{"io.bfq.weight", 10000, 1000},
		{"io.bfq.weight", 1, 1},
	} {
		if got := ioWeightValue(tt.file, tt.weight); got != tt.want {
			t.Errorf("weight %d in %s: %d, want %d", tt.weight, tt.file, got, tt.want)
		}
	}
}
