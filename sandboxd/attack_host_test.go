package sandboxd_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
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
