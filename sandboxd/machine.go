package sandboxd

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// backend runs one sandbox: on the host for IsolationNone (plainBackend),
// or in its own namespaces through its agent (nsBackend).
type backend interface {
	// spawn starts cmd with stdio as its stdin, stdout and stderr (the
	// backend closes them) and returns its pid and a wait for its end.
	spawn(spec spawnSpec, stdio [3]*os.File) (pid int, wait func() exitInfo, err error)
	// signal sends sig to pid and every process below it.
	signal(pid int, sig syscall.Signal) error
	// dial connects to a port of the sandbox's loopback.
	dial(ctx context.Context, port int) (net.Conn, error)
	files() fileOps
	freeze() error
	thaw() error
	// stop kills everything the sandbox runs and releases what it holds.
	stop()
	// done is closed when the sandbox's processes are gone.
	done() <-chan struct{}
	// home is HOME as the sandbox's commands see it.
	home() string
}

// spawnSpec is a command to start; cwd is a path as the sandbox sees it.
type spawnSpec struct {
	cmd  string
	args []string
	env  []string
	cwd  string
}

// machine is what runs for one sandbox between a boot and a kill: its
// backend and the processes started through envd.
type machine struct {
	b backend

	mu     sync.Mutex
	procs  map[uint32]*process
	frozen bool
	killed bool
}

func newMachine(b backend) *machine {
	return &machine{b: b, procs: map[uint32]*process{}}
}

func (m *machine) alive() bool {
	select {
	case <-m.b.done():
		return false
	default:
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.killed
}

func (m *machine) dial(ctx context.Context, port int) (net.Conn, error) {
	return m.b.dial(ctx, port)
}

func (m *machine) files() fileOps { return m.b.files() }

// freeze stops every process of the sandbox (memory pause).
func (m *machine) freeze() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.frozen = true
	return m.b.freeze()
}

// thaw resumes a frozen sandbox.
func (m *machine) thaw() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.frozen = false
	return m.b.thaw()
}

// kill stops everything and waits (briefly) for the processes' streams to
// end.
func (m *machine) kill() {
	m.mu.Lock()
	m.killed = true
	m.mu.Unlock()
	m.b.stop()
	for _, p := range m.processes() {
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
		}
	}
}

var errStopping = errors.New("sandbox is stopping")

// startProcess starts a command in m, streaming to first (subscribed before
// any output exists, so the Start stream misses nothing). timeout > 0 kills
// the process after that long, like envd's Connect-Timeout-Ms handling.
func (m *machine) startProcess(cfg processConfig, tag *string, openStdin bool, env []string, cwd string, timeout time.Duration) (*process, *subscriber, error) {
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
	p := &process{cfg: cfg, tag: tag, m: m, done: make(chan struct{}), subs: map[*subscriber]struct{}{}}
	if stdinW != nil {
		p.stdin = stdinW
	}
	first := p.subscribe()

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
		p.pid = uint32(pid)
		m.procs[p.pid] = p
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
	p.run(outR, errR, wait, timeout)
	return p, first, nil
}

func (m *machine) forget(p *process) {
	m.mu.Lock()
	delete(m.procs, p.pid)
	m.mu.Unlock()
}

func (m *machine) process(pid uint32) *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.procs[pid]
}

func (m *machine) processByTag(tag string) *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.procs {
		if p.tag != nil && *p.tag == tag {
			return p
		}
	}
	return nil
}

func (m *machine) processes() []*process {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*process, 0, len(m.procs))
	for _, p := range m.procs {
		out = append(out, p)
	}
	return out
}
