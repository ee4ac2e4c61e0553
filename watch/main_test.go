package watch_test

import (
	"os"
	"testing"

	"sandman/db/dbtest"
)

func TestMain(m *testing.M) {
	// The benchmark's sandboxd runs in a process of its own: this binary, started again.
	if os.Getenv(sandboxdChildEnv) != "" {
		os.Exit(runSandboxdChild())
	}
	os.Exit(dbtest.Main(m))
}
