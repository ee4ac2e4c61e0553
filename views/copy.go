package views

import (
	"fmt"
	"strings"
	"time"

	"sandman/db"
	"sandman/sandbox"
)

// The sentences a founder reads about a preview's life, written from the facts lifecycle
// records (codes, counts, times, output): a history's events, a failed resume's cause, a failed
// build's line (docs/states.md, "History", has the list).

// EventText is the one sentence a founder reads for an event: what happened and who or what
// caused it. kind is the build kind of the event's sandbox (a rebuild's creation reads
// differently), idle the configured idle timeout, which an idle pause names.
func EventText(ev db.SandboxEvent, kind sandbox.BuildKind, idle time.Duration) string {
	switch ev.Reason {
	case sandbox.ReasonRestored:
		return restoredText(len(ev.Files)) // it counts the files the event names
	case sandbox.ReasonVersionLive, sandbox.ReasonVersionFailed, sandbox.ReasonWokeWithVersion, sandbox.ReasonAppExited,
		sandbox.ReasonWokeNotStarting:
		return versionText(ev)
	case sandbox.ReasonEnvChanged:
		return EnvChangedText(ev.EnvSet, ev.EnvRemoved)
	case sandbox.ReasonEnvApplied:
		took := 0.0
		if ev.DurationMs != nil {
			took = float64(*ev.DurationMs) / 1000
		}
		return fmt.Sprintf("The new environment is live (%.1f s)", took)
	}
	return moveText(ev, kind == sandbox.BuildRebuild, idle)
}

// throughAPI says that the founder acted through an API token, by its name.
func throughAPI(token string) string { return fmt.Sprintf("through the API (token %q)", token) }

// fromProvider reports whether the provider itself told us (a webhook or its events API).
func fromProvider(s sandbox.Source) bool {
	return s == sandbox.SourceWebhook || s == sandbox.SourceEventsAPI
}

// moveText is an event's sentence from its move, its source and its reason.
func moveText(ev db.SandboxEvent, rebuild bool, idle time.Duration) string {
	from, to, source, reason := ev.FromStatus, ev.ToStatus, ev.Source, ev.Reason
	via := "" // the API token's name the founder came through, "" for their browser
	if ev.ViaToken != nil {
		via = *ev.ViaToken
	}
	if source == sandbox.SourceVisitor && from == to && reason == sandbox.ReasonVisitorFoundGone {
		return "A visitor found it gone"
	}
	switch to {
	case sandbox.Starting:
		if from == sandbox.Starting && reason == sandbox.ReasonCreated {
			switch {
			case rebuild && via != "":
				return "Rebuilt " + throughAPI(via) + ", 1 credit"
			case rebuild:
				return "Rebuilt from your saved files (1 credit)"
			case via != "":
				return "Build started " + throughAPI(via) + ", 1 credit"
			}
			return "Build started (1 credit)"
		}
	case sandbox.Running:
		switch {
		case source == sandbox.SourceBuild:
			return "Preview ready"
		case from == sandbox.Unknown && source == sandbox.SourceReconciler:
			return "Back in touch with the provider"
		case source == sandbox.SourceUser:
			return "Resumed by you"
		case source == sandbox.SourceVisitor:
			return "Woken by a visitor of your share link"
		default:
			return "Resumed by the provider"
		}
	case sandbox.Paused:
		switch {
		case from == sandbox.Unknown && source == sandbox.SourceReconciler:
			return "Back in touch with the provider"
		case source == sandbox.SourceScheduler && reason == sandbox.ReasonIdle:
			return "Paused after " + DurationText(idle) + " without activity"
		case source == sandbox.SourceScheduler && reason == sandbox.ReasonAfterBuild:
			return "Paused as soon as it was ready, to save resources"
		case source == sandbox.SourceOperator:
			return "Paused by an operator"
		case source == sandbox.SourceUser:
			return "Paused by you"
		default:
			return "Paused by the provider"
		}
	case sandbox.Resuming:
		switch source {
		case sandbox.SourceUser:
			return "Resume started by you"
		case sandbox.SourceVisitor:
			return "Wake-up started by a visitor of your share link"
		}
	case sandbox.ResumeFailed:
		switch reason {
		case sandbox.ReasonResumeNotFound:
			return "Resume failed: the provider no longer has this sandbox"
		case sandbox.ReasonResumeUnreachable:
			return "Resume failed: the sandbox couldn't be reached"
		case sandbox.ReasonResumeTimedOut:
			return "Resume failed: it took too long"
		case sandbox.ReasonResumeFilesLost:
			return "Resume failed: the provider lost its files and they couldn't be restored"
		}
		return "Resume failed"
	case sandbox.Killed:
		if reason == sandbox.ReasonLost {
			return "The provider lost this preview"
		}
		if fromProvider(source) {
			return "Stopped by the provider"
		}
		return "Found gone when checked with the provider"
	case sandbox.Expired:
		return "Expired: its time ran out"
	case sandbox.Terminated:
		if source == sandbox.SourceOperator {
			return "Stopped by an operator"
		}
		switch reason {
		case sandbox.ReasonReplaced:
			return "Replaced by a rebuild"
		case sandbox.ReasonBuildFailed:
			return "Build failed"
		case sandbox.ReasonBuildFailedRefunded:
			return "Build failed because of the sandbox provider (credit refunded)"
		}
		return "Stopped by Sandman"
	case sandbox.Unknown:
		return "Connection issue with the provider"
	}
	return fallbackText[to]
}

