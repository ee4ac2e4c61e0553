package lifecycle

import (
	"testing"
	"time"

	"sandman/db"
)

func TestStateMachine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from, to db.SandboxStatus
		ok       bool
	}{
		{Starting, Running, true},
		{Running, Paused, true},
		{Paused, Resuming, true},
		{Resuming, Running, true},
		{Resuming, ResumeFailed, true},
		{Running, Unknown, true},
		{Unknown, Running, true},
		{Paused, Killed, true},
		{Running, Expired, true},
		{Running, Resuming, false},
		{Starting, Resuming, false},
		{Killed, Running, false},
		{Expired, Paused, false},
		{Terminated, Starting, false},
		{Killed, Terminated, false},
		{Running, Starting, false},
	}
	for _, tt := range tests {
		if got := CanTransition(tt.from, tt.to); got != tt.ok {
			t.Errorf("%s → %s allowed = %v, want %v", tt.from, tt.to, got, tt.ok)
		}
	}
	for _, s := range db.AllSandboxStatusValues() {
		if _, ok := allowed[s]; !ok {
			t.Errorf("state %s is missing from the transition table", s)
		}
	}
}

func TestGoneStatus(t *testing.T) {
	t.Parallel()
	now := time.Now()
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	str := func(s string) *string { return &s }
	tests := []struct {
		name   string
		sb     db.Sandbox
		reason *string
		want   db.SandboxStatus
	}{
		{"timeout kill is expiry", db.Sandbox{Status: Running}, str("timeout"), Expired},
		{"our own kill request", db.Sandbox{Status: Running, KillRequested: true}, str("request"), Terminated},
		{"someone else's kill request", db.Sandbox{Status: Running}, str("request"), Killed},
		{"admin kill", db.Sandbox{Status: Paused}, str("admin"), Killed},
		{"missing running past its end", db.Sandbox{Status: Running, EndAt: &past}, nil, Expired},
		{"missing running before its end", db.Sandbox{Status: Running, EndAt: &future}, nil, Killed},
		// A paused sandbox's end time is its pause time: never an expiry.
		{"missing paused past its end", db.Sandbox{Status: Paused, EndAt: &past}, nil, Killed},
		{"missing after our kill", db.Sandbox{Status: Unknown, KillRequested: true}, nil, Terminated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _, _ := goneStatus(tt.sb, tt.reason, now); got != tt.want {
				t.Fatalf("got %s, want %s", got, tt.want)
			}
		})
	}
}
