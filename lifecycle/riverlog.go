package lifecycle

import (
	"context"
	"log/slog"
	"strings"
)

// quietRiver is River's logger: Sandman's own log tells events, not heartbeats. River logs at
// INFO, every few seconds, lines that say nothing happened ("producer: Producer job counts",
// each maintenance service's "Ran successfully"): those go at DEBUG, everything else as River
// logs it.
func quietRiver(l *slog.Logger) *slog.Logger {
	return slog.New(&heartbeats{Handler: l.Handler()})
}

// heartbeatSuffixes end the messages of River's periodic INFO lines.
var heartbeatSuffixes = []string{": Producer job counts", ": Ran successfully"}

// heartbeats lowers River's heartbeat lines to DEBUG.
type heartbeats struct{ slog.Handler }

// isHeartbeat reports whether msg is one of River's heartbeat lines.
func isHeartbeat(msg string) bool {
	for _, s := range heartbeatSuffixes {
		if strings.HasSuffix(msg, s) {
			return true
		}
	}
	return false
}

func (h *heartbeats) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo && isHeartbeat(r.Message) {
		if !h.Handler.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r.Level = slog.LevelDebug
	}
	return h.Handler.Handle(ctx, r)
}

// Enabled lets INFO through even when the handler's level is above DEBUG: Handle decides.
func (h *heartbeats) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, l)
}

func (h *heartbeats) WithAttrs(as []slog.Attr) slog.Handler {
	return &heartbeats{Handler: h.Handler.WithAttrs(as)}
}

func (h *heartbeats) WithGroup(name string) slog.Handler {
	return &heartbeats{Handler: h.Handler.WithGroup(name)}
}
