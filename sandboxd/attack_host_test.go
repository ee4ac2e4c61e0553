package sandboxd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// The attacks of issue 20 that need a sandboxd of their own (a host file
// made before it starts, a configuration of their own, its CPU time
// measured alone) live here; the rest are in runAttacks.

var (
	probeOnce sync.Once
	probeBin  []byte
	probeErr  error
)

// uploadProbe puts testdata/probe, a static program that tries from
// inside what a sandbox must not do, at /home/user/probe.
func (c *client) uploadProbe(sb sandboxBody) {
	c.t.Helper()
	probeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sandboxd-probe-bin-")
		if err != nil {
			probeErr = err
			return
		}
		defer os.RemoveAll(dir)
		goTool, err := exec.LookPath("go")
		if err != nil {
			probeErr = fmt.Errorf("the go command, to build the probe: %w", err)
			return
		}
		cmd := exec.Command(goTool, "build", "-o", filepath.Join(dir, "probe"), "./testdata/probe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			probeErr = fmt.Errorf("build the probe: %v\n%s", err, out)
			return
		}
		probeBin, probeErr = os.ReadFile(filepath.Join(dir, "probe"))
	})
	if probeErr != nil {
		c.t.Fatal(probeErr)
	}
	c.upload(sb, "/home/user/probe", string(probeBin))
	if res := c.run(sb, "chmod +x probe && echo ok"); res.stdout != "ok\n" {
		c.t.Fatalf("chmod the probe: %+v", res)
	}
}

// probeWants is what each call of "probe syscalls" must answer inside a
// sandbox: EPERM from the filter (ENOSYS for clone3), or ok where the
// sandbox may.
func probeWants() map[string]string {
	want := map[string]string{
		"personality(query)": "ok", "socket(AF_UNIX)": "ok", "socket(AF_INET)": "ok",
		"socket(AF_INET6)": "ok", "socket(AF_NETLINK)": "ok", "pidfd_send_signal": "ok",
		"clone3": "ENOSYS",
	}
	denied := []string{"keyctl", "add_key", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register",
		"userfaultfd", "perf_event_open", "bpf", "personality(ADDR_NO_RANDOMIZE)", "ptrace", "mount", "umount2",
		"pivot_root", "fsopen", "open_tree", "unshare(CLONE_NEWUSER)", "setns", "clone(CLONE_NEWUSER)",
		"clone(CLONE_NEWNS)", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
		"syslog", "name_to_handle_at", "open_by_handle_at", "acct", "swapon", "swapoff", "reboot",
		"ioctl(TIOCSTI)", "ioctl(TIOCLINUX)", "socket(AF_VSOCK)", "socket(AF_ALG)", "socket(AF_PACKET)",
		"rt_sigqueueinfo(1)", "pidfd_send_signal(siginfo)"}
	if runtime.GOARCH == "amd64" {
		denied = append(denied, "iopl", "ioperm")
	}
	for _, d := range denied {
		want[d] = "EPERM"
	}
	return want
}

// cpuTime is a host process's CPU time so far, user and system.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is field 3,
	// utime 14 and stime 15, in clock ticks (USER_HZ, 100 on Linux).
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100
}

// rss is a host process's resident memory.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	kb, _ := strconv.ParseInt(statusField(t, pid, "VmRSS:")[0], 10, 64)
	return kb << 10
}

