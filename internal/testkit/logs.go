package testkit

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
)

// LogRecorder keeps every record logged through its Logger, so a test can read what the code
// under test reported (a breaker's transitions, say) as events instead of guessing from time.
type LogRecorder struct {
	mu      sync.Mutex
	records []map[string]string
}

// Logger logs into r, at every level.
func (r *LogRecorder) Logger() *slog.Logger { return slog.New(&recordHandler{r: r}) }

// Records returns the attributes of every record whose message is msg, oldest first.
func (r *LogRecorder) Records(msg string) []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range r.records {
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

type recordHandler struct {
	r     *LogRecorder
	attrs []slog.Attr
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordHandler) Handle(_ context.Context, rec slog.Record) error {
	m := map[string]string{"msg": rec.Message, "level": rec.Level.String()}
	for _, a := range h.attrs {
		m[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.r.mu.Lock()
	h.r.records = append(h.r.records, m)
	h.r.mu.Unlock()
	return nil
}

func (h *recordHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordHandler{r: h.r, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

// WithGroup is not needed by the code under test: groups are flattened.
func (h *recordHandler) WithGroup(string) slog.Handler { return h }

// SyncBuffer is a log sink that a test reads while the code under test writes to it from any
// goroutine.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
