package machine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The sandbox's user, inside its user namespace: the provider's default
// user, whose home is /home/user (docs/provider.md).
const (
	sandboxUID  = 1000
	sandboxUser = "user"
)

// Descriptors bubblewrap inherits, in ExtraFiles order; the agent keeps
// the first two.
const (
	bwrapInfoFD  = 5 // bubblewrap writes the agent's host pid here
	bwrapBlockFD = 6 // bubblewrap waits on it before it starts the agent
	bwrapEtcFD   = 7 // the first of the /etc files
)

// bootTimeout bounds a boot: bubblewrap's setup plus the agent's start.
const bootTimeout = 15 * time.Second

// NSConfig is what booting an isolated sandbox needs.
type NSConfig struct {
	ID  string
	Dir string // the sandbox's directory on the host: home/ and tmp/ inside
	// image, when set, is mounted on dir first (the disk limit).
	Image string
	// hostUID/hostGID are who bubblewrap runs as, and so what the sandbox's
	// user is on the host; -1 keeps sandboxd's own (non-root sandboxd).
	HostUID, HostGID int
	Bwrap            string
	Cgroups          *Cgroups // nil: no limits
	Limits           Limits
	// system is what of /usr, /bin, /lib... and /opt the sandbox sees.
	System hostSystem
	Log    *slog.Logger
}

// nsBackend runs a sandbox in its own user, PID, mount, network, IPC, UTS
// and cgroup namespaces, with its agent as PID 1. Everything sandboxd does
// inside goes through the agent (docs/sandboxd.md).
type nsBackend struct {
	cfg    NSConfig
	cmd    *exec.Cmd
	pid1   int // the agent, as the host sees it
	pidfd  int // for pid1, so that a late kill can never hit a recycled pid
	ctrl   *net.UnixConn
	ctrlMu sync.Mutex
	cg     *sandboxCgroup
	exited chan struct{}

	mu      sync.Mutex
	held    map[*heldFile]struct{} // files of the sandbox sandboxd has open
	mounted bool
	stopped bool
}

