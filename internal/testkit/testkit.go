// Package testkit is what the tests of every package share: waiting for a condition instead of
// sleeping, reading a server-sent event stream, and logs that stay quiet unless asked for. It
// imports no Sandman package, so any package's tests may use it.
package testkit

import (
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"
)

// Eventually calls check until it returns nil and fails t once within has passed, naming what
// it waited for and check's last error, which should say what check saw. The machine tests run
// on is shared and at times slow: wait for conditions, never for a fixed time.
func Eventually(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	wait := 5 * time.Millisecond
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s: %v", within, what, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// BenchSize is full in a benchmark's measured run and small under -short: `make test` runs
// every benchmark once that way (-short -benchtime 1x) for its checks alone (none lost, none
// applied twice, every resume intact…), which must fail on a broken invariant as the full run
// does; the targets a benchmark only reports stay figures.
func BenchSize(full, small int) int {
	if testing.Short() {
		return small
	}
	return full
}

// Needs stops a test whose environment lacks what it needs (a program, a privilege): a skip on
// a developer's machine, a failure under CI=true, where every test must run (.ci/run sets it).
// A test never skips for its environment any other way.
func Needs(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and this test cannot run here: "+format, args...)
	} else {
		t.Skipf("skipped (CI=true makes it a failure): "+format, args...)
	}
}

// LaneQuick is the lane of `make test-quick` (SANDMAN_TEST_LANE=quick): the tests that need
// neither a sandboxd that isolates sandboxes nor Chromium (nor a database seeded at scale), for a
// run of a minute or two while working. `make test` is the whole suite, and so is every run without the variable.
const LaneQuick = "quick"

// Lane is the test lane this run is in: LaneQuick, or "" for the whole suite.
func Lane() string {
	if os.Getenv("SANDMAN_TEST_LANE") == LaneQuick {
		return LaneQuick
	}
	return ""
}

// NotInQuickLane stops a test that needs what the quick lane leaves out (what says which) when
// the run is the quick lane: a skip, except under CI=true, where it fails as every other
// environment skip does (Needs): CI runs the whole suite, and nothing passes there by not running.
func NotInQuickLane(t testing.TB, what string) {
	t.Helper()
	Needs(t, Lane() != LaneQuick, "%s, which the quick lane (SANDMAN_TEST_LANE=quick) leaves out", what)
}

// Until is Eventually for a condition that has nothing to say but whether it holds.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

var errNotYet = errors.New("not yet")

// Logger is the logger to hand the code under test: it discards everything unless
// SANDMAN_TEST_LOG names a level (debug, info, warn or error), and then writes text to stderr.
func Logger() *slog.Logger { return LoggerFromEnv("SANDMAN_TEST_LOG") }

// LoggerFromEnv is Logger for another variable (sandboxd's tests read SANDBOXD_TEST_LOG).
func LoggerFromEnv(variable string) *slog.Logger {
	v := os.Getenv(variable)
	if v == "" {
		return slog.New(slog.DiscardHandler)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(v)); err != nil {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