// restoredText is the sentence of an integrity check that restored n files, whatever the state
// it happened in; the page names the files under it.
func restoredText(n int) string {
	if n == 1 {
		return "Restored 1 file the provider lost"
	}
	return fmt.Sprintf("Restored %d files the provider lost", n)
}

// fallbackText names the state reached when no rule above knows the move.
var fallbackText = map[sandbox.Status]string{
	sandbox.Starting: "Preparing the sandbox",
	sandbox.Resuming: "Resuming",
}

// DurationText writes a configured duration as the pages show it: "3 min", "1 h", "45 s",
// "1 min 30 s".
func DurationText(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d >= time.Minute && d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	case d < time.Minute:
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%d min %d s", d/time.Minute, d%time.Minute/time.Second)
}

// versionText is a version's history sentence: "Version 8 is live (3 files changed, 0.4 s)",
// "Version 8 didn't start: {why}", "Woke with version 8 (3 files changed since it slept)",
// "Woke with version 8, which doesn't start: {why}", "Version 8 stopped (exit code 1): {its
// last lines}".
func versionText(ev db.SandboxEvent) string {
	n := 0
	if ev.VersionNumber != nil {
		n = int(*ev.VersionNumber)
	}
	switch ev.Reason {
	case sandbox.ReasonVersionFailed:
		return fmt.Sprintf("Version %d didn't start: %s", n, failureOutput(ev))
	case sandbox.ReasonWokeWithVersion:
		return fmt.Sprintf("Woke with version %d (%s changed since it slept)", n, fileCount(len(ev.Files)))
	case sandbox.ReasonWokeNotStarting:
		return fmt.Sprintf("Woke with version %d, which doesn't start: %s", n, failureOutput(ev))
	case sandbox.ReasonAppExited:
		if ev.FailureExitCode != nil {
			return fmt.Sprintf("Version %d stopped (exit code %d): %s", n, *ev.FailureExitCode, ev.Output)
		}
		if ev.Detail != "" { // recorded before its exit code had a column: "exit code 1"
			return fmt.Sprintf("Version %d stopped (%s): %s", n, ev.Detail, ev.Output)
		}
		return fmt.Sprintf("Version %d stopped: %s", n, ev.Output)
	}
	took := 0.0
	if ev.DurationMs != nil {
		took = float64(*ev.DurationMs) / 1000
	}
	return fmt.Sprintf("Version %d is live (%s changed, %.1f s)", n, fileCount(len(ev.Files)), took)
}