func TestOutputNobodyFollowsCostsSandboxdLittle(t *testing.T) {
	t.Parallel()
	p := startProc(t, procOptions{})
	c := p.client(t)
	needs(t, c.report().Mode == sandboxd.IsolationBwrap, "isolation (%v)", c.report())
	sb := c.create(nil)
	marker := randomMarker("sandboxd-yes-")
	// yes, followed for a moment and then left: nobody reads it any more.
	s := c.openStream(sb, "process.Process/Start", startRequest("exec yes "+marker, nil), nil)
	start := s.next()
	if start == nil || start.Start == nil {
		t.Fatalf("no start event: %+v", start)
	}
	if ev := s.next(); ev == nil || ev.Data == nil {
		t.Fatalf("no output: %+v", ev)
	}
	s.close()
	time.Sleep(time.Second)
	pid := p.sandboxdPid()
	cpu0, rss0 := cpuTime(t, pid), rss(t, pid)
	// CPU time, not wall time: the bound holds on a busy machine too.
	time.Sleep(10 * time.Second)
	cpu, grown := cpuTime(t, pid)-cpu0, rss(t, pid)-rss0
	if cpu > 500*time.Millisecond {
		t.Errorf("sandboxd spent %v of CPU in 10 s on output nobody follows (the bound is 5%% of a core)", cpu)
	}
	if grown > 32<<20 {
		t.Errorf("sandboxd's memory grew by %s in 10 s of output nobody follows", formatMiB(grown))
	}
	if len(pidsRunning(marker)) == 0 {
		t.Fatalf("yes no longer runs: it must wait on its full pipe, not die")
	}
	// Whoever follows it again gets its output at once.
	again := c.openStream(sb, "process.Process/Connect", map[string]any{"process": map[string]any{"pid": start.Start.Pid}}, nil)
	defer again.close()
	for range 3 {
		ev := again.next()
		if ev == nil {
			t.Fatalf("the stream of yes ended")
		}
		if ev.Data != nil && strings.Contains(string(ev.Data.Stdout), marker) {
			return
		}
	}
	t.Errorf("no output of yes for a new follower")
}

// hostSockets are host files a sandbox must not reach: sockets with a
// listener (world-writable, so that only the defence stops a sandbox) and
// a FIFO, under /opt, under a shared /etc directory, and at the top of
// /etc. They exist before sandboxd starts and are removed when the test
// ends.
type hostSockets struct {
	optDir, optSock, fifo, etcSock, etcTop string
	accepted                               atomic.Int32
}

func makeHostSockets(t *testing.T) *hostSockets {
	t.Helper()
	marker := randomMarker("sandboxd-attack-")
	h := &hostSockets{optDir: "/opt/" + marker}
	h.optSock, h.fifo = h.optDir+"/s.sock", h.optDir+"/fifo"
	h.etcSock, h.etcTop = "/etc/ssl/"+marker+".sock", "/etc/"+marker+".sock"
	if err := os.MkdirAll(h.optDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(h.optDir) })
	if err := unix.Mkfifo(h.fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(h.fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{h.optSock, h.etcSock, h.etcTop} {
		ln, err := net.Listen("unix", p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close(); os.Remove(p) })
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				h.accepted.Add(1)
				conn.Close()
			}
		}()
	}
	return h
}

// attack tries every host file from inside sb.
func (h *hostSockets) attack(t *testing.T, c *client, logs *syncLog) {
	sb := c.create(nil)
	c.uploadProbe(sb)
	res := c.run(sb, fmt.Sprintf(`for p in %s %s %s; do ./probe connect $p; done; stat -c %%F %s; timeout 2 sh -c 'echo x > %s' 2>/dev/null; echo "fifo-write=$?"`,
		h.optSock, h.etcSock, h.etcTop, h.fifo, h.fifo))
	lines := strings.Split(res.stdout, "\n")
	if len(lines) < 5 {
		t.Fatalf("from the sandbox: %q %q", res.stdout, res.stderr)
	}
	for i, p := range []string{h.optSock, h.etcSock, h.etcTop} {
		if lines[i] == "connect ok" {
			t.Errorf("the sandbox connected to the host's socket %s", p)
		}
	}
	if lines[3] == "fifo" || !strings.HasPrefix(lines[4], "fifo-write=") || lines[4] == "fifo-write=124" {
		t.Errorf("the sandbox sees the host's FIFO %s: %q", h.fifo, lines[3:5])
	}
	if n := h.accepted.Load(); n != 0 {
		t.Errorf("the host's sockets accepted %d connections from the sandbox", n)
	}
	for _, p := range []string{h.optSock, h.fifo, h.etcSock} {
		if !strings.Contains(logs.String(), p) {
			t.Errorf("sandboxd did not log that it masks %s", p)
		}
	}
}

