package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/sandbox"
)

// HistoryLength is how many of a project's changes its build page lists.
const HistoryLength = 20

// HistoryEntry is one recorded change of a project's preview as the founder reads it: when, and
// a sentence that names its cause (docs/states.md, "History").
type HistoryEntry struct {
	EventID int64
	At      time.Time
	Text    string
	// Files are the files the event names (the ones a heal restored), for the page to list
	// under the sentence.
	Files []string
}

// History returns the founder's project's newest changes up to the event upTo, newest first,
// across every sandbox the project has had (a rebuild starts a new one). upTo is the event the
// page's state follows from (ProjectView.EventID), so a history drawn with a state never runs
// ahead of it. Like every read, it only reads the database.
func (s *Service) History(ctx context.Context, owner, projectID uuid.UUID, upTo int64) ([]HistoryEntry, error) {
	rows, err := s.q.ListProjectHistory(ctx, db.ListProjectHistoryParams{ProjectID: projectID, OwnerID: owner, UpTo: upTo, MaxEvents: HistoryLength})
	if err != nil {
		return nil, err
	}
	out := make([]HistoryEntry, len(rows))
	for i, r := range rows {
		out[i] = s.entry(r.SandboxEvent, r.BuildKind)
	}
	return out, nil
}

func (s *Service) entry(ev db.SandboxEvent, kind sandbox.BuildKind) HistoryEntry {
	text := describe(factsOf(ev, kind), s.cfg.IdleTimeout)
	switch ev.Reason {
	case reasonRestored:
		text = restoredText(len(ev.Files)) // it counts the files the event names
	case reasonVersionLive, reasonVersionFailed, reasonWokeWithVersion, reasonAppExited, reasonWokeNotStarting:
		text = versionText(ev)
	}
	return HistoryEntry{EventID: ev.ID, At: ev.CreatedAt, Text: text, Files: ev.Files}
}

// Reasons the writers record and describe reads: codes (the enum event_reason), never the
// sentences, which are made from them here only (a pause's are its pauseCause).
const (
	reasonCreated     = sandbox.ReasonCreated     // createSandboxRow: a build or rebuild made the sandbox
	reasonBuildFailed = sandbox.ReasonBuildFailed // failBuild: the founder's code failed, the credit is spent
	// failBuild: the platform failed the build and its credit was given back.
	reasonBuildFailedRefunded = sandbox.ReasonBuildFailedRefunded
	reasonReplaced            = sandbox.ReasonReplaced // replaceCurrent: a rebuild ended this sandbox
	// A failed resume's reason names its cause; the sweep's names a resume that never ended.
	reasonResumeNotFound    = sandbox.ReasonResumeNotFound
	reasonResumeUnreachable = sandbox.ReasonResumeUnreachable
	reasonResumeTimedOut    = sandbox.ReasonResumeTimedOut
	reasonResumeFilesLost   = sandbox.ReasonResumeFilesLost
	// An integrity check restored files (the event names them); a sandbox the provider no
	// longer has, with no event saying why after the catch-up window, was lost by it.
	reasonRestored = sandbox.ReasonRestored
	reasonLost     = sandbox.ReasonLost
	// A visitor of the share link woke the preview (VisitorWake), or found it gone: a note, not
	// a move (from and to are its state then).
	reasonVisitorWake = sandbox.ReasonVisitorWake
	// A version was applied to a running preview (lifecycle/deploy.go) and its dev server
	// answered, or did not start on it; a resume applied the version made while it slept.
	reasonVersionLive      = sandbox.ReasonVersionLive
	reasonVersionFailed    = sandbox.ReasonVersionFailed
	reasonWokeWithVersion  = sandbox.ReasonWokeWithVersion
	reasonVisitorFoundGone = sandbox.ReasonVisitorFoundGone
	// The watch saw a running preview's dev server exit (detail: its exit code; output: its
	// last lines); a wake worked with a version whose dev server does not start (output: what
	// it printed).
	reasonAppExited       = sandbox.ReasonAppExited
	reasonWokeNotStarting = sandbox.ReasonWokeNotStarting
)

// eventFacts are what a sentence is chosen from: the move, who made it and why.
type eventFacts struct {
	from, to sandbox.Status
	source   sandbox.Source
	reason   sandbox.Reason
	rebuild  bool // the sandbox runs a rebuild (its creation cost a rebuild's credit)
	// viaToken names the API token the founder came through ("" for their browser).
	viaToken string
}

func factsOf(ev db.SandboxEvent, kind sandbox.BuildKind) eventFacts {
	f := eventFacts{from: ev.FromStatus, to: ev.ToStatus, source: ev.Source, reason: ev.Reason, rebuild: kind == sandbox.BuildRebuild}
	if ev.ViaToken != nil {
		f.viaToken = *ev.ViaToken
	}
	return f
}

// throughAPI says that the founder acted through an API token, by its name.
func throughAPI(token string) string { return fmt.Sprintf("through the API (token %q)", token) }

