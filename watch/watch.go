// Package watch owns the watch of running dev servers (docs/architecture.md, "The watch of dev
// servers"): Sandman follows each running preview's dev server through the provider's process
// stream (envd streams a started process's output and its end), so an app that exits is seen
// when it exits, not after a timeout, and what it prints reaches the log store line by line. No
// preview is polled. Of all instances, one holds each preview's watch: a session-level advisory
// lock per sandbox on the watcher's own connection, let go when that connection ends, so the
// previews of an instance that dies or stops are taken over by another one's scan, which
// connects to each dev server again by its pid. The lifecycle starts dev servers, hands their
// followers to the watch (Hold) and is told of their ends (Options.OnExit); the watch writes no
// state itself.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/applog"
	"sandman/db"
	"sandman/e2b"
	"sandman/sandbox"
)

// lockNamespace is the first key of every preview's watch lock (the second is its sandbox id's
// hash): "SW", the sandbox watch.
const lockNamespace int32 = 0x5357

// Exit is how a held run ended.
type Exit struct {
	Run applog.Run
	// ExitCode is nil when the process was found gone with no end to read (it ended while no
	// instance followed it).
	ExitCode *int32
	// Signalled: a signal ended it (a crash killed, or the sandbox itself ending).
	Signalled bool
	// Tail is the run's last lines, as far as this instance followed it.
	Tail string
}

// Options assemble a Watcher.
type Options struct {
	Pool     *pgxpool.Pool
	Provider *e2b.Client
	// Sink gets the output of every run followed (nil: nowhere).
	Sink Sink
	// OnExit reports a held run's end (the lifecycle's app writer); it must ignore a run the
	// sandbox no longer holds. An error is logged, and the report made again a moment later.
	OnExit func(ctx context.Context, e Exit) error
	// Answers reports whether a preview URL gets an answer: a process envd no longer knows may
	// still serve (E2B#1031), and is then not reported exited.
	Answers func(ctx context.Context, url string) bool
	Logger  *slog.Logger
	// ScanEvery is how often the watcher looks for previews no instance holds (default 2 s):
	// the longest a dead instance's previews go unwatched.
	ScanEvery time.Duration
	// Silence is how long a followed stream may bring nothing (no output, no end, no keepalive:
	// envd sends one every 50 s) before it is taken for dead, broken and connected again by the
	// process's pid (default 2 min).
	Silence time.Duration
	// Name tells this instance's watch connection in pg_stat_activity (application_name).
	Name string
}

// Watcher holds the watch of the previews it took.
type Watcher struct {
	o    Options
	q    *db.Queries
	kick chan struct{}

	// connMu serialises the use of conn, the session that holds the locks.
	connMu sync.Mutex
	conn   *pgx.Conn

	mu   sync.Mutex
	held map[uuid.UUID]*holding
	// started: per sandbox, the follower of the run this instance's job started and has not
	// handed over yet (Follow, Hold). A holding that reads that run in the row follows it rather
	// than connecting, so a server that exits right after it answered keeps its exit code.
	started map[uuid.UUID]*Follower
	ctx     context.Context // the watcher's life, for the holdings' goroutines
	wg      sync.WaitGroup
	stop    context.CancelFunc
	done    chan struct{}
}

// holding is one preview whose watch this instance holds.
type holding struct {
	id uuid.UUID
	// next is a newer run's follower the lifecycle handed over (guarded by Watcher.mu), and wake
	// tells keep of it. A slot, not a channel: a hand over never waits for a keep busy reporting
	// an end (which may ask the provider for seconds), and a newer run replaces an older one.
	next   *Follower
	wake   chan struct{}
	cancel context.CancelFunc
	// following: its run's stream is open (not between a takeover and its connect).
	following atomic.Bool
}

// New assembles a Watcher; Start runs it.
func New(o Options) *Watcher {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ScanEvery <= 0 {
		o.ScanEvery = 2 * time.Second
	}
	if o.Sink == nil {
		o.Sink = discard{}
	}
	if o.Name == "" {
		o.Name = "sandman-watch"
	}
	if o.Silence <= 0 {
		o.Silence = 2 * time.Minute
	}
	return &Watcher{o: o, q: db.New(o.Pool), kick: make(chan struct{}, 1), held: map[uuid.UUID]*holding{},
		started: map[uuid.UUID]*Follower{}}
}

// Sink is where followed output goes.
func (w *Watcher) Sink() Sink { return w.o.Sink }

