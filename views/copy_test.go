package views

import (
	"strings"
	"testing"
	"time"

	"sandman/db"
	"sandman/sandbox"
)

// eventFacts are what an event's sentence is chosen from: the move, who made it and why, whether
// its sandbox runs a rebuild, and the API token the founder came through.
type eventFacts struct {
	from, to sandbox.Status
	source   sandbox.Source
	reason   sandbox.Reason
	rebuild  bool
	viaToken string
}

func (f eventFacts) text(idle time.Duration) string {
	ev := db.SandboxEvent{FromStatus: f.from, ToStatus: f.to, Source: f.source, Reason: f.reason}
	if f.viaToken != "" {
		ev.ViaToken = &f.viaToken
	}
	kind := sandbox.BuildInitial
	if f.rebuild {
		kind = sandbox.BuildRebuild
	}
	return EventText(ev, kind, idle)
}

// Every event the lifecycle records reads as one sentence naming its cause, written from the
// move, its source and its reason as the writers record them (docs/states.md, "History").
func TestHistorySentences(t *testing.T) {
	t.Parallel()
	const (
		user       = sandbox.SourceUser
		webhook    = sandbox.SourceWebhook
		eventsAPI  = sandbox.SourceEventsAPI
		reconciler = sandbox.SourceReconciler
		scheduler  = sandbox.SourceScheduler
		build      = sandbox.SourceBuild
		visitor    = sandbox.SourceVisitor
	)
	tests := []struct {
		name string
		f    eventFacts
		want string
	}{
		{"first build", eventFacts{sandbox.Starting, sandbox.Starting, user, sandbox.ReasonCreated, false, ""}, "Build started (1 credit)"},
		{"rebuild", eventFacts{sandbox.Starting, sandbox.Starting, user, sandbox.ReasonCreated, true, ""}, "Rebuilt from your saved files (1 credit)"},
		{"first build through the API", eventFacts{sandbox.Starting, sandbox.Starting, user, sandbox.ReasonCreated, false, "ci"}, `Build started through the API (token "ci"), 1 credit`},
		{"rebuild through the API", eventFacts{sandbox.Starting, sandbox.Starting, user, sandbox.ReasonCreated, true, "ci"}, `Rebuilt through the API (token "ci"), 1 credit`},
		{"build ready", eventFacts{sandbox.Starting, sandbox.Running, build, sandbox.ReasonReady, false, ""}, "Preview ready"},
		{"rebuild ready", eventFacts{sandbox.Starting, sandbox.Running, build, sandbox.ReasonReady, true, ""}, "Preview ready"},
		{"idle pause", eventFacts{sandbox.Running, sandbox.Paused, scheduler, sandbox.ReasonIdle, false, ""}, "Paused after 3 min without activity"},
		{"pause after the build", eventFacts{sandbox.Running, sandbox.Paused, scheduler, sandbox.ReasonAfterBuild, false, ""}, "Paused as soon as it was ready, to save resources"},
		{"operator's pause", eventFacts{sandbox.Running, sandbox.Paused, sandbox.SourceOperator, sandbox.ReasonRequested, false, ""}, "Paused by an operator"},
		{"operator's kill", eventFacts{sandbox.Paused, sandbox.Terminated, sandbox.SourceOperator, sandbox.ReasonRequested, false, ""}, "Stopped by an operator"},
		{"founder's pause", eventFacts{sandbox.Running, sandbox.Paused, user, sandbox.ReasonRequested, false, ""}, "Paused by you"},
		{"provider's pause (webhook)", eventFacts{sandbox.Running, sandbox.Paused, webhook, sandbox.ReasonProviderPaused, false, ""}, "Paused by the provider"},
		{"provider's pause (events API)", eventFacts{sandbox.Running, sandbox.Paused, eventsAPI, sandbox.ReasonProviderPaused, false, ""}, "Paused by the provider"},
		{"found paused", eventFacts{sandbox.Running, sandbox.Paused, reconciler, sandbox.ReasonSynced, false, ""}, "Paused by the provider"},
		{"resume clicked", eventFacts{sandbox.Paused, sandbox.Resuming, user, sandbox.ReasonResume, false, ""}, "Resume started by you"},
		{"resume clicked on a connection issue", eventFacts{sandbox.Unknown, sandbox.Resuming, user, sandbox.ReasonResume, false, ""}, "Resume started by you"},
		{"resumed", eventFacts{sandbox.Resuming, sandbox.Running, user, sandbox.ReasonResumed, false, ""}, "Resumed by you"},
		{"resumed by the provider", eventFacts{sandbox.Paused, sandbox.Running, webhook, sandbox.ReasonProviderResumed, false, ""}, "Resumed by the provider"},
		{"found running", eventFacts{sandbox.Paused, sandbox.Running, reconciler, sandbox.ReasonSynced, false, ""}, "Resumed by the provider"},
		{"resume failed, gone", eventFacts{sandbox.Resuming, sandbox.ResumeFailed, user, sandbox.ReasonResumeNotFound, false, ""}, "Resume failed: the provider no longer has this sandbox"},
		{"resume failed, unreachable", eventFacts{sandbox.Resuming, sandbox.ResumeFailed, user, sandbox.ReasonResumeUnreachable, false, ""}, "Resume failed: the sandbox couldn't be reached"},
		{"resume stuck", eventFacts{sandbox.Resuming, sandbox.ResumeFailed, scheduler, sandbox.ReasonResumeTimedOut, false, ""}, "Resume failed: it took too long"},
		{"resume failed, older row", eventFacts{sandbox.Resuming, sandbox.ResumeFailed, user, sandbox.ReasonOther, false, ""}, "Resume failed"},
		{"killed in the provider's dashboard", eventFacts{sandbox.Running, sandbox.Killed, webhook, sandbox.ReasonProviderRequest, false, ""}, "Stopped by the provider"},
		{"killed, read from the events API", eventFacts{sandbox.Paused, sandbox.Killed, eventsAPI, sandbox.ReasonProviderOther, false, ""}, "Stopped by the provider"},
		{"resume failed, files lost", eventFacts{sandbox.Resuming, sandbox.ResumeFailed, user, sandbox.ReasonResumeFilesLost, false, ""}, "Resume failed: the provider lost its files and they couldn't be restored"},
		{"found gone, its kill reason read from the events", eventFacts{sandbox.Running, sandbox.Killed, reconciler, sandbox.ReasonProviderRequest, false, ""}, "Found gone when checked with the provider"},
		{"found missing (an older row)", eventFacts{sandbox.Running, sandbox.Killed, reconciler, sandbox.ReasonOther, false, ""}, "Found gone when checked with the provider"},
		{"lost by the provider", eventFacts{sandbox.Running, sandbox.Killed, reconciler, sandbox.ReasonLost, false, ""}, "The provider lost this preview"},
		{"lost by the provider, found by a pause", eventFacts{sandbox.Paused, sandbox.Killed, scheduler, sandbox.ReasonLost, false, ""}, "The provider lost this preview"},
		{"expired (webhook)", eventFacts{sandbox.Running, sandbox.Expired, webhook, sandbox.ReasonProviderTimeout, false, ""}, "Expired: its time ran out"},
		{"expired (found missing)", eventFacts{sandbox.Running, sandbox.Expired, reconciler, sandbox.ReasonMissingPastEnd, false, ""}, "Expired: its time ran out"},
		{"replaced", eventFacts{sandbox.Paused, sandbox.Terminated, user, sandbox.ReasonReplaced, false, ""}, "Replaced by a rebuild"},
		{"build failed", eventFacts{sandbox.Starting, sandbox.Terminated, build, sandbox.ReasonBuildFailed, false, ""}, "Build failed"},
		{"build failed and refunded", eventFacts{sandbox.Starting, sandbox.Terminated, build, sandbox.ReasonBuildFailedRefunded, false, ""}, "Build failed because of the sandbox provider (credit refunded)"},
		{"stopped by our kill", eventFacts{sandbox.Running, sandbox.Terminated, webhook, sandbox.ReasonProviderRequest, false, ""}, "Stopped by Sandman"},
		{"connection issue", eventFacts{sandbox.Running, sandbox.Unknown, reconciler, sandbox.ReasonCannotVerify, false, ""}, "Connection issue with the provider"},
		{"back in touch, running", eventFacts{sandbox.Unknown, sandbox.Running, reconciler, sandbox.ReasonSynced, false, ""}, "Back in touch with the provider"},
		{"back in touch, paused", eventFacts{sandbox.Unknown, sandbox.Paused, reconciler, sandbox.ReasonSynced, false, ""}, "Back in touch with the provider"},
		{"woken from the share link", eventFacts{sandbox.Paused, sandbox.Resuming, visitor, sandbox.ReasonVisitorWake, false, ""}, "Wake-up started by a visitor of your share link"},
		{"woken from the share link after a connection issue", eventFacts{sandbox.Unknown, sandbox.Resuming, visitor, sandbox.ReasonVisitorWake, false, ""}, "Wake-up started by a visitor of your share link"},
		{"woken by a visitor", eventFacts{sandbox.Resuming, sandbox.Running, visitor, sandbox.ReasonResumed, false, ""}, "Woken by a visitor of your share link"},
		{"visitor's wake failed", eventFacts{sandbox.Resuming, sandbox.ResumeFailed, visitor, sandbox.ReasonResumeUnreachable, false, ""}, "Resume failed: the sandbox couldn't be reached"},
		{"a visitor found it killed", eventFacts{sandbox.Killed, sandbox.Killed, visitor, sandbox.ReasonVisitorFoundGone, false, ""}, "A visitor found it gone"},
		{"a visitor found it expired", eventFacts{sandbox.Expired, sandbox.Expired, visitor, sandbox.ReasonVisitorFoundGone, false, ""}, "A visitor found it gone"},
		{"a visitor found it lost on resume", eventFacts{sandbox.ResumeFailed, sandbox.ResumeFailed, visitor, sandbox.ReasonVisitorFoundGone, false, ""}, "A visitor found it gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.f.text(3 * time.Minute); got != tt.want {
				t.Fatalf("EventText(%+v) = %q, want %q", tt.f, got, tt.want)
			}
		})
	}
}

