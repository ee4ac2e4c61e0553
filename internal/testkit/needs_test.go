package testkit

import (
	"fmt"
	"testing"
)

// tbRecorder is a testing.TB that notes a Fatalf or Skipf instead of acting on it.
type tbRecorder struct {
	testing.TB
	fatal, skip string
}

func (r *tbRecorder) Helper()                        {}
func (r *tbRecorder) Fatalf(format string, a ...any) { r.fatal = fmt.Sprintf(format, a...) }
func (r *tbRecorder) Skipf(format string, a ...any)  { r.skip = fmt.Sprintf(format, a...) }

// A test that cannot run here skips on a developer's machine and fails under CI=true, which
// .ci/run sets: nothing passes in CI by not running. (Not parallel: it sets CI.)
func TestNeedsFailsUnderCI(t *testing.T) {
	for _, tt := range []struct {
		ci          string
		ok          bool
		fails, skip bool
	}{
		{ci: "true", ok: false, fails: true},
		{ci: "", ok: false, skip: true},
		{ci: "true", ok: true},
		{ci: "", ok: true},
	} {
		t.Setenv("CI", tt.ci)
		r := &tbRecorder{TB: t}
		Needs(r, tt.ok, "a %s", "server")
		if (r.fatal != "") != tt.fails || (r.skip != "") != tt.skip {
			t.Errorf("CI=%q, ok %v: failed %q, skipped %q; want failed %v, skipped %v", tt.ci, tt.ok, r.fatal, r.skip, tt.fails, tt.skip)
		}
	}
}

// The quick lane skips what needs sandboxd's isolation or Chromium, but never under CI=true,
// where such a skip fails: CI runs the whole suite. (Not parallel: it sets CI and the lane.)
func TestTheQuickLaneSkipsOnlyOffCI(t *testing.T) {
	for _, tt := range []struct {
		ci, lane    string
		fails, skip bool
	}{
		{ci: "", lane: "quick", skip: true},
		{ci: "true", lane: "quick", fails: true},
		{ci: "", lane: ""},
		{ci: "true", lane: ""},
		{ci: "", lane: "whole"},
	} {
		t.Setenv("CI", tt.ci)
		t.Setenv("SANDMAN_TEST_LANE", tt.lane)
		r := &tbRecorder{TB: t}
		NotInQuickLane(r, "a sandboxd")
		if (r.fatal != "") != tt.fails || (r.skip != "") != tt.skip {
			t.Errorf("CI=%q, lane %q: failed %q, skipped %q; want failed %v, skipped %v", tt.ci, tt.lane, r.fatal, r.skip, tt.fails, tt.skip)
		}
	}
}
