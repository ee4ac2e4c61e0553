package machine

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

// ProcessConfig is envd's ProcessConfig.
type ProcessConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd,omitempty"`
}

// ProcEvent is one event of envd's process stream, already in its JSON shape.
type ProcEvent struct {
	Start     *ProcStart `json:"start,omitempty"`
	Data      *procData  `json:"data,omitempty"`
	End       *procEnd   `json:"end,omitempty"`
	Keepalive *struct{}  `json:"keepalive,omitempty"`
	// Lost ends the stream in place of End when the sandbox itself ended under the command
	// (killed, paused): the provider's stream breaks then, and the SDKs tell the sandbox's
	// end from a command's by that.
	Lost bool `json:"-"`
}

type ProcStart struct {
	Pid uint32 `json:"pid"`
}

type procData struct {
	Stdout []byte `json:"stdout,omitempty"`
	Stderr []byte `json:"stderr,omitempty"`
	Pty    []byte `json:"pty,omitempty"`
}

// output is one stream of a command's output, and which of procData's it is.
type output struct {
	f    *os.File
	kind int
}

const (
	outStdout = iota
	outStderr
	outPty
)

type procEnd struct {
	ExitCode int32   `json:"exitCode"`
	Exited   bool    `json:"exited"`
	Status   string  `json:"status"`
	Error    *string `json:"error,omitempty"`
}

// Process is a command started through envd's Process service.
type Process struct {
	Pid    uint32
	Config ProcessConfig
	Tag    *string
	m      *Machine
	done   chan struct{}
	stdin  io.WriteCloser // nil when stdin is closed or was never open
	// pty is the terminal's master for a command started on one: its input and size.
	pty *os.File

	mu   sync.Mutex
	subs map[*Subscriber]struct{}
	// joined is closed (and replaced) when a stream subscribes, waking the
	// readers that idle while nobody follows.
	joined chan struct{}
	end    *procEnd
	wmu    sync.Mutex // serialises stdin writes and close
}

// Subscriber is one stream (Start or Connect) following a process. Sends
// block, so a slow client slows the process like envd, but never past the
// client's departure.
type Subscriber struct {
	C    chan ProcEvent
	gone chan struct{}
}

func (p *Process) Subscribe() *Subscriber {
	s := &Subscriber{C: make(chan ProcEvent, 64), gone: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		return nil
	}
	p.subs[s] = struct{}{}
	if p.joined != nil {
		close(p.joined)
		p.joined = nil
	}
	return s
}

func (p *Process) Unsubscribe(s *Subscriber) {
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
	close(s.gone)
}

// publish hands ev to every subscriber and reports whether there was one.
func (p *Process) publish(ev ProcEvent) bool {
	p.mu.Lock()
	subs := make([]*Subscriber, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.C <- ev:
		case <-s.gone:
		}
	}
	return len(subs) > 0
}

// idleOutputRate is how fast sandboxd reads, and drops, a process's output
// while no stream follows it: past it the pipe fills and the process waits
// in its write, inside its own cgroup, instead of costing sandboxd a core
// (a "yes" with nobody watching). A dev server's log stays far below it.
const idleOutputRate = 256 << 10 // bytes per second

// idle waits as long as n dropped bytes take at idleOutputRate, or until a
// stream subscribes.
func (p *Process) idle(n int) {
	p.mu.Lock()
	if len(p.subs) > 0 {
		p.mu.Unlock()
		return
	}
	if p.joined == nil {
		p.joined = make(chan struct{})
	}
	joined := p.joined
	p.mu.Unlock()
	t := time.NewTimer(time.Duration(n) * time.Second / idleOutputRate)
	defer t.Stop()
	select {
	case <-t.C:
	case <-joined:
	}
}

// run streams the command's output to its subscribers and reports its end.
func (p *Process) run(outs []output, wait func() exitInfo, timeout time.Duration) {
	var readers sync.WaitGroup
	for _, r := range outs {
		readers.Go(func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := r.f.Read(buf)
				if n > 0 {
					chunk := append([]byte(nil), buf[:n]...)
					ev := ProcEvent{Data: &procData{Stdout: chunk}}
					switch r.kind {
					case outStderr:
						ev = ProcEvent{Data: &procData{Stderr: chunk}}
					case outPty:
						ev = ProcEvent{Data: &procData{Pty: chunk}}
					}
					if !p.publish(ev) {
						p.idle(n)
					}
				}
				if err != nil {
					return
				}
			}
		})
	}

	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { _ = p.Signal(syscall.SIGKILL) })
	}
	go func() {
		exit := wait()
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
			closeOutputs(outs)
			<-drained
		}
		closeOutputs(outs)
		end := &procEnd{Status: exit.Status, Exited: exit.Exited, ExitCode: int32(exit.Code)}
		if !exit.Exited || exit.Code != 0 {
			end.Error = &exit.Status
		}
		last := ProcEvent{End: end}
		if !p.m.Alive() {
			last = ProcEvent{Lost: true}
		}
		p.m.forget(p)
		p.mu.Lock()
		p.end = end
		subs := p.subs
		p.subs = map[*Subscriber]struct{}{}
		p.mu.Unlock()
		for s := range subs {
			select {
			case s.C <- last:
			case <-s.gone:
			}
			close(s.C)
		}
		p.CloseStdin()
		close(p.done)
	}()
}

// Signal sends sig to the process and everything below it: the pid the
// client knows may be a shell around the real program.
func (p *Process) Signal(sig syscall.Signal) error {
	return p.m.b.signal(int(p.Pid), sig)
}

func closeOutputs(outs []output) {
	for _, o := range outs {
		o.f.Close()
	}
}

// WritePty types b into the command's terminal.
func (p *Process) WritePty(b []byte) error {
	if p.pty == nil {
		return errors.New("tty not assigned to process")
	}
	_, err := p.pty.Write(b)
	return err
}

// Resize sets the size of the command's terminal.
func (p *Process) Resize(size PtySize) error {
	if p.pty == nil {
		return errors.New("tty not assigned to process")
	}
	return resize(p.pty, size)
}

func (p *Process) WriteStdin(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.stdin == nil {
		return errors.New("stdin not enabled or closed")
	}
	_, err := p.stdin.Write(b)
	return err
}

func (p *Process) CloseStdin() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}
