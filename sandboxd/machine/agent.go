package machine

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The agent is PID 1 of an isolated sandbox: sandboxd's own executable,
// started by bubblewrap with agentArg as its only argument (see
// docs/sandboxd.md, "The agent"). It runs as the sandbox's user with no
// capabilities, so whatever it does for sandboxd (start a command, signal
// it, dial a port, touch a file) happens with the sandbox's rights, in the
// sandbox's namespaces, and every process it starts inherits them.

const agentArg = "sandboxd-agent"

// agentConfined is the agent's second argument once it has confined
// itself (confineAgent) and executed itself again.
const agentConfined = "confined"

// maxPtys caps the pseudo-terminals one sandbox may hold: the kernel's pool
// (kernel.pty.max, 4096) is shared by every sandbox and the host.
const maxPtys = 64

// Descriptors the agent inherits from bubblewrap.
const (
	agentCtrlFD = 3 // its end of the control socketpair
	agentExeFD  = 4 // the executable it was started from (/proc/self/fd/4)
)

// init turns any binary that links this package (cmd/sandboxd, test
// binaries) into the agent when bubblewrap starts it as a sandbox's PID 1.
// Checking the pid too means running the binary by hand with that argument
// does nothing special.
func init() {
	if len(os.Args) < 2 || os.Args[1] != agentArg || os.Getpid() != 1 {
		return
	}
	if len(os.Args) == 3 && os.Args[2] == agentConfined {
		os.Exit(runAgent())
	}
	os.Exit(confineAgent(os.Args[2:]))
}

// confineAgent is the agent's first step, the only code of a sandbox that
// holds a capability (CAP_SYS_ADMIN in the sandbox's own user namespace,
// which bubblewrap's --cap-add leaves it): it gives the sandbox what
// bubblewrap cannot, drops that capability and every other, puts itself
// under the system-call filter, and executes the agent proper. Everything
// here changes the calling thread (credentials, keyrings, filters are per
// thread), and that thread is the one the execve carries on, so the Go
// runtime's other threads, which die at the execve, never matter. masks
// are the system directories' special files to hide (maskSpecialFiles).
func confineAgent(masks []string) int {
	runtime.LockOSThread()
	fail := func(what string, err error) int {
		agentLog("%s: %v", what, err)
		return 1
	}
	// No core dumps, and none can be turned back on: where core_pattern
	// pipes to a program, the kernel runs it as root on the host.
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fail("RLIMIT_CORE", err)
	}
	// A fresh anonymous session keyring: the one inherited from sandboxd
	// (and, as root, from whoever started it) stays out of reach.
	if _, _, errno := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0); errno != 0 && errno != unix.ENOSYS {
		return fail("new session keyring", errno)
	}
	// bubblewrap's mounts belong to its outer user namespace; a mount
	// namespace of this one's own can take a devpts with a cap on its ptys.
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fail("mount namespace", err)
	}
	if err := unix.Mount("devpts", "/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC,
		"newinstance,ptmxmode=0666,mode=0620,max="+strconv.Itoa(maxPtys)); err != nil {
		return fail("mount /dev/pts", err)
	}
	if err := maskSpecialFiles(masks); err != nil {
		return fail("hide the host's special files", err)
	}
	if err := dropCapabilities(); err != nil {
		return fail("drop capabilities", err)
	}
	if err := installSeccomp(); err != nil {
		return fail("system-call filter", err)
	}
	exe := "/proc/self/fd/" + strconv.Itoa(agentExeFD)
	err := syscall.Exec(exe, []string{exe, agentArg, agentConfined}, []string{})
	return fail("execute the agent", err)
}

// dropCapabilities empties the calling thread's bounding, ambient,
// inheritable, permitted and effective sets.
func dropCapabilities() error {
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return err
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return err
	}
	var data [2]unix.CapUserData
	return unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &data[0])
}

type agent struct {
	// mu is held from fork to registration and while reaping, so that no
	// exit status is collected before its waiter exists.
	mu      sync.Mutex
	waiters map[int]chan syscall.WaitStatus
	users   map[uint32]string
	groups  map[uint32]string
}

// closeStrayFDs closes every descriptor but stdio and the control socket:
// the executable it was started from, and anything sandboxd's own parent
// left open. The Go runtime's own (its poller's anonymous inodes) stay,
// close-on-exec as it made them.
func closeStrayFDs() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		agentLog("list descriptors: %v", err)
		return
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 || fd == agentCtrlFD {
			continue
		}
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil || strings.HasPrefix(target, "anon_inode:") {
			continue
		}
		unix.Close(fd)
	}
}

func agentLog(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "sandboxd-agent: "+format+"\n", args...)
}

