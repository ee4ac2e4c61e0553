package machine

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// plainBackend runs a sandbox without isolation (IsolationNone): its
// commands are host processes of sandboxd's own user in the sandbox
// directory, on the host network. A holder process leads the sandbox's
// process group and every command joins it, so one signal to the group
// freezes, thaws or kills the whole sandbox; a command that leaves the
// group (setsid) escapes that, which is one of the things this mode gives up.
type plainBackend struct {
	homeDir, tmpDir string
	holder          *exec.Cmd
	pgid            int
	exited          chan struct{}
	// mounted is the disk image's mount point when the sandbox was
	// created isolated, with the disk limit.
	mounted string
}

func BootPlain(dir, image string) (_ *plainBackend, err error) {
	b := &plainBackend{
		homeDir: filepath.Join(dir, "home"),
		tmpDir:  filepath.Join(dir, "tmp"),
		exited:  make(chan struct{}),
	}
	if image != "" {
		if err := mountImage(image, dir); err != nil {
			return nil, err
		}
		b.mounted = dir
		defer func() {
			if err != nil {
				_ = Unmount(dir)
			}
		}()
	}
	for _, d := range []string{b.homeDir, b.tmpDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := os.Chmod(b.tmpDir, 0o1777); err != nil {
		return nil, err
	}
	b.holder = exec.Command("/usr/bin/sleep", "infinity")
	b.holder.Dir = b.homeDir
	b.holder.Env = []string{}
	// Pdeathsig ties the holder, and through it the sandbox, to sandboxd.
	b.holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := b.holder.Start(); err != nil {
		return nil, fmt.Errorf("start sandbox holder: %w", err)
	}
	b.pgid = b.holder.Process.Pid
	go func() {
		_ = b.holder.Wait()
		close(b.exited)
	}()
	return b, nil
}

func (b *plainBackend) spawn(spec spawnSpec, stdio [3]*os.File) (int, func() exitInfo, error) {
	defer closeAll(stdio[:])
	dir, err := b.hostPath(spec.cwd)
	if err != nil {
		return 0, nil, err
	}
	c := exec.Command(spec.cmd, spec.args...)
	c.Dir, c.Env = dir, spec.env
	c.Stdin, c.Stdout, c.Stderr = stdio[0], stdio[1], stdio[2]
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: b.pgid, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		return 0, nil, err
	}
	wait := func() exitInfo {
		_ = c.Wait()
		return exitFromWaitStatus(c.ProcessState.Sys().(syscall.WaitStatus))
	}
	return c.Process.Pid, wait, nil
}

// spawnPty starts a command on a terminal of the host's, in the sandbox's process group (so
// that a kill reaches it) rather than a session of its own: without isolation a sandbox is
// trusted code, and bash runs without job control.
func (b *plainBackend) spawnPty(spec spawnSpec, size PtySize) (int, *os.File, func() exitInfo, error) {
	dir, err := b.hostPath(spec.cwd)
	if err != nil {
		return 0, nil, nil, err
	}
	master, peer, err := openPTY(size)
	if err != nil {
		return 0, nil, nil, err
	}
	defer peer.Close()
	c := exec.Command(spec.cmd, spec.args...)
	c.Dir, c.Env = dir, spec.env
	c.Stdin, c.Stdout, c.Stderr = peer, peer, peer
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: b.pgid, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		master.Close()
		return 0, nil, nil, err
	}
	if master, err = pollable(master); err != nil {
		_ = c.Process.Kill()
		go c.Wait()
		return 0, nil, nil, err
	}
	wait := func() exitInfo {
		_ = c.Wait()
		return exitFromWaitStatus(c.ProcessState.Sys().(syscall.WaitStatus))
	}
	return c.Process.Pid, master, wait, nil
}

// hostPath maps a sandbox path under /home/user or /tmp to the host.
func (b *plainBackend) hostPath(p string) (string, error) {
	rel, under, ok := SplitSandboxPath(p)
	if !ok {
		return "", fmt.Errorf("path %q is outside /home/user and /tmp", p)
	}
	base := b.homeDir
	if under == "/tmp" {
		base = b.tmpDir
	}
	return filepath.Join(base, filepath.FromSlash(rel)), nil
}

func (b *plainBackend) signal(pid int, sig syscall.Signal) error {
	for _, p := range descendants(pid) {
		_ = syscall.Kill(p, sig)
	}
	return nil
}

func (b *plainBackend) dial(ctx context.Context, port int) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
}

func (b *plainBackend) files() FileOps { return hostFiles{dir: filepath.Dir(b.homeDir)} }

func (b *plainBackend) freeze() error { return syscall.Kill(-b.pgid, syscall.SIGSTOP) }

func (b *plainBackend) thaw() error { return syscall.Kill(-b.pgid, syscall.SIGCONT) }

func (b *plainBackend) stop() {
	// SIGKILL works on stopped processes, so a frozen sandbox needs no thaw.
	_ = syscall.Kill(-b.pgid, syscall.SIGKILL)
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
	}
	if b.mounted != "" {
		_ = Unmount(b.mounted)
		b.mounted = ""
	}
}

func (b *plainBackend) done() <-chan struct{} { return b.exited }

func (b *plainBackend) Home() string { return b.homeDir }