// A heal's sentence counts the files its event names, in whichever state it happened.
func TestRestoredSentence(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status sandbox.Status
		source sandbox.Source
		files  []string
		want   string
	}{
		{sandbox.Resuming, sandbox.SourceUser, []string{"index.html", "lib/a b.js", "data.json"}, "Restored 3 files the provider lost"},
		{sandbox.Resuming, sandbox.SourceUser, []string{"index.html"}, "Restored 1 file the provider lost"},
		{sandbox.Starting, sandbox.SourceBuild, []string{"a", "b"}, "Restored 2 files the provider lost"},
	} {
		ev := db.SandboxEvent{FromStatus: tt.status, ToStatus: tt.status, Source: tt.source, Reason: sandbox.ReasonRestored, Files: tt.files}
		if got := EventText(ev, sandbox.BuildInitial, 3*time.Minute); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.status, got, tt.want)
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
		if got := (eventFacts{sandbox.Running, sandbox.Paused, sandbox.SourceScheduler, sandbox.ReasonIdle, false, ""}).text(d); got != "Paused after "+want+" without activity" {
			t.Errorf("idle pause after %v reads %q", d, got)
		}
	}
}

// Every build failure reads as the sentence the build page has always shown, written from its
// code and facts; one recorded before the codes reads as its stored sentence.
func TestEveryBuildFailureReadsAsItsSentence(t *testing.T) {
	t.Parallel()
	const out = "npm ERR! missing script"
	tests := []struct {
		f    sandbox.Failure
		want string
	}{
		{sandbox.Failure{}, ""},
		{sandbox.Failure{Code: sandbox.FailInstallFailed, Command: "npm ci", ExitCode: 1, Output: out},
			"The install command \"npm ci\" failed with exit code 1. Its last output:\n" + out},
		{sandbox.Failure{Code: sandbox.FailInstallTimedOut, Command: "npm ci", Limit: 5 * time.Minute, Output: out},
			"The install command \"npm ci\" did not finish within 5m0s. Its last output:\n" + out},
		{sandbox.Failure{Code: sandbox.FailStartExited, Command: "node server.js", ExitCode: 0, Port: 3000},
			"The start command \"node server.js\" exited with code 0 before it answered on port 3000. Its last output:\n(nothing)"},
		{sandbox.Failure{Code: sandbox.FailStartNotAnswering, Command: "node server.js", Port: 8080, Limit: 20 * time.Second, Output: out},
			"The start command \"node server.js\" did not answer on port 8080 within 20s; check that the server listens on 0.0.0.0:8080. Its last output:\n" + out},
		{sandbox.Failure{Code: sandbox.FailProvider}, "Build failed because of the sandbox provider. Your credit was refunded."},
		{sandbox.Failure{Code: sandbox.FailWorkerLost},
			"The build stopped before it finished (the worker running it went away). Your credit was refunded. Rebuild to try again."},
		{sandbox.Failure{Code: sandbox.FailOperatorStopped},
			"An operator stopped this build before it finished. Your credit was refunded. Rebuild to try again."},
		{sandbox.Failure{Code: sandbox.FailReplaced}, "Replaced by a rebuild before it finished."},
		{sandbox.Failure{Code: sandbox.FailOther, Output: "The install command \"yarn\" failed with exit code 2."},
			"The install command \"yarn\" failed with exit code 2."},
	}
	for _, tt := range tests {
		if got := FailureText(tt.f); got != tt.want {
			t.Errorf("%q: %q, want %q", tt.f.Code, got, tt.want)
		}
		// The columns a failure is stored in give it back whole.
		code, exit, port, limit := db.FailureColumns(tt.f)
		b := db.Build{FailureCode: code, FailureCommand: tt.f.Command, FailureExitCode: exit, FailurePort: port, FailureLimitMs: limit, FailureDetail: tt.f.Output}
		if got := BuildError(b); got != tt.want {
			t.Errorf("%q stored and read back: %q, want %q", tt.f.Code, got, tt.want)
		}
	}
}

