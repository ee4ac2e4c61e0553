package db_test

import (
	"slices"
	"testing"

	"sandman/db/dbtest"
	"sandman/sandbox"
)

// Every value of an enum that package sandbox types has its constant there, and every constant
// is a value the database takes: a value added by a migration alone would reach code that cannot
// name it, and a constant the database refuses would fail only when first written.
func TestEveryEnumValueIsTyped(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	for _, tt := range []struct {
		enum  string
		typed []string
	}{
		{"sandbox_status", strs(sandbox.Starting, sandbox.Running, sandbox.Paused, sandbox.Resuming, sandbox.ResumeFailed,
			sandbox.Killed, sandbox.Expired, sandbox.Terminated, sandbox.Unknown)},
		{"failure_cause", strs(sandbox.CauseNotFound, sandbox.CauseUnreachable, sandbox.CauseFilesLost, sandbox.CauseOther)},
		// stopped is the API's, never stored.
		{"app_status", strs(sandbox.AppStarting, sandbox.AppUp, sandbox.AppExited, sandbox.AppNotAnswering)},
		{"pause_kind", strs(sandbox.PauseMemory, sandbox.PauseFilesystem)},
		{"build_status", strs(sandbox.BuildQueued, sandbox.BuildBuilding, sandbox.BuildReady, sandbox.BuildFailed)},
		{"build_kind", strs(sandbox.BuildInitial, sandbox.BuildRebuild)},
		{"build_failure", strs(sandbox.FailInstallFailed, sandbox.FailInstallTimedOut, sandbox.FailStartExited, sandbox.FailStartNotAnswering,
			sandbox.FailProvider, sandbox.FailWorkerLost, sandbox.FailOperatorStopped, sandbox.FailReplaced, sandbox.FailOther)},
		{"event_reason", strs(sandbox.ReasonCreated, sandbox.ReasonReady, sandbox.ReasonBuildFailed, sandbox.ReasonBuildFailedRefunded,
			sandbox.ReasonReplaced, sandbox.ReasonIdle, sandbox.ReasonAfterBuild, sandbox.ReasonRequested, sandbox.ReasonResume,
			sandbox.ReasonResumed, sandbox.ReasonResumeNotFound, sandbox.ReasonResumeUnreachable, sandbox.ReasonResumeTimedOut,
			sandbox.ReasonResumeFilesLost, sandbox.ReasonRestored, sandbox.ReasonSynced, sandbox.ReasonCannotVerify,
			sandbox.ReasonProviderPaused, sandbox.ReasonProviderResumed, sandbox.ReasonProviderTimeout, sandbox.ReasonProviderRequest,
			sandbox.ReasonProviderOther, sandbox.ReasonMissingPastEnd, sandbox.ReasonMissingAfterKill, sandbox.ReasonLost,
			sandbox.ReasonVisitorWake, sandbox.ReasonVisitorFoundGone, sandbox.ReasonVersionLive, sandbox.ReasonVersionFailed,
			sandbox.ReasonWokeWithVersion, sandbox.ReasonOther, sandbox.ReasonAppExited, sandbox.ReasonWokeNotStarting,
			sandbox.ReasonEnvChanged, sandbox.ReasonEnvApplied)},
		{"event_source", strs(sandbox.SourceUser, sandbox.SourceWebhook, sandbox.SourceReconciler, sandbox.SourceScheduler,
			sandbox.SourceBuild, sandbox.SourceEventsAPI, sandbox.SourceVisitor, sandbox.SourceOperator, sandbox.SourceWatch)},
	} {
		rows, err := pool.Query(t.Context(), "SELECT unnest(enum_range(NULL::"+tt.enum+"))::text")
		if err != nil {
			t.Fatal(err)
		}
		var stored []string
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				t.Fatal(err)
			}
			stored = append(stored, v)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(stored)
		typed := slices.Sorted(slices.Values(tt.typed))
		if !slices.Equal(stored, typed) {
			t.Errorf("%s: the database has %q, package sandbox names %q", tt.enum, stored, typed)
		}
	}
}

func strs[T ~string](vs ...T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}
