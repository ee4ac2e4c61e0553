package app

import (
	"context"
	"log/slog"

	"sandman/applog"
)

// appLogSink is where the watch's lines and runs' ends go: the lines to the app log's Writer
// (batched, never blocking), an end to a problem of its run (its own lines only).
type appLogSink struct {
	l   *applog.Service
	log *slog.Logger
}

func (s appLogSink) Lines(ctx context.Context, lines []applog.Line) { s.l.Writer.Lines(ctx, lines) }

// Ended opens the run's problem. A run found gone has no exit code to tell (-1).
func (s appLogSink) Ended(ctx context.Context, run applog.Run, exitCode *int32) {
	code := -1
	if exitCode != nil {
		code = int(*exitCode)
	}
	if p, err := s.l.OpenExitProblem(ctx, run, code); err != nil {
		s.log.Warn("app log: the exit's problem was not recorded", "project_id", run.ProjectID, "version", run.Version, "err", err)
	} else {
		s.log.Info("problem opened", "project_id", run.ProjectID, "version", run.Version, "message", p.Message)
	}
}