func BootNS(cfg NSConfig) (_ *nsBackend, err error) {
	if os.Geteuid() == 0 && cfg.HostUID <= 0 {
		// bubblewrap run by root maps the sandbox's user to root.
		return nil, errors.New("refusing to run a sandbox as host root: it has no host uid of its own")
	}
	inheritedOnce.Do(markInheritedCloseOnExec)
	b := &nsBackend{cfg: cfg, pidfd: -1, exited: make(chan struct{}), held: map[*heldFile]struct{}{}}
	defer func() {
		if err != nil {
			b.release()
		}
	}()
	if cfg.Image != "" {
		if err := mountImage(cfg.Image, cfg.Dir); err != nil {
			return nil, err
		}
		b.mounted = true
	}
	if err := prepareTree(cfg.Dir, cfg.HostUID, cfg.HostGID); err != nil {
		return nil, err
	}
	if cfg.Cgroups != nil {
		if b.cg, err = cfg.Cgroups.create(cfg.ID, cfg.Limits); err != nil {
			return nil, err
		}
	}

	// Descriptors for bubblewrap, in ExtraFiles order (fd 3 on): control,
	// executable, info, block, the /etc files; then stderr.
	var theirs, ours []*os.File
	defer func() { closeAll(theirs); closeAll(ours) }()
	ctrlOurs, ctrlTheirs, err := socketPair(unix.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	ours, theirs = append(ours, ctrlOurs), append(theirs, ctrlTheirs)
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	theirs = append(theirs, exe)
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ours, theirs = append(ours, infoR), append(theirs, infoW)
	blockR, blockW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ours, theirs = append(ours, blockW), append(theirs, blockR)
	var etc []etcFile
	for _, f := range sandboxEtc(cfg.ID) {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		theirs = append(theirs, r)
		_, err = w.WriteString(f.content)
		w.Close()
		if err != nil {
			return nil, err
		}
		f.fd = bwrapEtcFD + len(etc)
		etc = append(etc, f)
	}
	logR, logW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ours, theirs = append(ours, logR), append(theirs, logW)

	etcHost, _ := etcEntries(cfg.HostUID)
	b.cmd = exec.Command(cfg.Bwrap, bwrapArgs(cfg, etcHost, etc)...)
	// Nothing of sandboxd's environment (its API key) reaches the sandbox.
	b.cmd.Env = []string{}
	b.cmd.Stderr = logW
	b.cmd.ExtraFiles = theirs[:len(theirs)-1]
	// Its own session: a Ctrl-C meant for sandboxd's terminal does not reach
	// the sandbox, and nothing in it can reach that terminal.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if cfg.HostUID >= 0 {
		b.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(cfg.HostUID), Gid: uint32(cfg.HostGID), Groups: []uint32{}}
	}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start bubblewrap: %w", err)
	}
	closeAll(theirs)
	theirs = nil
	logs := newBootLog()
	go logs.follow(logR, cfg.Log.With("sandbox_id", cfg.ID))
	ours = ours[:len(ours)-1] // logR now belongs to the follower
	go func() {
		_ = b.cmd.Wait()
		close(b.exited)
	}()
	fail := func(what string, err error) error {
		_ = b.cmd.Process.Kill()
		if b.pidfd >= 0 {
			_ = unix.PidfdSendSignal(b.pidfd, unix.SIGKILL, nil, 0)
		}
		select {
		case <-b.exited:
		case <-time.After(5 * time.Second):
		}
		if msg := logs.text(); msg != "" {
			return fmt.Errorf("%s: %w (%s)", what, err, msg)
		}
		return fmt.Errorf("%s: %w", what, err)
	}

	if b.pid1, err = readChildPid(infoR); err != nil {
		return nil, fail("bubblewrap did not start the sandbox", err)
	}
	if b.pidfd, err = unix.PidfdOpen(b.pid1, 0); err != nil {
		return nil, fail("open the sandbox's init", err)
	}
	// bubblewrap waits on the block descriptor right before it starts the
	// agent, so nothing of the sandbox runs outside its cgroup.
	if b.cg != nil {
		if err := b.cg.add(b.pid1); err != nil {
			return nil, fail("place the sandbox in its cgroup", err)
		}
	}
	if _, err := blockW.Write([]byte{1}); err != nil {
		return nil, fail("release the sandbox", err)
	}
	if b.ctrl, err = unixConn(ctrlOurs); err != nil {
		return nil, fail("agent control socket", err)
	}
	ours = ours[1:] // unixConn closed ctrlOurs
	_ = b.ctrl.SetReadDeadline(time.Now().Add(bootTimeout))
	var hello agentResponse
	fds, err := readFrame(b.ctrl, &hello)
	closeAll(fds)
	_ = b.ctrl.SetReadDeadline(time.Time{})
	if err != nil || !hello.Ready {
		b.ctrl.Close()
		if err == nil {
			err = errors.New("unexpected first message")
		}
		return nil, fail("the sandbox's agent did not start", err)
	}
	logs.booted()
	return b, nil
}

var inheritedOnce sync.Once

// markInheritedCloseOnExec keeps what this process inherited without
// close-on-exec (a shell's or a supervisor's descriptors) from passing on
// through bubblewrap into sandboxes. Go opens everything close-on-exec, so
// only inherited descriptors change.
func markInheritedCloseOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// readChildPid reads the pid bubblewrap's --info-fd reports.
func readChildPid(info *os.File) (int, error) {
	_ = info.SetReadDeadline(time.Now().Add(bootTimeout))
	var st struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(info).Decode(&st); err != nil {
		return 0, err
	}
	if st.ChildPid <= 0 {
		return 0, errors.New("no child-pid")
	}
	return st.ChildPid, nil
}

// bootLog relays what bubblewrap and the agent write to stderr into
// sandboxd's log, keeping the start of it to explain a failed boot.
type bootLog struct {
	mu   sync.Mutex
	head strings.Builder
	up   bool
}

