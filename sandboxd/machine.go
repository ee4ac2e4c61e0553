package sandboxd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// machine is what runs for one sandbox between a boot and a kill: a holder
// process that leads the sandbox's process group (and, with bubblewrap, owns
// its namespaces), plus the processes started through envd.
//
// Every command joins the holder's process group, so one signal to the group
// freezes, thaws or kills the whole sandbox. With bubblewrap the holder is the
// parent of the PID namespace's init, and killing it takes the namespace and
// every process in it down, including ones that left the group with setsid.
type machine struct {
	iso     Isolation
	id      string
	homeDir string
	tmpDir  string
	holder  *exec.Cmd
	pgid    int
	// nsPid is the host pid of the PID namespace's init (bubblewrap only):
	// commands enter its namespaces and dials enter its network namespace.
	nsPid  int
	exited chan struct{}

	mu     sync.Mutex
	procs  map[uint32]*process
	frozen bool
	killed bool
}

func (m *machine) alive() bool {
	select {
	case <-m.exited:
		return false
	default:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.killed
}

// bootMachine starts the holder of a sandbox whose files live in dir.
func bootMachine(iso Isolation, id, dir string) (*machine, error) {
	m := &machine{
		iso:     iso,
		id:      id,
		homeDir: filepath.Join(dir, "home"),
		tmpDir:  filepath.Join(dir, "tmp"),
		exited:  make(chan struct{}),
		procs:   map[uint32]*process{},
	}
	for _, d := range []string{m.homeDir, m.tmpDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(m.tmpDir, 0o1777); err != nil {
		return nil, err
	}
	// info and ready are read ends; writeEnds go to bwrap and are closed
	// here once it has them, so that a bwrap that dies early ends the reads.
	var info, ready *os.File
	var writeEnds []*os.File
	switch iso {
	case IsolationBwrap:
		infoR, infoW, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		readyR, readyW, err := os.Pipe()
		if err != nil {
			infoR.Close()
			infoW.Close()
			return nil, err
		}
		info, ready = infoR, readyR
		writeEnds = []*os.File{infoW, readyW}
		// bwrap reports the child's pid before the child has built the
		// private root; the holder's first output line says it is built,
		// and only then may commands enter its mount namespace.
		args := append(bwrapArgs(id, m.homeDir, m.tmpDir), "--info-fd", "3", "--",
			"/bin/sh", "-c", "echo ready && exec /usr/bin/sleep infinity")
		m.holder = exec.Command("bwrap", args...)
		m.holder.ExtraFiles = []*os.File{infoW}
		m.holder.Stdout = readyW
	default:
		m.holder = exec.Command("/usr/bin/sleep", "infinity")
		m.holder.Dir = m.homeDir
	}
	// Pdeathsig ties the holder, and through it the sandbox, to sandboxd:
	// nothing survives a crash of the host process.
	m.holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	err := m.holder.Start()
	for _, f := range writeEnds {
		f.Close()
	}
	if err != nil {
		if info != nil {
			info.Close()
			ready.Close()
		}
		return nil, fmt.Errorf("start sandbox holder: %w", err)
	}
	m.pgid = m.holder.Process.Pid
	go func() {
		_ = m.holder.Wait()
		close(m.exited)
	}()
	if info != nil {
		pid, err := awaitSandbox(info, ready)
		info.Close()
		ready.Close()
		if err != nil {
			m.kill()
			return nil, fmt.Errorf("bubblewrap did not start the sandbox: %w", err)
		}
		m.nsPid = pid
	}
	return m, nil
}

// awaitSandbox reads bwrap's child pid and waits for the holder's "ready".
func awaitSandbox(info, ready *os.File) (int, error) {
	deadline := time.Now().Add(10 * time.Second)
	_ = info.SetReadDeadline(deadline)
	_ = ready.SetReadDeadline(deadline)
	var st struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(info).Decode(&st); err != nil {
		return 0, err
	}
	if st.ChildPid <= 0 {
		return 0, errors.New("no child-pid")
	}
	line, err := bufio.NewReader(ready).ReadString('\n')
	if err != nil || line != "ready\n" {
		return 0, fmt.Errorf("holder did not get ready: %q %v", line, err)
	}
	return st.ChildPid, nil
}

// bwrapArgs builds the private root: the host's system directories read-only,
// the sandbox's own home and /tmp writable, and fresh network, PID, IPC and
// UTS namespaces. No --new-session: commands must stay in the holder's
// process group.
func bwrapArgs(id, home, tmp string) []string {
	args := []string{
		"--die-with-parent",
		"--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--hostname", "e2b-" + id,
	}
	for _, d := range []string{"/usr", "/etc", "/opt", "/var"} {
		args = append(args, "--ro-bind-try", d, d)
	}
	for _, d := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(d); err == nil {
				args = append(args, "--symlink", target, d)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", d, d)
		}
	}
	return append(args,
		"--proc", "/proc",
		"--dev", "/dev",
		"--tmpfs", "/run",
		"--tmpfs", "/var/tmp",
		"--bind", home, "/home/user",
		"--bind", tmp, "/tmp",
		"--chdir", "/home/user",
		"--setenv", "HOME", "/home/user",
	)
}

// command prepares cmd/args to run inside the sandbox in directory cwd (a
// sandbox path) with exactly env. It does not start it.
func (m *machine) command(cmdPath string, args []string, cwd string, env []string) (*exec.Cmd, error) {
	var c *exec.Cmd
	switch m.iso {
	case IsolationBwrap:
		// nsenter (single-threaded C) can join the mount namespace, which a
		// multi-threaded Go process cannot; env -C then changes into cwd as
		// seen inside the sandbox.
		full := append([]string{
			"-t", strconv.Itoa(m.nsPid), "-n", "-m", "-p", "-u", "-i", "-r", "-w",
			"--", "/usr/bin/env", "-C", cwd, "--", cmdPath,
		}, args...)
		c = exec.Command("nsenter", full...)
	default:
		dir, err := m.hostPath(cwd)
		if err != nil {
			return nil, err
		}
		c = exec.Command(cmdPath, args...)
		c.Dir = dir
	}
	c.Env = env
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: m.pgid, Pdeathsig: syscall.SIGKILL}
	return c, nil
}

