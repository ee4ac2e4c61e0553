package machine

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// Backend runs one sandbox: on the host for IsolationNone (plainBackend),
// or in its own namespaces through its agent (nsBackend).
type Backend interface {
	// spawn starts cmd with stdio as its stdin, stdout and stderr (the
	// backend closes them) and returns its pid and a wait for its end.
	spawn(spec spawnSpec, stdio [3]*os.File) (pid int, wait func() exitInfo, err error)
	// spawnPty starts cmd on a new terminal of size and returns the terminal's master.
	spawnPty(spec spawnSpec, size PtySize) (pid int, master *os.File, wait func() exitInfo, err error)
	// signal sends sig to pid and every process below it.
	signal(pid int, sig syscall.Signal) error
	// dial connects to a port of the sandbox's loopback.
	dial(ctx context.Context, port int) (net.Conn, error)
	files() FileOps
	freeze() error
	thaw() error
	// stop kills everything the sandbox runs and releases what it holds.
	stop()
	// done is closed when the sandbox's processes are gone.
	done() <-chan struct{}
	// Home is HOME as the sandbox's commands see it.
	Home() string
	usage() Usage
}

// spawnSpec is a command to start; cwd is a path as the sandbox sees it.
type spawnSpec struct {
	cmd  string
	args []string
	env  []string
	cwd  string
}

// Machine is what runs for one sandbox between a boot and a kill: its
// backend and the processes started through envd.
type Machine struct {
	b Backend

	mu     sync.Mutex
	procs  map[uint32]*Process
	frozen bool
	killed bool
}

func NewMachine(b Backend) *Machine {
	return &Machine{b: b, procs: map[uint32]*Process{}}
}

// Home is the sandbox user's home directory, as its processes see it.
func (m *Machine) Home() string { return m.b.Home() }

func (m *Machine) Alive() bool {
	select {
	case <-m.b.done():
		return false
	default:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.killed
}

func (m *Machine) Dial(ctx context.Context, port int) (net.Conn, error) {
	return m.b.dial(ctx, port)
}

func (m *Machine) Files() FileOps { return m.b.files() }

// Freeze stops every process of the sandbox (memory pause).
func (m *Machine) Freeze() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.frozen = true
	return m.b.freeze()
}

// Thaw resumes a frozen sandbox.
func (m *Machine) Thaw() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.frozen = false
	return m.b.thaw()
}

// Kill stops everything and waits (briefly) for the processes' streams to
// end.
func (m *Machine) Kill() {
	m.mu.Lock()
	m.killed = true
	m.mu.Unlock()
	m.b.stop()
	for _, p := range m.Processes() {
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		}
	}
}

var errStopping = errors.New("sandbox is stopping")

// StartProcess starts a command in m, streaming to first (subscribed before
// any output exists, so the Start stream misses nothing). timeout > 0 kills
// the process after that long, like envd's Connect-Timeout-Ms handling.
func (m *Machine) StartProcess(cfg ProcessConfig, tag *string, openStdin bool, env []string, cwd string, timeout time.Duration) (*Process, *Subscriber, error) {
	var files []*os.File // every descriptor made here that is not handed on
	cleanup := func() { closeAll(files) }
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	var stdinR, stdinW *os.File
	if openStdin {
		stdinR, stdinW, err = pipe()
	} else {
		stdinR, err = os.Open(os.DevNull)
		files = append(files, stdinR)
	}
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	p := &Process{Config: cfg, Tag: tag, m: m, done: make(chan struct{}), subs: map[*Subscriber]struct{}{}}
	if stdinW != nil {
		p.stdin = stdinW
	}
	first := p.Subscribe()

	m.mu.Lock()
	if m.killed || m.frozen {
		m.mu.Unlock()
		cleanup()
		return nil, nil, errStopping
	}
	// Held across the spawn so that a pause cannot slip between the start
	// and the registration and miss this process.
	pid, wait, err := m.b.spawn(spawnSpec{cmd: cfg.Cmd, args: cfg.Args, env: env, cwd: cwd}, [3]*os.File{stdinR, outW, errW})
	if err == nil {
		p.Pid = uint32(pid)
		m.procs[p.Pid] = p
	}
	m.mu.Unlock()
	// The backend closed the ends it was given; what is left is ours.
	files = nil
	if err != nil {
		outR.Close()
		errR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, nil, err
	}
	p.run([]output{{outR, outStdout}, {errR, outStderr}}, wait, timeout)
	return p, first, nil
}

// StartPty starts a command on a new terminal of size, as envd's Start with a pty: its
// output and input are the terminal's.
func (m *Machine) StartPty(cfg ProcessConfig, tag *string, size PtySize, env []string, cwd string, timeout time.Duration) (*Process, *Subscriber, error) {
	p := &Process{Config: cfg, Tag: tag, m: m, done: make(chan struct{}), subs: map[*Subscriber]struct{}{}}
	first := p.Subscribe()
	m.mu.Lock()
	if m.killed || m.frozen {
		m.mu.Unlock()
		return nil, nil, errStopping
	}
	pid, master, wait, err := m.b.spawnPty(spawnSpec{cmd: cfg.Cmd, args: cfg.Args, env: env, cwd: cwd}, size)
	if err == nil {
		p.Pid = uint32(pid)
		p.pty = master
		m.procs[p.Pid] = p
	}
	m.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	p.run([]output{{master, outPty}}, wait, timeout)
	return p, first, nil
}

func (m *Machine) forget(p *Process) {
	m.mu.Lock()
	delete(m.procs, p.Pid)
	m.mu.Unlock()
}

func (m *Machine) Process(pid uint32) *Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.procs[pid]
}

func (m *Machine) ProcessByTag(tag string) *Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.procs {
		if p.Tag != nil && *p.Tag == tag {
			return p
		}
	}
	return nil
}

func (m *Machine) Processes() []*Process {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Process, 0, len(m.procs))
	for _, p := range m.procs {
		out = append(out, p)
	}
	return out
}
