package app

import (
	"context"

	"sandman/applog"
)

// appLogSink is where the watch's lines go: the app log's Writer (batched, never blocking). A
// run's end is recorded by the lifecycle with its problem (applog.OpenExitProblem) in the
// transaction of the app's change, once Flush stored the run's lines.
type appLogSink struct{ l *applog.Service }

func (s appLogSink) Lines(ctx context.Context, lines []applog.Line) { s.l.Writer.Lines(ctx, lines) }

func (s appLogSink) Flush(ctx context.Context) error { return s.l.Writer.Flush(ctx) }