// fromProvider reports whether the provider itself told us (a webhook or its events API).
func (f eventFacts) fromProvider() bool {
	return f.source == sandbox.SourceWebhook || f.source == sandbox.SourceEventsAPI
}

// describe is the one sentence a founder reads for an event: what happened and who or what
// caused it. idle is the configured idle timeout, which an idle pause names.
func describe(f eventFacts, idle time.Duration) string {
	if f.source == sandbox.SourceVisitor && f.from == f.to && f.reason == reasonVisitorFoundGone {
		return "A visitor found it gone"
	}
	switch f.to {
	case sandbox.Starting:
		if f.from == sandbox.Starting && f.reason == reasonCreated {
			switch {
			case f.rebuild && f.viaToken != "":
				return "Rebuilt " + throughAPI(f.viaToken) + ", 1 credit"
			case f.rebuild:
				return "Rebuilt from your saved files (1 credit)"
			case f.viaToken != "":
				return "Build started " + throughAPI(f.viaToken) + ", 1 credit"
			}
			return "Build started (1 credit)"
		}
	case sandbox.Running:
		switch {
		case f.source == sandbox.SourceBuild:
			return "Preview ready"
		case f.from == sandbox.Unknown && f.source == sandbox.SourceReconciler:
			return "Back in touch with the provider"
		case f.source == sandbox.SourceUser:
			return "Resumed by you"
		case f.source == sandbox.SourceVisitor:
			return "Woken by a visitor of your share link"
		default:
			return "Resumed by the provider"
		}
	case sandbox.Paused:
		switch {
		case f.from == sandbox.Unknown && f.source == sandbox.SourceReconciler:
			return "Back in touch with the provider"
		case f.source == pauseIdle.source && f.reason == pauseIdle.reason:
			return "Paused after " + DurationText(idle) + " without activity"
		case f.source == pauseAfterBuild.source && f.reason == pauseAfterBuild.reason:
			return "Paused as soon as it was ready, to save resources"
		case f.source == pauseByOperator.source:
			return "Paused by an operator"
		case f.source == pauseRequested.source:
			return "Paused by you"
		default:
			return "Paused by the provider"
		}
	case sandbox.Resuming:
		switch f.source {
		case sandbox.SourceUser:
			return "Resume started by you"
		case sandbox.SourceVisitor:
			return "Wake-up started by a visitor of your share link"
		}
	case sandbox.ResumeFailed:
		switch f.reason {
		case reasonResumeNotFound:
			return "Resume failed: the provider no longer has this sandbox"
		case reasonResumeUnreachable:
			return "Resume failed: the sandbox couldn't be reached"
		case reasonResumeTimedOut:
			return "Resume failed: it took too long"
		case reasonResumeFilesLost:
			return "Resume failed: the provider lost its files and they couldn't be restored"
		}
		return "Resume failed"
	case sandbox.Killed:
		if f.reason == reasonLost {
			return "The provider lost this preview"
		}
		if f.fromProvider() {
			return "Stopped by the provider"
		}
		return "Found gone when checked with the provider"
	case sandbox.Expired:
		return "Expired: its time ran out"
	case sandbox.Terminated:
		if f.source == sandbox.SourceOperator {
			return "Stopped by an operator"
		}
		switch f.reason {
		case reasonReplaced:
			return "Replaced by a rebuild"
		case reasonBuildFailed:
			return "Build failed"
		case reasonBuildFailedRefunded:
			return "Build failed because of the sandbox provider (credit refunded)"
		}
		return "Stopped by Sandman"
	case sandbox.Unknown:
		return "Connection issue with the provider"
	}
	return fallbackText[f.to]
}

// restoredText is the sentence of an integrity check that restored n files (reasonRestored),
// whatever the state it happened in; the page names the files under it.
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
// "Version 8 didn't start: {what it printed}", "Woke with version 8 (3 files changed since it
// slept)", "Woke with version 8, which doesn't start: {what it printed}", "Version 8 stopped
// (exit code 1): {its last lines}".
func versionText(ev db.SandboxEvent) string {
	n := 0
	if ev.VersionNumber != nil {
		n = int(*ev.VersionNumber)
	}
	switch ev.Reason {
	case reasonVersionFailed:
		return fmt.Sprintf("Version %d didn't start: %s", n, ev.Output)
	case reasonWokeWithVersion:
		return fmt.Sprintf("Woke with version %d (%s changed since it slept)", n, filesText(len(ev.Files)))
	case reasonWokeNotStarting:
		return fmt.Sprintf("Woke with version %d, which doesn't start: %s", n, ev.Output)
	case reasonAppExited:
		if ev.Detail != "" {
			return fmt.Sprintf("Version %d stopped (%s): %s", n, ev.Detail, ev.Output)
		}
		return fmt.Sprintf("Version %d stopped: %s", n, ev.Output)
	}
	took := 0.0
	if ev.DurationMs != nil {
		took = float64(*ev.DurationMs) / 1000
	}
	return fmt.Sprintf("Version %d is live (%s changed, %.1f s)", n, filesText(len(ev.Files)), took)
}

func filesText(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}