func newBootLog() *bootLog { return &bootLog{} }

func (l *bootLog) follow(r *os.File, log *slog.Logger) {
	defer r.Close()
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for sc.Scan() {
		line := sc.Text()
		l.mu.Lock()
		if !l.up && l.head.Len() < 2048 {
			if l.head.Len() > 0 {
				l.head.WriteString("; ")
			}
			l.head.WriteString(line)
		}
		l.mu.Unlock()
		log.Warn("sandbox runtime", "line", line)
	}
	// Past the limit, keep draining so that the writer never blocks.
	_, _ = io.Copy(io.Discard, r)
}

func (l *bootLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.head.String()
}

func (l *bootLog) booted() {
	l.mu.Lock()
	l.up = true
	l.mu.Unlock()
}

// etcFile is a file of the sandbox's own, in /etc or over a file of its
// /proc, handed to bubblewrap as --ro-bind-data on descriptor fd.
type etcFile struct {
	path    string
	perms   string
	content string
	fd      int
}

// sandboxEtc is what the sandbox sees instead of the host's account files:
// its one user (uid 1000, "user", home /home/user) and no password hashes.
// The sandbox user owns these copies, so it can read its own shadow file.
// /proc/keys and /proc/key-users read empty: they would list every key the
// sandbox's host uid may view, other sessions' keyrings among them.
func sandboxEtc(id string) []etcFile {
	host := sandboxHostname(id)
	files := []etcFile{
		{path: "/proc/keys", perms: "0444"},
		{path: "/proc/key-users", perms: "0444"},
		{path: "/etc/passwd", perms: "0644", content: "root:x:0:0:root:/root:/bin/bash\n" +
			sandboxUser + ":x:1000:1000::" + HomeDir + ":/bin/bash\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
		{path: "/etc/group", perms: "0644", content: "root:x:0:\n" + sandboxUser + ":x:1000:\nnogroup:x:65534:\n"},
		{path: "/etc/shadow", perms: "0600", content: "root:*:19000:0:99999:7:::\n" + sandboxUser + ":*:19000:0:99999:7:::\nnobody:*:19000:0:99999:7:::\n"},
		{path: "/etc/gshadow", perms: "0600", content: "root:*::\n" + sandboxUser + ":!::\nnogroup:*::\n"},
		{path: "/etc/hostname", perms: "0644", content: host + "\n"},
		{path: "/etc/hosts", perms: "0644", content: "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + host + "\n"},
	}
	return files
}

func sandboxHostname(id string) string { return "e2b-" + id }

// bwrapArgs describes the sandbox's view: the host's system directories
// and the shared /etc entries read-only, its own /etc account files, /proc
// of its PID namespace without the kernel's key lists, a minimal /dev, its
// home and /tmp writable, nothing else of the host. The agent's arguments
// are the system directories' special files, which it masks (with /etc's,
// which it finds itself).
func bwrapArgs(cfg NSConfig, etcHost []hostEntry, etc []etcFile) []string {
	args := []string{
		"--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		// The sandbox cannot make user namespaces of its own, where it would
		// get capabilities back.
		"--disable-userns",
		"--uid", strconv.Itoa(sandboxUID), "--gid", strconv.Itoa(sandboxUID),
		"--hostname", sandboxHostname(cfg.ID),
		"--die-with-parent", "--new-session", "--as-pid-1",
		// For the agent's first step only (confineAgent), in the sandbox's
		// own user namespace; dropped before anything else runs.
		"--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP",
	}
	args = append(args, bindArgs(cfg.System.entries)...)
	args = append(args, "--perms", "0755", "--dir", "/etc")
	args = append(args, bindArgs(etcHost)...)
	ownFiles := func(dir string) {
		for _, f := range etc {
			if strings.HasPrefix(f.path, dir) {
				args = append(args, "--perms", f.perms, "--ro-bind-data", strconv.Itoa(f.fd), f.path)
			}
		}
	}
	ownFiles("/etc/")
	home, tmp := filepath.Join(cfg.Dir, "home"), filepath.Join(cfg.Dir, "tmp")
	args = append(args, "--proc", "/proc")
	ownFiles("/proc/")
	args = append(args,
		"--dev", "/dev",
		"--tmpfs", "/run",
		"--perms", "0755", "--dir", "/home",
		"--perms", "0755", "--dir", "/var",
		"--bind", home, HomeDir,
		"--bind", tmp, "/tmp",
		"--bind", tmp, "/var/tmp",
	)
	return append(append(args,
		"--chdir", HomeDir,
		// The root itself (a tmpfs bubblewrap made) stays read-only.
		"--remount-ro", "/",
		"--info-fd", strconv.Itoa(bwrapInfoFD), "--block-fd", strconv.Itoa(bwrapBlockFD),
		// The agent starts from sandboxd's own executable through the
		// descriptor: its path on the host need not be visible, or even
		// reachable, from the sandbox.
		"--", "/proc/self/fd/"+strconv.Itoa(agentExeFD), agentArg,
	), cfg.System.masks...)
}

// prepareTree makes the sandbox's directory, home and /tmp, owned by the
// host uid its user maps to (a sandbox first run by another sandboxd mode
// gets its files handed over).
func prepareTree(dir string, uid, gid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	home, tmp := filepath.Join(dir, "home"), filepath.Join(dir, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o1777); err != nil {
		return err
	}
	if uid < 0 {
		return nil
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	for _, d := range []string{home, tmp} {
		fi, err := os.Lstat(d)
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			continue
		}
		err = filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			return os.Lchown(p, uid, gid)
		})
		if err != nil {
			return fmt.Errorf("hand %s to uid %d: %w", d, uid, err)
		}
	}
	return nil
}

