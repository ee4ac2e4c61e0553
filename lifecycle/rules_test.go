package lifecycle_test

import (
	"testing"

	"sandman/internal/testkit"
)

// TestOnlyApplyWritesStatus: the one statement that writes a sandbox's status is called from
// lifecycle/apply.go and nowhere else in the repository, tests included (their fixtures write
// rows with plain SQL, never through it).
func TestOnlyApplyWritesStatus(t *testing.T) {
	t.Parallel()
	uses := testkit.SelectorUses(t, "..", "UpdateSandboxStatus")
	for c := range uses {
		if c != "../lifecycle/apply.go" {
			t.Errorf("%s uses UpdateSandboxStatus: status changes go through lifecycle's apply", c)
		}
	}
	if len(uses) == 0 {
		t.Fatal("no caller of UpdateSandboxStatus found: the check reads nothing")
	}
}
