package lifecycle

import (
	"testing"
	"time"

	"sandman/db"
)

// Every event the lifecycle records reads as one sentence naming its cause, written from the
// move, its source and its reason as the writers record them (docs/states.md, "History").
func TestHistorySentences(t *testing.T) {
	t.Parallel()
	const (
		user       = db.EventSourceUser
		webhook    = db.EventSourceWebhook
		eventsAPI  = db.EventSourceEventsAPI
		reconciler = db.EventSourceReconciler
		scheduler  = db.EventSourceScheduler
		build      = db.EventSourceBuild
		visitor    = db.EventSourceVisitor
	)
	tests := []struct {
		name string
		f    eventFacts
		want string
	}{
		{"first build", eventFacts{Starting, Starting, user, db.EventReasonCreated, false, ""}, "Build started (1 credit)"},
		{"rebuild", eventFacts{Starting, Starting, user, db.EventReasonCreated, true, ""}, "Rebuilt from your saved files (1 credit)"},
		{"first build through the API", eventFacts{Starting, Starting, user, db.EventReasonCreated, false, "ci"}, `Build started through the API (token "ci"), 1 credit`},
		{"rebuild through the API", eventFacts{Starting, Starting, user, db.EventReasonCreated, true, "ci"}, `Rebuilt through the API (token "ci"), 1 credit`},
		{"build ready", eventFacts{Starting, Running, build, db.EventReasonReady, false, ""}, "Preview ready"},
		{"rebuild ready", eventFacts{Starting, Running, build, db.EventReasonReady, true, ""}, "Preview ready"},
		{"idle pause", eventFacts{Running, Paused, scheduler, pauseIdle.reason, false, ""}, "Paused after 3 min without activity"},
		{"pause after the build", eventFacts{Running, Paused, scheduler, pauseAfterBuild.reason, false, ""}, "Paused as soon as it was ready, to save resources"},
		{"operator's pause", eventFacts{Running, Paused, db.EventSourceOperator, pauseByOperator.reason, false, ""}, "Paused by an operator"},
		{"operator's kill", eventFacts{Paused, Terminated, db.EventSourceOperator, db.EventReasonRequested, false, ""}, "Stopped by an operator"},
		{"founder's pause", eventFacts{Running, Paused, user, pauseRequested.reason, false, ""}, "Paused by you"},
		{"provider's pause (webhook)", eventFacts{Running, Paused, webhook, db.EventReasonProviderPaused, false, ""}, "Paused by the provider"},
		{"provider's pause (events API)", eventFacts{Running, Paused, eventsAPI, db.EventReasonProviderPaused, false, ""}, "Paused by the provider"},
		{"found paused", eventFacts{Running, Paused, reconciler, db.EventReasonSynced, false, ""}, "Paused by the provider"},
		{"resume clicked", eventFacts{Paused, Resuming, user, db.EventReasonResume, false, ""}, "Resume started by you"},
		{"resume clicked on a connection issue", eventFacts{Unknown, Resuming, user, db.EventReasonResume, false, ""}, "Resume started by you"},
		{"resumed", eventFacts{Resuming, Running, user, db.EventReasonResumed, false, ""}, "Resumed by you"},
		{"resumed by the provider", eventFacts{Paused, Running, webhook, db.EventReasonProviderResumed, false, ""}, "Resumed by the provider"},
		{"found running", eventFacts{Paused, Running, reconciler, db.EventReasonSynced, false, ""}, "Resumed by the provider"},
		{"resume failed, gone", eventFacts{Resuming, ResumeFailed, user, reasonResumeNotFound, false, ""}, "Resume failed: the provider no longer has this sandbox"},
		{"resume failed, unreachable", eventFacts{Resuming, ResumeFailed, user, reasonResumeUnreachable, false, ""}, "Resume failed: the sandbox couldn't be reached"},
		{"resume stuck", eventFacts{Resuming, ResumeFailed, scheduler, reasonResumeTimedOut, false, ""}, "Resume failed: it took too long"},
		{"resume failed, older row", eventFacts{Resuming, ResumeFailed, user, db.EventReasonOther, false, ""}, "Resume failed"},
		{"killed in the provider's dashboard", eventFacts{Running, Killed, webhook, db.EventReasonProviderRequest, false, ""}, "Stopped by the provider"},
		{"killed, read from the events API", eventFacts{Paused, Killed, eventsAPI, db.EventReasonProviderOther, false, ""}, "Stopped by the provider"},
		{"resume failed, files lost", eventFacts{Resuming, ResumeFailed, user, reasonResumeFilesLost, false, ""}, "Resume failed: the provider lost its files and they couldn't be restored"},
		{"found gone, its kill reason read from the events", eventFacts{Running, Killed, reconciler, db.EventReasonProviderRequest, false, ""}, "Found gone when checked with the provider"},
		{"found missing (an older row)", eventFacts{Running, Killed, reconciler, db.EventReasonOther, false, ""}, "Found gone when checked with the provider"},
		{"lost by the provider", eventFacts{Running, Killed, reconciler, reasonLost, false, ""}, "The provider lost this preview"},
		{"lost by the provider, found by a pause", eventFacts{Paused, Killed, scheduler, reasonLost, false, ""}, "The provider lost this preview"},
		{"expired (webhook)", eventFacts{Running, Expired, webhook, db.EventReasonProviderTimeout, false, ""}, "Expired: its time ran out"},
		{"expired (found missing)", eventFacts{Running, Expired, reconciler, db.EventReasonMissingPastEnd, false, ""}, "Expired: its time ran out"},
		{"replaced", eventFacts{Paused, Terminated, user, db.EventReasonReplaced, false, ""}, "Replaced by a rebuild"},
		{"build failed", eventFacts{Starting, Terminated, build, db.EventReasonBuildFailed, false, ""}, "Build failed"},
		{"build failed and refunded", eventFacts{Starting, Terminated, build, db.EventReasonBuildFailedRefunded, false, ""}, "Build failed because of the sandbox provider (credit refunded)"},
		{"stopped by our kill", eventFacts{Running, Terminated, webhook, db.EventReasonProviderRequest, false, ""}, "Stopped by Sandman"},
		{"connection issue", eventFacts{Running, Unknown, reconciler, db.EventReasonCannotVerify, false, ""}, "Connection issue with the provider"},
		{"back in touch, running", eventFacts{Unknown, Running, reconciler, db.EventReasonSynced, false, ""}, "Back in touch with the provider"},
		{"back in touch, paused", eventFacts{Unknown, Paused, reconciler, db.EventReasonSynced, false, ""}, "Back in touch with the provider"},
		{"woken from the share link", eventFacts{Paused, Resuming, visitor, reasonVisitorWake, false, ""}, "Wake-up started by a visitor of your share link"},
		{"woken from the share link after a connection issue", eventFacts{Unknown, Resuming, visitor, reasonVisitorWake, false, ""}, "Wake-up started by a visitor of your share link"},
		{"woken by a visitor", eventFacts{Resuming, Running, visitor, db.EventReasonResumed, false, ""}, "Woken by a visitor of your share link"},
		{"visitor's wake failed", eventFacts{Resuming, ResumeFailed, visitor, reasonResumeUnreachable, false, ""}, "Resume failed: the sandbox couldn't be reached"},
		{"a visitor found it killed", eventFacts{Killed, Killed, visitor, reasonVisitorFoundGone, false, ""}, "A visitor found it gone"},
		{"a visitor found it expired", eventFacts{Expired, Expired, visitor, reasonVisitorFoundGone, false, ""}, "A visitor found it gone"},
		{"a visitor found it lost on resume", eventFacts{ResumeFailed, ResumeFailed, visitor, reasonVisitorFoundGone, false, ""}, "A visitor found it gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := describe(tt.f, 3*time.Minute); got != tt.want {
				t.Fatalf("describe(%+v) = %q, want %q", tt.f, got, tt.want)
			}
		})
	}
}

