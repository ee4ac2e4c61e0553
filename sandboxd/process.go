package sandboxd

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// processConfig is envd's ProcessConfig.
type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd,omitempty"`
}

// procEvent is one event of envd's process stream, already in its JSON shape.
type procEvent struct {
	Start     *procStart `json:"start,omitempty"`
	Data      *procData  `json:"data,omitempty"`
	End       *procEnd   `json:"end,omitempty"`
	Keepalive *struct{}  `json:"keepalive,omitempty"`
}

type procStart struct {
	Pid uint32 `json:"pid"`
}

type procData struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
}

type procEnd struct {
	ExitCode int32   `json:"exitCode"`
	Exited   bool    `json:"exited"`
	Status   string  `json:"status"`
	Error    *string `json:"error,omitempty"`
}

// process is a command started through envd's Process service.
type process struct {
	pid   uint32
	cfg   processConfig
	tag   *string
	cmd   *exec.Cmd
	done  chan struct{}
	stdin io.WriteCloser // nil when stdin is closed or was never open

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	end  *procEnd
	wmu  sync.Mutex // serialises stdin writes and close
}

// subscriber is one stream (Start or Connect) following a process. Sends
// block, so a slow client slows the process like envd, but never past the
// client's departure.
type subscriber struct {
	ch   chan procEvent
	gone chan struct{}
}

func (p *process) subscribe() *subscriber {
	s := &subscriber{ch: make(chan procEvent, 64), gone: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		return nil
	}
	p.subs[s] = struct{}{}
	return s
}

func (p *process) unsubscribe(s *subscriber) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
	close(s.gone)
}

func (p *process) publish(ev procEvent) {
	p.mu.Lock()
	subs := make([]*subscriber, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- ev:
		case <-s.gone:
		}
	}
}

// startProcess starts cmd in m, streaming to first (subscribed before any
// output exists, so the Start stream misses nothing). timeout > 0 kills the
// process after that long, like envd's Connect-Timeout-Ms handling.
func (m *machine) startProcess(cfg processConfig, tag *string, openStdin bool, env []string, cwd string, timeout time.Duration) (*process, *subscriber, error) {
	c, err := m.command(cfg.Cmd, cfg.Args, cwd, env)
	if err != nil {
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, nil, err
	}
	c.Stdout, c.Stderr = outW, errW
	var stdin io.WriteCloser
	if openStdin {
		if stdin, err = c.StdinPipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, nil, err
		}
	}
	p := &process{cfg: cfg, tag: tag, cmd: c, done: make(chan struct{}), stdin: stdin, subs: map[*subscriber]struct{}{}}
	first := p.subscribe()

	m.mu.Lock()
	if m.killed {
		m.mu.Unlock()
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, nil, errors.New("sandbox is stopping")
	}
	err = c.Start()
	if err == nil {
		p.pid = uint32(c.Process.Pid)
		m.procs[p.pid] = p
		if m.frozen {
			// Raced with a memory pause: freeze() signalled the group
			// before this process joined it.
			_ = syscall.Kill(c.Process.Pid, syscall.SIGSTOP)
		}
	}
	m.mu.Unlock()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, nil, err
	}

	var readers sync.WaitGroup
	for _, r := range []struct {
		f      *os.File
		stderr bool
	}{{outR, false}, {errR, true}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			buf := make([]byte, 32<<10)
			for {
				n, err := r.f.Read(buf)
				if n > 0 {
					chunk := append([]byte(nil), buf[:n]...)
					if r.stderr {
						p.publish(procEvent{Data: &procData{Stderr: chunk}})
					} else {
						p.publish(procEvent{Data: &procData{Stdout: chunk}})
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}

	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { p.signal(syscall.SIGKILL) })
	}
	go func() {
		waitErr := c.Wait()
		if timer != nil {
			timer.Stop()
		}
		// A background child may still hold the pipes open; envd ends the
		// stream when the command itself exits, so give the readers a moment
		// to drain what is buffered and then cut them off.
		drained := make(chan struct{})
		go func() { readers.Wait(); close(drained) }()
		select {
		case <-drained:
		case <-time.After(200 * time.Millisecond):
			outR.Close()
			errR.Close()
			<-drained
		}
		outR.Close()
		errR.Close()
		end := &procEnd{Status: c.ProcessState.String(), Exited: c.ProcessState.Exited()}
		end.ExitCode = int32(c.ProcessState.ExitCode())
		if waitErr != nil {
			msg := waitErr.Error()
			end.Error = &msg
		}
		m.mu.Lock()
		delete(m.procs, p.pid)
		m.mu.Unlock()
		p.mu.Lock()
		p.end = end
		subs := p.subs
		p.subs = map[*subscriber]struct{}{}
		p.mu.Unlock()
		for s := range subs {
			select {
			case s.ch <- procEvent{End: end}:
			case <-s.gone:
			}
			close(s.ch)
		}
		p.closeStdin()
		close(p.done)
	}()
	return p, first, nil
}

// signal sends sig to the process and everything below it: the pid the
// client knows may be a wrapper (nsenter, bash) around the real program.
func (p *process) signal(sig syscall.Signal) {
	for _, pid := range descendants(int(p.pid)) {
		_ = syscall.Kill(pid, sig)
	}
}

func (p *process) writeStdin(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.stdin == nil {
		return errors.New("stdin not enabled or closed")
	}
	_, err := p.stdin.Write(b)
	return err
}

func (p *process) closeStdin() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
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