func runAgent() int {
	// Not dumpable: the sandbox's processes share the agent's uid, and this
	// keeps them from ptracing it or reading its descriptors in /proc/1/fd.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	unix.Umask(0o022)
	closeStrayFDs()
	// PID 1 gets only the signals it handles, and the Go runtime handles
	// them all: one it was not asked for either ends the program (SIGTERM)
	// or crashes it with every goroutine's stack (SIGSYS, SIGABRT, SIGILL,
	// SIGTRAP, SIGSEGV sent with kill). Asking for every signal, and
	// dropping them, keeps "kill -SYS 1" from inside from ending the
	// sandbox, while the commands it starts still get default dispositions.
	signal.Notify(make(chan os.Signal, 1))

	a := &agent{
		waiters: map[int]chan syscall.WaitStatus{},
		users:   readIDNames("/etc/passwd"),
		groups:  readIDNames("/etc/group"),
	}
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	go a.reap(children)

	ctrl, err := unixConn(os.NewFile(agentCtrlFD, "control"))
	if err != nil {
		agentLog("control socket: %v", err)
		return 1
	}
	if err := writeFrame(ctrl, agentResponse{Ready: true}); err != nil {
		agentLog("ready: %v", err)
		return 1
	}
	for {
		var hello struct{}
		fds, err := readFrame(ctrl, &hello)
		if err != nil {
			// sandboxd closed its end: nobody can use this sandbox any more.
			return 0
		}
		for _, f := range fds {
			go a.serve(f)
		}
	}
}

// reap collects every exit in the sandbox: PID 1 inherits orphans, and the
// commands sandboxd started are waited for here too.
func (a *agent) reap(children <-chan os.Signal) {
	for range children {
		a.mu.Lock()
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if ch := a.waiters[pid]; ch != nil {
				ch <- ws
				delete(a.waiters, pid)
			}
		}
		a.mu.Unlock()
	}
}

func (a *agent) serve(f *os.File) {
	c, err := unixConn(f)
	if err != nil {
		return
	}
	defer c.Close()
	var req agentRequest
	fds, err := readFrame(c, &req)
	if err != nil {
		return
	}
	defer closeAll(fds)
	var resp agentResponse
	var out []*os.File
	switch req.Op {
	case opSpawn:
		a.spawn(c, req, fds)
		return
	case opWatch:
		watchFor(c, req)
		return
	case opSignal:
		err = signalTree(req.Pid, syscall.Signal(req.Signal), req.Tree)
	case opSignalAll:
		// From PID 1, -1 means every other process of the namespace.
		err = syscall.Kill(-1, syscall.Signal(req.Signal))
		if errors.Is(err, syscall.ESRCH) {
			err = nil
		}
	case opDial:
		var fd *os.File
		fd, err = dialLoopback(req.Port)
		out = append(out, fd)
	case opEntry:
		var e EntryInfo
		e, err = a.entry(req.Path)
		resp.Entry = &e
	case opIsDir:
		var fi fs.FileInfo
		if fi, err = os.Stat(req.Path); err == nil {
			resp.IsDir = fi.IsDir()
		}
	case opOpen:
		var fd *os.File
		fd, resp.Size, err = openForRead(req.Path)
		out = append(out, fd)
	case opCreate:
		var fd *os.File
		fd, err = createForWrite(req.Path)
		out = append(out, fd)
	case opMkdir:
		if err = mkdirNew(req.Path); err == nil {
			var e EntryInfo
			e, err = a.entry(req.Path)
			resp.Entry = &e
		}
	case opMove:
		if err = moveCreatingParents(req.Path, req.Dest); err == nil {
			var e EntryInfo
			e, err = a.entry(req.Dest)
			resp.Entry = &e
		}
	case opList:
		var fi fs.FileInfo
		if fi, err = os.Stat(req.Path); err == nil && !fi.IsDir() {
			err = &fs.PathError{Op: "list", Path: req.Path, Err: syscall.ENOTDIR}
		}
		if err == nil {
			resp.Entries, err = listTree(req.Path, req.Depth, readDirNames, a.entry)
		}
	case opRemove:
		if _, err = os.Lstat(req.Path); err == nil {
			err = os.RemoveAll(req.Path)
		}
	default:
		err = fmt.Errorf("unknown agent operation %q", req.Op)
	}
	if err != nil {
		closeAll(out)
		_ = writeFrame(c, agentResponse{Err: toAgentError(err)})
		return
	}
	_ = writeFrame(c, resp, out...)
	closeAll(out)
}