// failureOutput is what a version's failure to start says: its failure's sentence, or the
// output an event without one recorded.
func failureOutput(ev db.SandboxEvent) string {
	if f := ev.Failure(); f.Failed() {
		return FailureText(f)
	}
	return ev.Output
}

// CauseText is the sentence shown under "Resume failed" for a cause, "" for none. A cause
// recorded before the codes existed (other) keeps its old sentence, stored as its detail.
func CauseText(cause *sandbox.Cause, detail string) string {
	if cause == nil {
		return ""
	}
	switch *cause {
	case sandbox.CauseNotFound:
		return "This preview was cleaned up and can't be recovered. Rebuild it from your saved files."
	case sandbox.CauseFilesLost:
		return "The preview's files were lost by the provider and couldn't be restored. Rebuild it from your saved files."
	case sandbox.CauseOther:
		if detail != "" {
			return detail
		}
	}
	return "The sandbox couldn't be reached. It may be corrupted."
}

// ProviderFailureText is the build page's line for a build the platform failed (the provider's
// errors after retries, its circuit breaker open, the sandbox lost mid-build).
const ProviderFailureText = "Build failed because of the sandbox provider. Your credit was refunded."

// BuildError is a build's line on its page and its error in the API: why it failed, "" when it
// did not.
func BuildError(b db.Build) string { return FailureText(b.Failure()) }

// FailureText is a failed build's or version's sentence: which command did what and what it
// printed, or what ended the build; a failure recorded before the codes (other) reads as its
// stored sentence.
func FailureText(f sandbox.Failure) string {
	switch f.Code {
	case "":
		return ""
	case sandbox.FailInstallTimedOut:
		return fmt.Sprintf("The install command %q did not finish within %s. Its last output:\n%s", f.Command, f.Limit, f.Output)
	case sandbox.FailInstallFailed:
		return fmt.Sprintf("The install command %q failed with exit code %d. Its last output:\n%s", f.Command, f.ExitCode, f.Output)
	case sandbox.FailStartExited:
		return fmt.Sprintf("The start command %q exited with code %d before it answered on port %d. Its last output:\n%s",
			f.Command, f.ExitCode, f.Port, printed(f.Output))
	case sandbox.FailStartNotAnswering:
		return fmt.Sprintf("The start command %q did not answer on port %d within %s; check that the server listens on 0.0.0.0:%d. Its last output:\n%s",
			f.Command, f.Port, f.Limit, f.Port, printed(f.Output))
	case sandbox.FailProvider:
		return ProviderFailureText
	case sandbox.FailWorkerLost:
		return "The build stopped before it finished (the worker running it went away). Your credit was refunded. Rebuild to try again."
	case sandbox.FailOperatorStopped:
		return "An operator stopped this build before it finished. Your credit was refunded. Rebuild to try again."
	case sandbox.FailReplaced:
		return "Replaced by a rebuild before it finished."
	}
	return f.Output
}

// printed is a dev server's output as its failure tells it: "(nothing)" when it printed nothing.
func printed(out string) string {
	if out == "" {
		return "(nothing)"
	}
	return out
}

// EnvChangedText is the history's line for a change of a project's variables: their names,
// never their values.
func EnvChangedText(set, removed []string) string {
	var parts []string
	if len(set) > 0 {
		parts = append(parts, strings.Join(set, ", ")+" set")
	}
	if len(removed) > 0 {
		parts = append(parts, strings.Join(removed, ", ")+" removed")
	}
	return "Environment changed: " + strings.Join(parts, ", ")
}

// replaceLabel and replaceButton are a variable's replace form's words: a secret is replaced,
// never shown, so its field starts empty.
func replaceLabel(v EnvVar) string {
	if v.Secret {
		return "New value for " + v.Name
	}
	return "Value of " + v.Name
}

func replaceButton(v EnvVar) string {
	if v.Secret {
		return "Replace"
	}
	return "Save"
}

// EnvSetAgo is when a variable was set, as the section says it.
func EnvSetAgo(at, now time.Time) string { return agoText(at, now) }