func TestHostSocketsUnderSharedPathsAreUnreachable(t *testing.T) {
	t.Parallel()
	needs(t, os.Geteuid() == 0, "root, to make sockets under /opt and /etc")
	h := makeHostSockets(t)
	t.Run("as root", func(t *testing.T) {
		t.Parallel()
		logs := &syncLog{}
		c := newClient(t, sandboxdtest.WithConfig(func(cfg *sandboxd.Config) {
			cfg.ShareOpt = true
			cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
		}))
		needs(t, c.h.Server.Isolation() == sandboxd.IsolationBwrap, "isolation (%v)", c.report())
		h.attack(t, c, logs)
	})
	t.Run("as a normal user", func(t *testing.T) {
		t.Parallel()
		p := startProc(t, procOptions{uid: testUID(), args: []string{"--share-opt"}})
		h.attack(t, p.client(t), p.logs)
	})
}

// imageBytes is what a sandbox's disk image takes on the host.
func imageBytes(t *testing.T, h *sandboxdtest.Host, id string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(h.StateDir, "sandboxes", id+".ext4"), &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}

func TestDeletedFilesGiveTheirSpaceBackToTheHost(t *testing.T) {
	t.Parallel()
	needs(t, os.Geteuid() == 0, "root (disk images need it)")
	c := newClient(t, sandboxdtest.WithConfig(func(cfg *sandboxd.Config) { cfg.Limits.Disk = 256 << 20 }))
	needs(t, c.report().Limits["disk"] != "", "the disk limit (%v)", c.report())
	sb := c.create(nil)
	c.run(sb, "sync")
	before := imageBytes(t, c.h, sb.SandboxID)
	res := c.run(sb, "dd if=/dev/urandom of=/home/user/big bs=1M count=100 status=none && sync && echo written")
	if res.stdout != "written\n" {
		t.Fatalf("write 100 MiB: %+v", res)
	}
	if full := imageBytes(t, c.h, sb.SandboxID); full < before+90<<20 {
		t.Fatalf("the image grew from %s to only %s with 100 MiB written", formatMiB(before), formatMiB(full))
	}
	c.run(sb, "rm /home/user/big && sync")
	var after int64
	deadline := time.Now().Add(15 * time.Second)
	for after = imageBytes(t, c.h, sb.SandboxID); after > before+16<<20 && time.Now().Before(deadline); after = imageBytes(t, c.h, sb.SandboxID) {
		time.Sleep(100 * time.Millisecond)
	}
	if after > before+16<<20 {
		t.Errorf("100 MiB written and deleted left the image at %s on the host (it was %s)", formatMiB(after), formatMiB(before))
	}
}