// call makes one request of the agent and returns its answer, the
// descriptors that came with it and the connection (for spawn's second
// answer); the caller closes both.
func (b *nsBackend) call(ctx context.Context, req agentRequest, fds ...*os.File) (agentResponse, []*os.File, *net.UnixConn, error) {
	ours, theirs, err := socketPair(unix.SOCK_STREAM)
	if err != nil {
		return agentResponse{}, nil, nil, err
	}
	b.ctrlMu.Lock()
	err = writeFrame(b.ctrl, struct{}{}, theirs)
	b.ctrlMu.Unlock()
	theirs.Close()
	if err != nil {
		ours.Close()
		return agentResponse{}, nil, nil, fmt.Errorf("sandbox agent: %w", err)
	}
	c, err := unixConn(ours)
	if err != nil {
		return agentResponse{}, nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := writeFrame(c, req, fds...); err != nil {
		c.Close()
		return agentResponse{}, nil, nil, fmt.Errorf("sandbox agent: %w", err)
	}
	var resp agentResponse
	got, err := readFrame(c, &resp)
	if err != nil {
		c.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return agentResponse{}, nil, nil, fmt.Errorf("sandbox agent: %w", err)
	}
	if resp.Err != nil {
		closeAll(got)
		c.Close()
		return resp, nil, nil, resp.Err.err()
	}
	return resp, got, c, nil
}

// do is call for requests that answer once, with at most want descriptors.
func (b *nsBackend) do(ctx context.Context, req agentRequest, want int) (agentResponse, []*os.File, error) {
	resp, fds, c, err := b.call(ctx, req)
	if err != nil {
		return resp, nil, err
	}
	c.Close()
	if len(fds) != want {
		closeAll(fds)
		return resp, nil, fmt.Errorf("sandbox agent: %d descriptors for %s, want %d", len(fds), req.Op, want)
	}
	return resp, fds, nil
}

// agentTimeout bounds requests that have no context of their own.
const agentTimeout = 30 * time.Second

func (b *nsBackend) spawn(spec spawnSpec, stdio [3]*os.File) (int, func() exitInfo, error) {
	defer closeAll(stdio[:])
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	resp, fds, c, err := b.call(ctx, agentRequest{Op: opSpawn, Cmd: spec.cmd, Args: spec.args, Env: spec.env, Cwd: spec.cwd}, stdio[:]...)
	if err != nil {
		return 0, nil, err
	}
	closeAll(fds)
	return resp.Pid, b.waitExit(c), nil
}

func (b *nsBackend) spawnPty(spec spawnSpec, size PtySize) (int, *os.File, func() exitInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	resp, fds, c, err := b.call(ctx, agentRequest{Op: opSpawn, Cmd: spec.cmd, Args: spec.args, Env: spec.env, Cwd: spec.cwd, Pty: &size})
	if err != nil {
		return 0, nil, nil, err
	}
	if len(fds) != 1 {
		closeAll(fds)
		c.Close()
		return 0, nil, nil, fmt.Errorf("sandbox agent: %d descriptors for a terminal, want 1", len(fds))
	}
	master, err := pollable(fds[0])
	if err != nil {
		c.Close()
		return 0, nil, nil, err
	}
	return resp.Pid, master, b.waitExit(c), nil
}

// waitExit waits for spawn's second answer on c, the command's exit.
func (b *nsBackend) waitExit(c *net.UnixConn) func() exitInfo {
	return func() exitInfo {
		defer c.Close()
		var end agentResponse
		fds, err := readFrame(c, &end)
		closeAll(fds)
		if err != nil || end.Exit == nil {
			// The sandbox ended under the command.
			return exitInfo{Code: -1, Status: "signal: killed"}
		}
		return *end.Exit
	}
}

func (b *nsBackend) signal(pid int, sig syscall.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	_, _, err := b.do(ctx, agentRequest{Op: opSignal, Pid: pid, Signal: int(sig), Tree: true}, 0)
	return err
}

func (b *nsBackend) dial(ctx context.Context, port int) (net.Conn, error) {
	_, fds, err := b.do(ctx, agentRequest{Op: opDial, Port: port}, 1)
	if err != nil {
		return nil, err
	}
	defer fds[0].Close()
	return net.FileConn(fds[0])
}

func (b *nsBackend) freeze() error {
	if b.cg != nil && b.cg.canFreeze() {
		return b.cg.freeze()
	}
	return b.signalAll(syscall.SIGSTOP)
}

func (b *nsBackend) thaw() error {
	if b.cg != nil && b.cg.canFreeze() {
		return b.cg.thaw()
	}
	return b.signalAll(syscall.SIGCONT)
}

func (b *nsBackend) signalAll(sig syscall.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), agentTimeout)
	defer cancel()
	_, _, err := b.do(ctx, agentRequest{Op: opSignalAll, Signal: int(sig)}, 0)
	return err
}