// A version's failure to start is told from its event's facts, and an event recorded before the
// codes by the sentence it stored.
func TestAVersionsFailureReadsFromItsFacts(t *testing.T) {
	t.Parallel()
	n := int32(8)
	f := sandbox.Failure{Code: sandbox.FailStartExited, Command: "node server.js", ExitCode: 1, Port: 3000, Output: "boom"}
	ev := db.SandboxEvent{FromStatus: sandbox.Running, ToStatus: sandbox.Running, Reason: sandbox.ReasonVersionFailed, VersionNumber: &n,
		Output: f.Output, FailureCommand: f.Command}
	ev.FailureCode, ev.FailureExitCode, ev.FailurePort, ev.FailureLimitMs = db.FailureColumns(f)
	want := "Version 8 didn't start: The start command \"node server.js\" exited with code 1 before it answered on port 3000. Its last output:\nboom"
	if got := EventText(ev, sandbox.BuildInitial, time.Minute); got != want {
		t.Errorf("%q, want %q", got, want)
	}
	ev.Reason = sandbox.ReasonWokeNotStarting
	if got, want := EventText(ev, sandbox.BuildInitial, time.Minute), "Woke with version 8, which doesn't start: The start command"; !strings.HasPrefix(got, want) {
		t.Errorf("%q, want it to start %q", got, want)
	}
	old := db.SandboxEvent{ToStatus: sandbox.Running, Reason: sandbox.ReasonVersionFailed, VersionNumber: &n,
		FailureCode: new(sandbox.FailOther), Output: "The start command \"x\" exited with code 1."}
	if got, want := EventText(old, sandbox.BuildInitial, time.Minute), "Version 8 didn't start: The start command \"x\" exited with code 1."; got != want {
		t.Errorf("an older event: %q, want %q", got, want)
	}
}

