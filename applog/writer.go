package applog

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/db"
)

// Channel is the PostgreSQL channel on which a batch of lines is announced at commit; the payload
// is the ids of the projects that got lines, comma-separated (several notifications for a batch
// of many projects). The log streams (Feed) read the database after their cursor when theirs is
// named.
const Channel = "sandman_applog"

// WriterConfig bounds what the Writer holds and stores.
type WriterConfig struct {
	// FlushEvery is the longest a line waits before its batch is written; MaxBatch lines are
	// written at once, sooner.
	FlushEvery time.Duration
	MaxBatch   int
	// MaxPending lines (and MaxPendingBytes of them) wait at most: past it, while the database
	// is behind, lines are dropped and counted, never queued without bound.
	MaxPending      int
	MaxPendingBytes int
	// RunRate lines a second per run are taken (a burst of RunBurst); past it they are dropped,
	// and a line "N lines dropped" says so, at most once a second per run.
	RunRate  float64
	RunBurst float64
	// KeepLines and KeepBytes are what each project keeps: its newest lines within both.
	KeepLines int64
	KeepBytes int64
}

// DefaultWriterConfig is production's. A run printing 1,000 lines a second is kept whole; a
// flood costs its project, never another (each run has its own allowance) nor memory (the
// waiting lines are bounded).
func DefaultWriterConfig() WriterConfig {
	return WriterConfig{FlushEvery: 50 * time.Millisecond, MaxBatch: 5000, MaxPending: 100_000,
		MaxPendingBytes: 32 << 20, RunRate: 1000, RunBurst: 2000, KeepLines: 10_000, KeepBytes: 2 << 20}
}

// Writer takes the lines of every preview of an instance and stores them in batches, one
// statement per batch whatever the number of previews. Lines never blocks.
type Writer struct {
	pool   *pgxpool.Pool
	cfg    WriterConfig
	log    *slog.Logger
	now    func() time.Time
	kick   chan struct{}
	stored prometheus.Counter
	drops  prometheus.Counter

	mu           sync.Mutex
	pending      []Line
	pendingBytes int
	runs         map[uuid.UUID]*runState
	lastTaken    time.Time // when lines were last taken to be written

	flushMu sync.Mutex // one batch written at a time, in order
	redact  redactors  // under flushMu
}

// runState is one run's allowance (a token bucket) and what it dropped since it last said so.
type runState struct {
	run      Run
	tokens   float64
	last     time.Time
	dropped  int
	toldAt   time.Time
	lastSeen time.Time
}

// NewWriter returns a Writer; Run writes its batches.
func NewWriter(pool *pgxpool.Pool, cfg WriterConfig, log *slog.Logger, reg prometheus.Registerer) *Writer {
	if log == nil {
		log = slog.Default()
	}
	w := &Writer{pool: pool, cfg: cfg, log: log, now: time.Now, kick: make(chan struct{}, 1),
		runs: map[uuid.UUID]*runState{}, redact: redactors{byRun: map[uuid.UUID]*runRedactor{}},
		stored: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_app_log_lines_total",
			Help: "Lines of the apps' output stored."}),
		drops: prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_app_log_dropped_total",
			Help: "Lines of the apps' output dropped: past a run's rate, or while the database was behind."}),
	}
	if reg != nil {
		reg.MustRegister(w.stored, w.drops)
	}
	return w
}

// RedactWith has every line's secret values replaced before it is stored (redact.go); call it
// before Run.
func (w *Writer) RedactWith(s Secrets) { w.redact.secrets = s }