// Start runs the scan that takes over the previews no instance holds, until Stop.
func (w *Watcher) Start(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.ctx, w.stop, w.done = ctx, cancel, make(chan struct{})
	w.mu.Unlock()
	go func() {
		defer close(w.done)
		w.scanLoop(ctx)
	}()
}

// Stop stops following (the dev servers run on) and lets every preview's watch go, for another
// instance to take.
func (w *Watcher) Stop() {
	w.mu.Lock()
	stop, done := w.stop, w.done
	w.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	<-done
	w.wg.Wait()
	w.connMu.Lock()
	defer w.connMu.Unlock()
	w.closeConn()
}

// Kick makes the watcher look for previews to take now rather than at its next scan (a resume
// whose dev server ran on through the sleep).
func (w *Watcher) Kick() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *Watcher) scanLoop(ctx context.Context) {
	t := time.NewTicker(w.o.ScanEvery)
	defer t.Stop()
	for {
		if err := w.scan(ctx); err != nil && ctx.Err() == nil {
			w.o.Logger.Warn("watch: look for previews to hold", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.kick:
		}
	}
}

// scan takes the watch of every running preview no instance holds, and follows each.
func (w *Watcher) scan(ctx context.Context) error {
	w.mu.Lock()
	held := make([]uuid.UUID, 0, len(w.held))
	for id := range w.held {
		held = append(held, id)
	}
	w.mu.Unlock()
	var rows []db.HoldWatchedAppsRow
	err := w.withConn(ctx, func(q *db.Queries) (err error) {
		rows, err = q.HoldWatchedApps(ctx, db.HoldWatchedAppsParams{Namespace: lockNamespace, Held: held, MaxCount: 500})
		return err
	})
	if err != nil {
		return err
	}
	for _, r := range rows {
		w.start(r.ID, nil)
	}
	return nil
}

// withConn runs fn on the watch's own connection, opening it when needed. A failure of the
// connection lets every holding go: its locks went with it.
func (w *Watcher) withConn(ctx context.Context, fn func(q *db.Queries) error) error {
	w.connMu.Lock()
	defer w.connMu.Unlock()
	if w.conn == nil || w.conn.IsClosed() {
		w.closeConn()
		w.dropAll()
		pc, err := w.o.Pool.Acquire(ctx)
		if err != nil {
			return err
		}
		// The locks are the session's: this connection never goes back to the pool, where it
		// would keep them for whoever borrowed it next.
		w.conn = pc.Hijack()
		if _, err := w.conn.Exec(ctx, "SELECT set_config('application_name', $1, false)", w.o.Name); err != nil {
			w.closeConn()
			return err
		}
	}
	err := fn(db.New(w.conn))
	if err != nil && w.conn.IsClosed() {
		w.closeConn()
		w.dropAll()
	}
	return err
}

func (w *Watcher) closeConn() {
	if w.conn == nil {
		return
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = w.conn.Close(cctx)
	w.conn = nil
}

// dropAll stops following every holding, without a word: the locks are gone with the session.
func (w *Watcher) dropAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, h := range w.held {
		h.cancel()
		if h.next != nil {
			h.next.Stop()
			h.next = nil
		}
		delete(w.held, id)
	}
}

// Hold makes this instance the holder of the watch of f's sandbox, following f from now on:
// when it holds it already (an earlier run of the same preview), f replaces the run it follows;
// when no instance holds it, it takes it. When another instance does, f is stopped (its
// process runs on; that instance's holding connects to it) and Hold reports false.
func (w *Watcher) Hold(ctx context.Context, f *Follower) bool {
	id := f.Run().SandboxID
	w.mu.Lock()
	if w.ctx == nil || w.ctx.Err() != nil {
		w.mu.Unlock()
		f.Stop()
		return false
	}
	if h, ok := w.held[id]; ok {
		w.handLocked(h, f)
		w.mu.Unlock()
		return true
	}
	w.mu.Unlock()
	var got bool
	err := w.withConn(ctx, func(q *db.Queries) (err error) {
		got, err = q.HoldWatchedApp(ctx, db.HoldWatchedAppParams{Namespace: lockNamespace, ID: id})
		return err
	})
	if err != nil || !got {
		if err != nil {
			w.o.Logger.Warn("watch: hold a preview", "sandbox_id", id, "err", err)
		}
		f.Stop()
		return false
	}
	switch w.start(id, f) {
	case started:
		return true
	case handed: // this instance's scan took it meanwhile: the lock was taken twice
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := w.withConn(ctx, func(q *db.Queries) error {
			return q.ReleaseWatchedApp(ctx, db.ReleaseWatchedAppParams{Namespace: lockNamespace, ID: id})
		}); err != nil {
			w.o.Logger.Warn("watch: let a preview's second hold go", "sandbox_id", id, "err", err)
		}
		return true
	default:
		f.Stop()
		return false
	}
}

// handLocked hands f, a newer run of h's preview, to h's keep (w.mu held): a run handed over
// before and not yet taken is older, and stopped.
func (w *Watcher) handLocked(h *holding, f *Follower) {
	if h.next != nil && h.next != f {
		h.next.Stop()
	}
	h.next = f
	if w.started[h.id] == f {
		delete(w.started, h.id)
	}
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// takeNext is the run handed over to h, if any, taken.
func (w *Watcher) takeNext(h *holding) *Follower {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := h.next
	h.next = nil
	return f
}

// Follow starts following proc, a dev server run a job of this instance just started, which the
// job hands over later (Hold) or stops: until then, a holding of its preview that reads the run
// in the row follows it rather than connecting to its process, which may have ended already
// (its end, with its exit code, is the follower's).
func (w *Watcher) Follow(run applog.Run, proc *e2b.Process) *Follower {
	f := follow(run, proc, w.o.Sink, w.o.Silence)
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, g := range w.started {
		if g.stopped.Load() {
			delete(w.started, id)
		}
	}
	w.started[run.SandboxID] = f
	return f
}

// startedRun is the follower a job of this instance keeps of h's preview's run, if any: handed
// over to h already, or not yet.
func (w *Watcher) startedRun(h *holding, run uuid.UUID) *Follower {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f := h.next; f != nil && f.Run().ID == run {
		h.next = nil
		return f
	}
	f := w.started[h.id]
	if f == nil || f.Run().ID != run || f.stopped.Load() {
		return nil
	}
	select {
	case <-f.Done():
		if _, ended := f.Ended(); !ended {
			return nil // its stream broke: connect to the process
		}
	default:
	}
	return f
}

// Holds reports whether this instance holds the watch of the sandbox and follows its dev
// server's stream.
func (w *Watcher) Holds(id uuid.UUID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	h, ok := w.held[id]
	return ok && h.following.Load()
}

// Held is the previews whose watch this instance holds.
func (w *Watcher) Held() []uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]uuid.UUID, 0, len(w.held))
	for id := range w.held {
		ids = append(ids, id)
	}
	return ids
}