// An app's exit names its exit code, from its event's column or, recorded before it, its detail.
func TestAnAppsExitNamesItsExitCode(t *testing.T) {
	t.Parallel()
	n, code := int32(1), int32(3)
	ev := db.SandboxEvent{ToStatus: sandbox.Running, Reason: sandbox.ReasonAppExited, VersionNumber: &n, Output: "boom", FailureExitCode: &code}
	if got, want := EventText(ev, sandbox.BuildInitial, time.Minute), "Version 1 stopped (exit code 3): boom"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	ev.FailureExitCode, ev.Detail = nil, "exit code 1"
	if got, want := EventText(ev, sandbox.BuildInitial, time.Minute), "Version 1 stopped (exit code 1): boom"; got != want {
		t.Errorf("an older event: %q, want %q", got, want)
	}
	ev.Detail = ""
	if got, want := EventText(ev, sandbox.BuildInitial, time.Minute), "Version 1 stopped: boom"; got != want {
		t.Errorf("no exit code: %q, want %q", got, want)
	}
}

// A change of variables reads as their names, set then removed, never their values.
func TestAnEnvironmentChangeNamesItsVariables(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		set, removed []string
		want         string
	}{
		{[]string{"OPENAI_API_KEY"}, []string{"DEBUG"}, "Environment changed: OPENAI_API_KEY set, DEBUG removed"},
		{[]string{"A", "B"}, nil, "Environment changed: A, B set"},
		{nil, []string{"DEBUG"}, "Environment changed: DEBUG removed"},
	} {
		ev := db.SandboxEvent{Reason: sandbox.ReasonEnvChanged, EnvSet: tt.set, EnvRemoved: tt.removed}
		if got := EventText(ev, sandbox.BuildInitial, time.Minute); got != tt.want {
			t.Errorf("%v %v: %q, want %q", tt.set, tt.removed, got, tt.want)
		}
	}
}
