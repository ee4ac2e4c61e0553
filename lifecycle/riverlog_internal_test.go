package lifecycle

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// River's heartbeat lines reach Sandman's log at DEBUG, never at INFO; its other lines keep
// their level (a job that errored is still news).
func TestRiverHeartbeatsAreDebugNotInfo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level slog.Level // the log's level
		msg   string
		want  string // the level written, "" for none
	}{
		{"producer counts at info", slog.LevelInfo, "producer: Producer job counts", ""},
		{"producer counts at debug", slog.LevelDebug, "producer: Producer job counts", "DEBUG"},
		{"a maintenance run at info", slog.LevelInfo, "JobCleaner: Ran successfully", ""},
		{"a job that errored", slog.LevelInfo, "jobexecutor.JobExecutor: Job errored", "INFO"},
		{"the client started", slog.LevelInfo, "River client started", "INFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := quietRiver(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})))
			l.With("client_id", "x").InfoContext(context.Background(), tc.msg, "queue", "default")
			got := buf.String()
			switch {
			case tc.want == "" && got != "":
				t.Fatalf("wrote %q, want nothing", got)
			case tc.want != "" && !strings.Contains(got, "level="+tc.want):
				t.Fatalf("wrote %q, want it at %s", got, tc.want)
			}
		})
	}
}
