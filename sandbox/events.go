package sandbox

// Reason is why a sandbox's state changed, or what its history tells (the event_reason enum):
// stored with each event, read by rules, and told to the founder by views in a sentence.
type Reason string

// The reasons.
const (
	ReasonCreated             Reason = "created"               // a build or rebuild made the sandbox
	ReasonReady               Reason = "ready"                 // the build's dev server answered
	ReasonBuildFailed         Reason = "build_failed"          // the founder's code failed the build (the credit stays spent)
	ReasonBuildFailedRefunded Reason = "build_failed_refunded" // the platform failed the build (the credit was given back)
	ReasonReplaced            Reason = "replaced"              // a rebuild ended the sandbox
	ReasonIdle                Reason = "idle"                  // paused after the idle timeout
	ReasonAfterBuild          Reason = "after_build"           // paused as soon as the build was ready (SANDMAN_PAUSE_AFTER_READY)
	ReasonRequested           Reason = "requested"             // a person asked (the founder, or an operator: see the source)
	ReasonResume              Reason = "resume"                // a resume started
	ReasonResumed             Reason = "resumed"               // a resume reached running
	ReasonResumeNotFound      Reason = "resume_not_found"      // a resume failed: the provider no longer has the sandbox
	ReasonResumeUnreachable   Reason = "resume_unreachable"    // a resume failed: the sandbox could not be reached
	ReasonResumeTimedOut      Reason = "resume_timed_out"      // a resume never ended (the sweep)
	ReasonResumeFilesLost     Reason = "resume_files_lost"     // a resume failed: files lost and not restored
	ReasonRestored            Reason = "restored"              // the integrity check restored files (the event names them)
	ReasonSynced              Reason = "synced"                // a check corrected the row to the provider's state
	ReasonCannotVerify        Reason = "cannot_verify"         // the provider cannot be asked (detail: the error)
	ReasonProviderPaused      Reason = "provider_paused"       // the provider reported a pause
	ReasonProviderResumed     Reason = "provider_resumed"      // the provider reported a resume
	ReasonProviderTimeout     Reason = "provider_timeout"      // the provider killed it at its timeout
	ReasonProviderRequest     Reason = "provider_request"      // the provider killed it on a request
	ReasonProviderOther       Reason = "provider_other"        // the provider killed it for another reason (detail: its kill_reason)
	ReasonMissingPastEnd      Reason = "missing_past_end"      // found missing after its end time
	ReasonMissingAfterKill    Reason = "missing_after_kill"    // found missing after Sandman's own kill
	ReasonLost                Reason = "lost"                  // found missing with no event within the catch-up window
	ReasonVisitorWake         Reason = "visitor_wake"          // a visitor of the share link woke it
	ReasonVisitorFoundGone    Reason = "visitor_found_gone"    // a visitor of the share link found it gone (a note)
	ReasonVersionLive         Reason = "version_live"          // a version was applied to a running preview and its dev server answered
	ReasonVersionFailed       Reason = "version_failed"        // a version's dev server did not start on it (detail: its output)
	ReasonWokeWithVersion     Reason = "woke_with_version"     // a resume applied the version made while the preview slept
	ReasonOther               Reason = "other"                 // a row written before these codes, its text in detail
	ReasonAppExited           Reason = "app_exited"            // a running preview's dev server ended (failure_exit_code: its exit code; output: its last lines)
	ReasonWokeNotStarting     Reason = "woke_not_starting"     // a wake that worked, with a version whose dev server does not start
	ReasonEnvChanged          Reason = "env_changed"           // the project's variables changed (env_set, env_removed: names only)
	ReasonEnvApplied          Reason = "env_applied"           // a change of variables was applied to a running preview and its dev server answered
)

// Source is who or what changed a sandbox's state (the event_source enum).
type Source string

// The sources.
const (
	SourceUser       Source = "user"
	SourceWebhook    Source = "webhook"
	SourceReconciler Source = "reconciler"
	SourceScheduler  Source = "scheduler"
	SourceBuild      Source = "build"
	SourceEventsAPI  Source = "events_api"
	SourceVisitor    Source = "visitor"
	SourceOperator   Source = "operator"
	SourceWatch      Source = "watch"
)
