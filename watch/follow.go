package watch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sandman/applog"
	"sandman/e2b"
)

// Sink receives what the app printed (the log store's writer). Lines is called from the
// goroutine that follows one run, a batch per chunk of output that arrived, in order; it must
// not block for long (the store batches and drops past its rate). Flush stores every line taken
// so far before it returns: a run's end is recorded with its problem, which reads the run's last
// lines from the database, in one transaction that follows the flush.
type Sink interface {
	Lines(ctx context.Context, lines []applog.Line)
	Flush(ctx context.Context) error
}

// discard is the sink when none is given.
type discard struct{}

func (discard) Lines(context.Context, []applog.Line) {}
func (discard) Flush(context.Context) error          { return nil }

// Discard is a sink that keeps nothing.
var Discard Sink = discard{}

// tailLines is how many of a run's last lines a follower keeps for its end's report.
const tailLines = 40

// Follower follows one run's process: its output goes to the sink line by line, stdout and
// stderr apart, and its last lines are kept for the report of its end.
type Follower struct {
	run  applog.Run
	proc *e2b.Process
	sink Sink
	done chan struct{}
	stop context.CancelFunc
	// stopped: Stop was called (its follow ended or ends without the process's end).
	stopped atomic.Bool
	// silence breaks the follow after a silence (bound); nil without a bound.
	silence *time.Timer

	mu   sync.Mutex
	tail []string
	res  e2b.ProcessResult
	err  error
}

// Follow starts following proc, a run of run.Source, until it ends or Stop: its lines go to sink
// (nil: nowhere).
func Follow(run applog.Run, proc *e2b.Process, sink Sink) *Follower {
	return follow(run, proc, sink, 0)
}

// ErrSilent ends a follow whose stream brought nothing, not even envd's keepalive, for longer
// than the watch's silence bound: the connection may look open and be dead. The process may
// run on: the watch connects to it again by its pid.
var ErrSilent = errors.New("the process's stream was silent too long")

// follow is Follow with the stream broken (ErrSilent) after silence without a frame (0: never).
func follow(run applog.Run, proc *e2b.Process, sink Sink, silence time.Duration) *Follower {
	if sink == nil {
		sink = discard{}
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	f := &Follower{run: run, proc: proc, sink: sink, done: make(chan struct{}), stop: func() { cancel(context.Canceled) }}
	if silence > 0 {
		f.silence = f.bound(cancel, silence)
	}
	go f.follow(ctx)
	return f
}

// bound breaks the follow once its stream was silent for longer than silence. It is a timer,
// not a goroutine: a watched preview holds no stack for it (BENCHMARKS.md, the memory per
// watched preview). Each firing looks at the stream's last frame and sleeps until silence after
// it, so only one firing runs at a time.
func (f *Follower) bound(cancel context.CancelCauseFunc, silence time.Duration) *time.Timer {
	since := time.Now()
	var (
		mu sync.Mutex // t is set before a firing reads it
		t  *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(silence, func() {
		mu.Lock()
		defer mu.Unlock()
		select {
		case <-f.done:
			return
		default:
		}
		if last := f.proc.LastFrame(); last.After(since) {
			since = last
		}
		if wait := silence - time.Since(since); wait > 0 {
			t.Reset(wait)
			return
		}
		cancel(ErrSilent)
	})
	return t
}

func (f *Follower) follow(ctx context.Context) {
	defer close(f.done)
	if f.silence != nil {
		defer f.silence.Stop()
	}
	var out, errOut splitter
	var batch []applog.Line
	emit := func(stream applog.Stream) func(string) {
		return func(text string) {
			batch = append(batch, applog.Line{Run: f.run, Stream: stream, At: time.Now(), Text: text})
		}
	}
	send := func() {
		if len(batch) == 0 {
			return
		}
		f.keep(batch)
		f.sink.Lines(ctx, batch)
		batch = nil
	}
	res, err := f.proc.Follow(ctx, func(stdout, stderr []byte) {
		out.write(stdout, emit(applog.Stdout))
		errOut.write(stderr, emit(applog.Stderr))
		send()
	})
	out.flush(emit(applog.Stdout))
	errOut.flush(emit(applog.Stderr))
	send()
	if err != nil && errors.Is(context.Cause(ctx), ErrSilent) {
		err = fmt.Errorf("%w (%v)", ErrSilent, err)
	}
	f.mu.Lock()
	f.res, f.err = res, err
	f.mu.Unlock()
}

func (f *Follower) keep(lines []applog.Line) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range lines {
		f.tail = append(f.tail, l.Text)
	}
	if over := len(f.tail) - tailLines; over > 0 {
		f.tail = append(f.tail[:0], f.tail[over:]...)
	}
}

// Run is the run followed.
func (f *Follower) Run() applog.Run { return f.run }

// PID is the followed process's id.
func (f *Follower) PID() int { return f.proc.PID }

// Done is closed once the follow ended: the process ended, the stream broke, or Stop.
func (f *Follower) Done() <-chan struct{} { return f.done }

// Ended reports, once Done, whether the process's end arrived (a broken stream or Stop is no
// end: the process may run on) and its exit code.
func (f *Follower) Ended() (code int32, ended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return int32(f.res.ExitCode), f.err == nil
}

// Signalled reports, once Done with the process's end, whether a signal ended it (a kill: the
// sandbox's own end looks the same from inside) rather than its own exit.
func (f *Follower) Signalled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err == nil && !f.res.Exited
}

// Err is why the follow ended without the process's end (nil once it ended, or before Done).
func (f *Follower) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Tail is the run's last lines (at most tailLines of them), one per line.
func (f *Follower) Tail() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.tail, "\n")
}

// Stop stops following (the stream is closed; the process runs on) and waits for the follow to
// end.
func (f *Follower) Stop() {
	f.stopped.Store(true)
	f.stop()
	<-f.done
}