func TestStartsBeyondTheDiskBudgetAreRefused(t *testing.T) {
	t.Parallel()
	needs(t, os.Geteuid() == 0, "root (disk images need it)")
	c := newClient(t, sandboxdtest.WithConfig(func(cfg *sandboxd.Config) { cfg.Limits.Disk = 64 << 20 }))
	needs(t, c.report().Limits["disk"] != "", "the disk limit (%v)", c.report())
	paused := c.create(nil)
	c.must(204, "POST", "/sandboxes/"+paused.SandboxID+"/pause", map[string]any{"memory": false}, nil)

	// Images as large as the free space: one more cannot be promised.
	var st unix.Statfs_t
	if err := unix.Statfs(c.h.StateDir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	c.h.RestartWith(t, func(cfg *sandboxd.Config) { cfg.Limits.Disk = (free>>20 + 1) << 20 })
	msg := regexp.MustCompile(`^not enough disk space on the sandbox host: the running sandboxes may still write 0 B and this one [0-9.]+ GiB, ` +
		`but [0-9.]+ GiB is free on ` + regexp.QuoteMeta(c.h.StateDir) + ` beyond the 1 GiB kept for the host; pause or kill sandboxes, free space or lower --disk-limit$`)
	for what, req := range map[string][2]string{
		"create": {"/sandboxes", `{"templateID":"base"}`},
		"resume": {"/sandboxes/" + paused.SandboxID + "/connect", `{"timeout":60}`},
	} {
		status, body, _ := c.do("POST", req[0], req[1])
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(body, &e); err != nil || status != 507 || e.Code != 507 || !msg.MatchString(e.Message) {
			t.Errorf("%s beyond the disk budget: %d %s", what, status, body)
		}
	}
	if d := c.info(paused.SandboxID); d.State != "paused" {
		t.Errorf("the refused resume changed the sandbox: %+v", d)
	}
}

func TestPausedSandboxesCountTowardTheStoredCap(t *testing.T) {
	t.Parallel()
	c := newClient(t, sandboxdtest.WithConfig(func(cfg *sandboxd.Config) { cfg.MaxStored = 2 }))
	a, b := c.create(nil), c.create(nil)
	c.must(204, "POST", "/sandboxes/"+a.SandboxID+"/pause", map[string]any{"memory": false}, nil)
	want := `{"code":429,"message":"sandboxd already keeps 2 sandboxes, running and paused, its limit (--max-stored-sandboxes): kill the ones you no longer need to create more"}`
	if status, body, _ := c.do("POST", "/sandboxes", map[string]any{"templateID": "base"}); status != 429 || strings.TrimSpace(string(body)) != want {
		t.Fatalf("a create with one running and one paused sandbox kept: %d %s", status, body)
	}
	// Resuming a kept sandbox is no new one.
	c.must(201, "POST", "/sandboxes/"+a.SandboxID+"/connect", map[string]any{"timeout": 60}, nil)
	c.must(204, "DELETE", "/sandboxes/"+b.SandboxID, nil, nil)
	c.create(nil)
}

func TestOverlappingUIDRangesRefuseToStart(t *testing.T) {
	t.Parallel()
	needs(t, os.Geteuid() == 0, "root (uid ranges are root sandboxd's)")
	first := newClient(t)
	uids := first.report().HostUIDs
	needs(t, len(uids) == 2, "isolation (%v)", first.report())
	base := uids[0] - 1
	start := func(base int) error {
		srv, err := sandboxd.New(sandboxd.Config{StateDir: sandboxdtest.StateDir(t), APIKey: "e2b_00", UIDBase: base,
			APIAddr: "127.0.0.1:0", SandboxAddr: "127.0.0.1:0"})
		if err == nil {
			if err = srv.Start(); err == nil {
				err = srv.Shutdown(context.Background())
			}
		}
		return err
	}
	// The same range names the first (other tests' ranges are whole slots
	// of their own); ranges reaching into it, from either side, are refused.
	if err := start(base); !sandboxd.ErrUIDRangeTaken(err) || !strings.Contains(err.Error(), first.h.StateDir) ||
		!strings.Contains(err.Error(), fmt.Sprintf("%d-%d", base, base+sandboxd.UIDRangeSize-1)) {
		t.Errorf("a second sandboxd with the uid base %d of a running one: %v", base, err)
	}
	for _, other := range []int{base + 1000, base - sandboxd.UIDRangeSize + 1} {
		if err := start(other); !sandboxd.ErrUIDRangeTaken(err) {
			t.Errorf("a second sandboxd with uid base %d next to one with %d: %v", other, base, err)
		}
	}
	// The command says so and exits.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sandboxdBinary(t), "--state-dir", sandboxdtest.StateDir(t), "--uid-base", strconv.Itoa(base),
		"--api-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0")
	cmd.Env = []string{"E2B_API_KEY=e2b_00", "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "overlap") || !strings.Contains(string(out), first.h.StateDir) {
		t.Errorf("cmd/sandboxd on an overlapping range: %v %s", err, out)
	}
	// A range of its own starts; so does the same range once the first stops.
	if err := start(base + sandboxd.UIDRangeSize); err != nil && !sandboxd.ErrUIDRangeTaken(err) {
		t.Errorf("the next range: %v", err)
	}
	first.h.Server.Shutdown(context.Background())
	if err := start(base); err != nil {
		t.Errorf("after the first stopped: %v", err)
	}
}
