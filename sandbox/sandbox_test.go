package sandbox

import "testing"

// statuses is every value of the sandbox_status enum (db's TestEveryEnumValueIsTyped checks the
// database has no other).
var statuses = []Status{Starting, Running, Paused, Resuming, ResumeFailed, Killed, Expired, Terminated, Unknown}

func TestStateMachine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from, to Status
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
	for _, s := range statuses {
		if _, ok := allowed[s]; !ok {
			t.Errorf("state %s is missing from the transition table", s)
		}
	}
}