// How start went.
const (
	notStarted = iota // the watch stops
	started           // a holding of the preview follows
	handed            // the preview was held already: f went to its holding
)

// start follows a preview whose watch this instance just took: f when given, else its dev
// server connected to by its pid.
func (w *Watcher) start(id uuid.UUID, f *Follower) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ctx.Err() != nil {
		return notStarted
	}
	if h, ok := w.held[id]; ok {
		if f == nil {
			return notStarted
		}
		w.handLocked(h, f)
		return handed
	}
	w.startLocked(id, f)
	if f != nil && w.started[id] == f {
		delete(w.started, id)
	}
	return started
}

func (w *Watcher) startLocked(id uuid.UUID, f *Follower) {
	ctx, cancel := context.WithCancel(w.ctx)
	h := &holding{id: id, wake: make(chan struct{}, 1), cancel: cancel}
	w.held[id] = h
	w.wg.Go(func() { w.keep(ctx, h, f) })
}

// release lets the preview's watch go (its holding ended), unless a newer run was handed to
// it meanwhile: a new holding follows that one, keeping the lock.
func (w *Watcher) release(h *holding) {
	w.mu.Lock()
	if w.held[h.id] != h {
		w.mu.Unlock()
		return // dropped with the connection: nothing left to let go
	}
	delete(w.held, h.id)
	if next := h.next; next != nil {
		h.next = nil
		if w.ctx.Err() == nil {
			w.startLocked(h.id, next)
			w.mu.Unlock()
			return
		}
		next.Stop()
	}
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := w.withConn(ctx, func(q *db.Queries) error {
		return q.ReleaseWatchedApp(ctx, db.ReleaseWatchedAppParams{Namespace: lockNamespace, ID: h.id})
	})
	if err != nil {
		w.o.Logger.Warn("watch: let a preview go", "sandbox_id", h.id, "err", err)
	}
}