// spawn starts a command with the three descriptors sandboxd sent as its
// stdio, answers with its pid, and, on the same connection, with its exit.
func (a *agent) spawn(c *net.UnixConn, req agentRequest, fds []*os.File) {
	fail := func(err error) { _ = writeFrame(c, agentResponse{Err: toAgentError(err)}) }
	var master *os.File
	if req.Pty != nil && len(fds) == 0 {
		m, peer, err := openPTY(*req.Pty)
		if err != nil {
			fail(err)
			return
		}
		master, fds = m, []*os.File{peer}
		defer master.Close()
	}
	if len(fds) != 3 && master == nil {
		fail(fmt.Errorf("spawn needs 3 descriptors, got %d", len(fds)))
		return
	}
	argv0, err := lookPath(req.Cmd, req.Env, req.Cwd)
	if err != nil {
		fail(err)
		return
	}
	attr := &syscall.ProcAttr{
		Dir: req.Cwd, Env: req.Env,
		// Its own group, so that "kill 0" in one command spares the others.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	}
	if master != nil {
		attr.Files = []uintptr{fds[0].Fd(), fds[0].Fd(), fds[0].Fd()}
		attr.Sys = ptyAttr()
	} else {
		attr.Files = []uintptr{fds[0].Fd(), fds[1].Fd(), fds[2].Fd()}
	}
	a.mu.Lock()
	pid, err := syscall.ForkExec(argv0, append([]string{req.Cmd}, req.Args...), attr)
	done := make(chan syscall.WaitStatus, 1)
	if err == nil {
		a.waiters[pid] = done
	}
	a.mu.Unlock()
	// Only the command holds its pipes now, so sandboxd sees EOF when it ends.
	closeAll(fds)
	if err != nil {
		fail(&fs.PathError{Op: "exec", Path: req.Cmd, Err: err})
		return
	}
	var out []*os.File
	if master != nil {
		out = append(out, master)
	}
	if err := writeFrame(c, agentResponse{Pid: pid}, out...); err != nil {
		return
	}
	ws := <-done
	exit := exitFromWaitStatus(ws)
	_ = writeFrame(c, agentResponse{Exit: &exit})
}

// watchFor watches req.Path inside the sandbox and sends sandboxd its changes on c until
// sandboxd closes c (its read here then ends) or the directory goes.
func watchFor(c *net.UnixConn, req agentRequest) {
	t, err := newInotifyTree(req.Path, req.Tree)
	if err != nil {
		_ = writeFrame(c, agentResponse{Err: toAgentError(err)})
		return
	}
	defer t.close()
	if err := writeFrame(c, agentResponse{}); err != nil {
		return
	}
	go func() {
		var b [1]byte
		_, _ = c.Read(b[:])
		t.close()
	}()
	for {
		evs, err := t.next()
		if len(evs) > 0 && writeFrame(c, agentResponse{Events: evs}) != nil {
			return
		}
		if err != nil {
			return
		}
	}
}

// lookPath finds cmd the way execvp would with the command's own PATH.
func lookPath(cmd string, env []string, cwd string) (string, error) {
	if strings.Contains(cmd, "/") {
		return cmd, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, cmd)
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", &fs.PathError{Op: "exec", Path: cmd, Err: errors.New("executable file not found in $PATH")}
}

// signalTree signals pid and, with tree, every process below it: the pid a
// client knows is often a shell around the real program.
func signalTree(pid int, sig syscall.Signal, tree bool) error {
	if pid <= 1 {
		return syscall.ESRCH
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return err
	}
	pids := []int{pid}
	if tree {
		pids = descendants(pid)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, sig)
	}
	return nil
}

func dialLoopback(port int) (*os.File, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*net.TCPConn).File()
}

func openForRead(p string) (*os.File, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && fi.IsDir() {
		err = &fs.PathError{Op: "open", Path: p, Err: syscall.EISDIR}
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

func createForWrite(p string) (*os.File, error) {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: p, Err: syscall.EISDIR}
	}
	if err := os.MkdirAll(path.Dir(p), 0o755); err != nil {
		return nil, err
	}
	return os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
}

// mkdirNew makes p and its parents, failing with fs.ErrExist when p is there.
func mkdirNew(p string) error {
	if _, err := os.Lstat(p); err == nil {
		return &fs.PathError{Op: "mkdir", Path: p, Err: syscall.EEXIST}
	}
	return os.MkdirAll(p, 0o755)
}

func moveCreatingParents(src, dst string) error {
	if _, err := os.Lstat(src); err != nil {
		return err
	}
	if err := os.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.Rename(src, dst)
}

func readDirNames(p string) ([]string, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

func (a *agent) entry(p string) (EntryInfo, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return EntryInfo{}, err
	}
	e := newEntry(p, fi, func() (string, fs.FileInfo, error) {
		t, err := filepath.EvalSymlinks(p)
		if err != nil {
			return "", nil, err
		}
		tfi, err := os.Stat(t)
		return t, tfi, err
	}, a.names)
	e.Metadata = pathMetadata(p)
	return e, nil
}

// names names a file's owner and group as the sandbox's own /etc/passwd and
// /etc/group do; host ids outside the sandbox's mapping show as nobody.
func (a *agent) names(uid, gid uint32) (string, string) {
	user, ok := a.users[uid]
	if !ok {
		user = strconv.FormatUint(uint64(uid), 10)
	}
	group, ok := a.groups[gid]
	if !ok {
		group = strconv.FormatUint(uint64(gid), 10)
	}
	return user, group
}

// readIDNames reads name:x:id lines (passwd and group share that start).
func readIDNames(file string) map[uint32]string {
	names := map[uint32]string{}
	f, err := os.Open(file)
	if err != nil {
		return names
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 {
			continue
		}
		if id, err := strconv.ParseUint(fields[2], 10, 32); err == nil {
			names[uint32(id)] = fields[0]
		}
	}
	return names
}