func (b *nsBackend) stop() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		<-b.exited
		return
	}
	b.stopped = true
	b.mu.Unlock()
	// Killing PID 1 makes the kernel kill every process of the namespace.
	_ = unix.PidfdSendSignal(b.pidfd, unix.SIGKILL, nil, 0)
	if b.cg != nil {
		// A frozen v1 group takes the kill only once thawed.
		_ = b.cg.thaw()
	}
	select {
	case <-b.exited:
	case <-time.After(10 * time.Second):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
	b.ctrl.Close()
	b.release()
}

// release closes what sandboxd holds of the sandbox and undoes the boot's
// cgroup and mount.
func (b *nsBackend) release() {
	b.mu.Lock()
	held := b.held
	b.held = map[*heldFile]struct{}{}
	b.mu.Unlock()
	for f := range held {
		f.File.Close()
	}
	if b.pidfd >= 0 {
		unix.Close(b.pidfd)
		b.pidfd = -1
	}
	if b.cg != nil {
		b.cg.remove()
	}
	if b.mounted {
		if err := Unmount(b.cfg.Dir); err != nil {
			b.cfg.Log.Error("unmount sandbox disk", "sandbox_id", b.cfg.ID, "err", err)
		}
		b.mounted = false
	}
}

func (b *nsBackend) done() <-chan struct{} { return b.exited }