// hostPath maps a sandbox path under /home/user or /tmp to the host. Only the
// plain mode needs it for a working directory; files go through fsys.
func (m *machine) hostPath(p string) (string, error) {
	rel, under, ok := splitSandboxPath(p)
	if !ok {
		return "", fmt.Errorf("path %q is outside /home/user and /tmp", p)
	}
	base := m.homeDir
	if under == "/tmp" {
		base = m.tmpDir
	}
	return filepath.Join(base, filepath.FromSlash(rel)), nil
}

// homeEnv is HOME as commands see it.
func (m *machine) homeEnv() string {
	if m.iso == IsolationBwrap {
		return "/home/user"
	}
	return m.homeDir
}

// dial connects to a port of the sandbox's loopback.
func (m *machine) dial(ctx context.Context, port int) (net.Conn, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if m.iso != IsolationBwrap {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	return dialInNetns(ctx, m.nsPid, addr)
}

// freeze stops every process of the sandbox (memory pause).
func (m *machine) freeze() {
	m.mu.Lock()
	m.frozen = true
	m.mu.Unlock()
	m.signalAll(syscall.SIGSTOP)
}

// thaw resumes a frozen sandbox.
func (m *machine) thaw() {
	m.mu.Lock()
	m.frozen = false
	m.mu.Unlock()
	m.signalAll(syscall.SIGCONT)
}

func (m *machine) signalAll(sig syscall.Signal) {
	_ = syscall.Kill(-m.pgid, sig)
	if m.nsPid > 0 {
		// Processes that left the group (setsid) are still in the namespace.
		for _, pid := range pidsInNamespaceOf(m.nsPid) {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// kill stops everything and waits (briefly) for the holder to be reaped.
func (m *machine) kill() {
	m.mu.Lock()
	m.killed = true
	m.mu.Unlock()
	// SIGKILL works on stopped processes, so a frozen sandbox needs no thaw.
	_ = syscall.Kill(-m.pgid, syscall.SIGKILL)
	if m.nsPid > 0 {
		_ = syscall.Kill(m.nsPid, syscall.SIGKILL)
	}
	select {
	case <-m.exited:
	case <-time.After(5 * time.Second):
	}
	m.mu.Lock()
	procs := make([]*process, 0, len(m.procs))
	for _, p := range m.procs {
		procs = append(procs, p)
	}
	m.mu.Unlock()
	for _, p := range procs {
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		}
	}
}
