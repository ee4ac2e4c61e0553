package lifecycle

import (
	"testing"
	"time"

	"sandman/db"
	"sandman/sandbox"
)

func TestGoneStatus(t *testing.T) {
	t.Parallel()
	now := time.Now()
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	str := func(s string) *string { return &s }
	tests := []struct {
		name   string
		sb     db.Sandbox
		reason *string
		want   sandbox.Status
	}{
		{"timeout kill is expiry", db.Sandbox{Status: sandbox.Running}, str("timeout"), sandbox.Expired},
		{"our own kill request", db.Sandbox{Status: sandbox.Running, KillRequested: true}, str("request"), sandbox.Terminated},
		{"someone else's kill request", db.Sandbox{Status: sandbox.Running}, str("request"), sandbox.Killed},
		{"admin kill", db.Sandbox{Status: sandbox.Paused}, str("admin"), sandbox.Killed},
		{"missing running past its end", db.Sandbox{Status: sandbox.Running, EndAt: &past}, nil, sandbox.Expired},
		{"missing running before its end", db.Sandbox{Status: sandbox.Running, EndAt: &future}, nil, sandbox.Killed},
		// A paused sandbox's end time is its pause time: never an expiry.
		{"missing paused past its end", db.Sandbox{Status: sandbox.Paused, EndAt: &past}, nil, sandbox.Killed},
		{"missing after our kill", db.Sandbox{Status: sandbox.Unknown, KillRequested: true}, nil, sandbox.Terminated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _, _ := goneStatus(tt.sb, tt.reason, now); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}