func (b *nsBackend) Home() string { return HomeDir }

func (b *nsBackend) files() FileOps { return agentFiles{b} }

// heldFile is a file of the sandbox open in sandboxd (a download or an
// upload in progress). stop closes it so that the sandbox's disk can be
// unmounted.
type heldFile struct {
	*os.File
	b *nsBackend
}

func (f *heldFile) Close() error {
	f.b.mu.Lock()
	delete(f.b.held, f)
	f.b.mu.Unlock()
	return f.File.Close()
}

func (b *nsBackend) hold(f *os.File) (*heldFile, error) {
	h := &heldFile{File: f, b: b}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		f.Close()
		return nil, errStopping
	}
	b.held[h] = struct{}{}
	return h, nil
}

// agentFiles is FileOps through the agent: every path is resolved inside
// the sandbox, with its user's rights, in its own mount namespace.
type agentFiles struct{ b *nsBackend }

func (a agentFiles) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), agentTimeout)
}

func (a agentFiles) entryOp(req agentRequest) (EntryInfo, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	resp, _, err := a.b.do(ctx, req, 0)
	if err != nil {
		return EntryInfo{}, err
	}
	if resp.Entry == nil {
		return EntryInfo{}, errors.New("sandbox agent: no entry")
	}
	return *resp.Entry, nil
}

func (a agentFiles) Entry(p string) (EntryInfo, error) {
	return a.entryOp(agentRequest{Op: opEntry, Path: p})
}

func (a agentFiles) Mkdir(p string) (EntryInfo, error) {
	return a.entryOp(agentRequest{Op: opMkdir, Path: p})
}

func (a agentFiles) Move(src, dst string) (EntryInfo, error) {
	return a.entryOp(agentRequest{Op: opMove, Path: src, Dest: dst})
}

func (a agentFiles) IsDir(p string) (bool, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	resp, _, err := a.b.do(ctx, agentRequest{Op: opIsDir, Path: p}, 0)
	return resp.IsDir, err
}

func (a agentFiles) Open(p string) (io.ReadCloser, int64, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	resp, fds, err := a.b.do(ctx, agentRequest{Op: opOpen, Path: p}, 1)
	if err != nil {
		return nil, 0, err
	}
	f, err := a.b.hold(fds[0])
	if err != nil {
		return nil, 0, err
	}
	return f, resp.Size, nil
}

func (a agentFiles) Create(p string) (io.WriteCloser, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	_, fds, err := a.b.do(ctx, agentRequest{Op: opCreate, Path: p}, 1)
	if err != nil {
		return nil, err
	}
	return a.b.hold(fds[0])
}

func (a agentFiles) List(p string, depth int) ([]EntryInfo, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	resp, _, err := a.b.do(ctx, agentRequest{Op: opList, Path: p, Depth: depth}, 0)
	if resp.Entries == nil && err == nil {
		resp.Entries = []EntryInfo{}
	}
	return resp.Entries, err
}

func (a agentFiles) Watch(p string, recursive bool) (*Watch, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	_, fds, c, err := a.b.call(ctx, agentRequest{Op: opWatch, Path: p, Tree: recursive})
	if err != nil {
		return nil, err
	}
	closeAll(fds)
	// Closing c ends the agent's watch, and the read below.
	w, ch := newWatch(func() { c.Close() })
	go func() {
		defer close(ch)
		defer c.Close()
		for {
			var resp agentResponse
			fds, err := readFrame(c, &resp)
			closeAll(fds)
			if err != nil || !w.deliver(ch, resp.Events) {
				return
			}
		}
	}()
	return w, nil
}

func (a agentFiles) Remove(p string) error {
	ctx, cancel := a.ctx()
	defer cancel()
	_, _, err := a.b.do(ctx, agentRequest{Op: opRemove, Path: p}, 0)
	return err
}