// keep follows one held preview's dev server from run to run until it ends, the preview stops
// running, or the watch stops: an end is reported (OnExit), a broken stream connected again
// by the pid the row holds.
func (w *Watcher) keep(ctx context.Context, h *holding, f *Follower) {
	defer w.release(h)
	defer func() {
		if f != nil {
			f.Stop()
		}
	}()
	retry := 0
	for {
		if next := w.takeNext(h); next != nil {
			if f != nil && f != next { // f may be the handed-over run already (connect took it)
				f.Stop()
			}
			f, retry = next, 0
		}
		h.following.Store(f != nil)
		if f == nil {
			var stop bool
			f, stop = w.connect(ctx, h, &retry)
			if stop {
				return
			}
			if f == nil {
				continue
			}
			h.following.Store(true)
		}
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
			continue
		case <-f.Done():
		}
		if code, ended := f.Ended(); ended {
			w.report(ctx, Exit{Run: f.Run(), ExitCode: &code, Signalled: f.Signalled(), Tail: f.Tail()})
			// The row may already hold a newer run (a restart on a new version): follow it.
			f = nil
			continue
		}
		w.o.Logger.Info("watch: a dev server's stream broke; connecting again", "sandbox_id", h.id, "err", f.Err())
		f = nil
	}
}

// connect follows the run the row holds by its pid. stop: the preview no longer has a run to
// follow (it stopped running, its app ended, or a newer run is still starting: its starter
// hands it over); f nil without stop: try again (after a pause that grows with retry).
func (w *Watcher) connect(ctx context.Context, h *holding, retry *int) (f *Follower, stop bool) {
	id := h.id
	if *retry > 0 {
		select {
		case <-ctx.Done():
			return nil, true
		case <-time.After(min(time.Duration(*retry)*200*time.Millisecond, 5*time.Second)):
		}
	}
	*retry++
	row, err := w.q.GetWatchedApp(ctx, id)
	if err != nil {
		if db.IsNotFound(err) || ctx.Err() != nil {
			return nil, true
		}
		w.o.Logger.Warn("watch: read a held preview", "sandbox_id", id, "err", err)
		return nil, false
	}
	// A run still starting is followed by the job that started it, which hands it over.
	if row.Status != sandbox.Running || row.AppPid == nil || row.AppRunID == nil || row.ProviderID == "" ||
		row.AppStatus == nil || *row.AppStatus != sandbox.AppUp && *row.AppStatus != sandbox.AppNotAnswering {
		return nil, true
	}
	// A run this instance's job started and has not handed over yet: its follower already holds
	// the stream, and its end (the exit code), which a connect may find gone.
	if started := w.startedRun(h, *row.AppRunID); started != nil {
		*retry = 0
		return started, false
	}
	run := applog.Run{ProjectID: row.ProjectID, SandboxID: row.ID, Version: row.AppVersion, Source: applog.SourceApp, ID: *row.AppRunID}
	sb := e2b.Sandbox{ID: row.ProviderID, EnvdAccessToken: row.EnvdToken, Domain: row.ProviderDomain}
	proc, err := w.o.Provider.ConnectProcess(ctx, sb, int(*row.AppPid))
	switch {
	case errors.Is(err, e2b.ErrNotFound):
		// It ended while no instance followed it, or envd lost track of it while it serves on
		// (E2B#1031, after a memory snapshot): its port tells which.
		if w.o.Answers != nil && w.o.Answers(ctx, row.PreviewURL) {
			w.o.Logger.Warn("watch: envd no longer knows a dev server that still answers; not followed", "sandbox_id", id,
				"pid", *row.AppPid)
			return nil, true
		}
		w.report(ctx, Exit{Run: run})
		return nil, false // the row moves on (exited, or a newer run): read it again
	case err != nil:
		if ctx.Err() != nil {
			return nil, true
		}
		w.o.Logger.Warn("watch: connect to a dev server", "sandbox_id", id, "pid", *row.AppPid, "err", err)
		return nil, false
	}
	*retry = 0
	return follow(run, proc, w.o.Sink, w.o.Silence), false
}

// report tells the lifecycle of a run's end, trying again while it fails (the database away).
func (w *Watcher) report(ctx context.Context, e Exit) {
	if e.ExitCode != nil {
		w.o.Logger.Info("app exited", "sandbox_id", e.Run.SandboxID, "version", e.Run.Version, "exit_code", *e.ExitCode)
	} else {
		w.o.Logger.Info("app found gone", "sandbox_id", e.Run.SandboxID, "version", e.Run.Version)
	}
	if w.o.OnExit == nil {
		return
	}
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := w.o.OnExit(context.WithoutCancel(ctx), e)
		if err == nil {
			return
		}
		w.o.Logger.Warn("watch: report an app's end", "sandbox_id", e.Run.SandboxID, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// String names the watcher in logs.
func (w *Watcher) String() string { return fmt.Sprintf("watch(%s)", w.o.Name) }