// A heal's sentence counts the files its event names, in whichever state it happened.
func TestRestoredSentence(t *testing.T) {
	t.Parallel()
	s := &Service{cfg: Config{IdleTimeout: 3 * time.Minute}}
	for _, tt := range []struct {
		status db.SandboxStatus
		source db.EventSource
		files  []string
		want   string
	}{
		{Resuming, db.EventSourceUser, []string{"index.html", "lib/a b.js", "data.json"}, "Restored 3 files the provider lost"},
		{Resuming, db.EventSourceUser, []string{"index.html"}, "Restored 1 file the provider lost"},
		{Starting, db.EventSourceBuild, []string{"a", "b"}, "Restored 2 files the provider lost"},
	} {
		e := s.entry(db.SandboxEvent{FromStatus: tt.status, ToStatus: tt.status, Source: tt.source, Reason: reasonRestored, Files: tt.files}, db.BuildKindInitial)
		if e.Text != tt.want || len(e.Files) != len(tt.files) {
			t.Errorf("%s: %q naming %q, want %q naming %q", tt.status, e.Text, e.Files, tt.want, tt.files)
		}
	}
}

// The idle pause names the configured timeout.
func TestDurationText(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		3 * time.Minute:                      "3 min",
		time.Hour:                            "1 h",
		2 * time.Hour:                        "2 h",
		90 * time.Minute:                     "90 min",
		45 * time.Second:                     "45 s",
		4 * time.Second:                      "4 s",
		90 * time.Second:                     "1 min 30 s",
		3*time.Minute + 400*time.Millisecond: "3 min",
	} {
		if got := DurationText(d); got != want {
			t.Errorf("DurationText(%v) = %q, want %q", d, got, want)
		}
		if got := describe(eventFacts{Running, Paused, pauseIdle.source, pauseIdle.reason, false, ""}, d); got != "Paused after "+want+" without activity" {
			t.Errorf("idle pause after %v reads %q", d, got)
		}
	}
}