// Lines takes lines of any runs. It never waits for the database: the lines are batched, and
// those past their run's rate, or past what may wait, are dropped and counted.
func (w *Writer) Lines(_ context.Context, lines []Line) {
	if len(lines) == 0 {
		return
	}
	now := w.now()
	full := false
	w.mu.Lock()
	for _, l := range lines {
		l.Text = cleanLine(l.Text)
		if l.At.IsZero() {
			l.At = now
		}
		rs := w.runLocked(l.Run, now)
		if rs.tokens < 1 || len(w.pending) >= w.cfg.MaxPending || w.pendingBytes+len(l.Text) > w.cfg.MaxPendingBytes {
			rs.dropped++
			continue
		}
		rs.tokens--
		w.pending = append(w.pending, l)
		w.pendingBytes += len(l.Text)
	}
	// A full batch is written at once, and so is a line after a quiet moment (nothing taken
	// for FlushEvery): a printing app's first line is not held for the next tick, while a busy
	// instance still writes at most one batch per tick short of MaxBatch.
	full = len(w.pending) >= w.cfg.MaxBatch || (len(w.pending) > 0 && now.Sub(w.lastTaken) >= w.cfg.FlushEvery)
	w.mu.Unlock()
	if full {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// runLocked is the run's state with its allowance refilled to now.
func (w *Writer) runLocked(r Run, now time.Time) *runState {
	rs := w.runs[r.ID]
	if rs == nil {
		rs = &runState{run: r, tokens: w.cfg.RunBurst, last: now, toldAt: now}
		w.runs[r.ID] = rs
	}
	rs.tokens = min(w.cfg.RunBurst, rs.tokens+now.Sub(rs.last).Seconds()*w.cfg.RunRate)
	rs.last, rs.lastSeen = now, now
	return rs
}

// Run writes batches until ctx ends, then writes what is left.
func (w *Writer) Run(ctx context.Context) {
	t := time.NewTicker(w.cfg.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			w.flush(flushCtx, true)
			cancel()
			return
		case <-t.C:
		case <-w.kick:
		}
		w.flush(ctx, false)
	}
}

// Flush writes every line taken so far (and what was dropped) before it returns: an exit's
// problem reads its run's last lines from the database.
func (w *Writer) Flush(ctx context.Context) error {
	return w.flush(ctx, true)
}

func (w *Writer) flush(ctx context.Context, all bool) error {
	w.flushMu.Lock()
	defer w.flushMu.Unlock()
	for {
		batch, more := w.take(all)
		if len(batch) == 0 {
			return nil
		}
		// Like the write, a taken batch's redaction is not cut short by ctx.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		err := w.redact.redact(rctx, batch, w.now())
		cancel()
		if err == nil {
			err = w.write(ctx, batch)
		}
		if err != nil {
			w.drops.Add(float64(len(batch)))
			w.log.Error("applog: store lines", "lines", len(batch), "err", err)
			return err
		}
		w.stored.Add(float64(len(batch)))
		if !more {
			return nil
		}
	}
}

// take removes the next batch from what waits, with a "N lines dropped" line for each run that
// dropped some (at most once a second per run, or at once when all is asked for); more says
// lines are left.
func (w *Writer) take(all bool) (batch []Line, more bool) {
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	n := min(len(w.pending), w.cfg.MaxBatch)
	batch = make([]Line, n, n+8)
	copy(batch, w.pending)
	for _, l := range batch {
		w.pendingBytes -= len(l.Text)
	}
	if n > 0 {
		w.lastTaken = now
	}
	w.pending = append(w.pending[:0], w.pending[n:]...)
	if len(w.pending) == 0 && cap(w.pending) > 4*w.cfg.MaxBatch {
		w.pending = nil // a flood's buffer is not kept once it is over
	}
	for id, rs := range w.runs {
		if rs.dropped > 0 && (all || now.Sub(rs.toldAt) >= time.Second) {
			w.drops.Add(float64(rs.dropped))
			w.log.Info("applog: lines dropped", "project", rs.run.ProjectID, "run", id, "dropped", rs.dropped)
			batch = append(batch, Line{Run: rs.run, Stream: Stderr, At: now,
				Text: fmt.Sprintf("[sandman] %d lines dropped: more than %g lines a second, or more than could be stored meanwhile", rs.dropped, w.cfg.RunRate)})
			rs.dropped, rs.toldAt = 0, now
		}
		if rs.dropped == 0 && now.Sub(rs.lastSeen) > time.Minute {
			delete(w.runs, id) // a run silent for a minute has its whole allowance back anyway
		}
	}
	return batch, len(w.pending) > 0
}

// write stores a batch in one transaction: the lines in one COPY, the projects' totals in one
// statement, the trim of the projects now over their bounds in another, and the announcement.
// A batch taken is written whole even when ctx ends meanwhile (Run's stop): its lines are no
// longer waiting anywhere else, so only writeTimeout bounds it.
func (w *Writer) write(ctx context.Context, batch []Line) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	rows := make([]db.CopyAppLogLinesParams, len(batch))
	sums := map[uuid.UUID]*[2]int64{}
	for i, l := range batch {
		rows[i] = db.CopyAppLogLinesParams{ProjectID: l.Run.ProjectID, SandboxID: l.Run.SandboxID, Version: l.Run.Version,
			RunID: l.Run.ID, Source: string(l.Run.Source), Stream: string(l.Stream), At: l.At, Text: l.Text}
		s := sums[l.Run.ProjectID]
		if s == nil {
			s = new([2]int64)
			sums[l.Run.ProjectID] = s
		}
		s[0]++
		s[1] += int64(len(l.Text)) // the column's octet_length: the text is UTF-8 (cleanLine)
	}
	add := db.AddAppLogTotalsParams{ProjectIds: slices.SortedFunc(maps.Keys(sums), func(a, b uuid.UUID) int {
		return bytes.Compare(a[:], b[:])
	})}
	for _, p := range add.ProjectIds {
		add.Lines, add.Bytes = append(add.Lines, sums[p][0]), append(add.Bytes, sums[p][1])
	}
	return db.InTx(ctx, w.pool, func(tx db.Tx) error {
		if _, err := tx.CopyAppLogLines(ctx, rows); err != nil {
			return err
		}
		totals, err := tx.AddAppLogTotals(ctx, add)
		if err != nil {
			return err
		}
		var over []uuid.UUID
		for _, t := range totals {
			if t.Lines > w.cfg.KeepLines || t.Bytes > w.cfg.KeepBytes {
				over = append(over, t.ProjectID)
			}
		}
		if len(over) > 0 {
			if err := tx.TrimAppLogLines(ctx, db.TrimAppLogLinesParams{ProjectIds: over,
				MaxLines: w.cfg.KeepLines, MaxBytes: w.cfg.KeepBytes}); err != nil {
				return err
			}
		}
		return tx.NotifyAppLogs(ctx, notifyPayloads(totals))
	})
}

// writeTimeout bounds the write of one batch, which no caller's context cuts short.
const writeTimeout = 30 * time.Second

// notifyPayloads names the batch's projects in notifications under PostgreSQL's 8,000 bytes.
func notifyPayloads(totals []db.AppLogTotal) []string {
	var out []string
	var b strings.Builder
	for _, t := range totals {
		if b.Len() > 7000 {
			out = append(out, b.String())
			b.Reset()
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t.ProjectID.String())
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}
