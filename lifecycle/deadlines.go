package lifecycle

import (
	"time"

	"sandman/db"
	"sandman/overview"
	"sandman/sandbox"
)

// Every deadline the lifecycle keeps is computed here, once, from the configuration, so a
// worker, the sweep that stands behind it and the page that shows it can never disagree
// (docs/states.md, "Deadlines").

// IdleDeadline is when a running sandbox is paused if nobody looks at it meanwhile. The idle
// queue's queries (queries/idle.sql) compute the same from the same two values.
func (c Config) IdleDeadline(sb db.Sandbox) time.Time { return sb.LastActiveAt.Add(c.IdleTimeout) }

// activityEvery is how often a visitor's page of a share link reports activity while visible:
// once a minute, as the build page does, or a third of the idle timeout when that is shorter,
// so a preview someone watches is never paused under them.
func (c Config) activityEvery() time.Duration { return min(time.Minute, c.IdleTimeout/3) }

// pauseJobTimeout is the longest a pause job may run; an idle pause asked for longer ago than
// this, on a sandbox still running, is claimed again (its worker went away).
const pauseJobTimeout = 2 * time.Minute

// pauseInFlight reports whether Sandman asked the provider to pause sb so recently (within a
// pause job's timeout) that the job is still to record the pause, with its cause: the provider's
// report of the same pause is then not a change of its own.
func pauseInFlight(sb db.Sandbox, now time.Time) bool {
	return sb.PauseRequestedAt != nil && now.Sub(*sb.PauseRequestedAt) < pauseJobTimeout
}

// lookTimeout bounds Sandman's look at the app's files before a pause (docs/states.md,
// "Integrity"): it must never hold up the pause for long.
const lookTimeout = 10 * time.Second

// lostAfter is when a sandbox first found missing at since, with no event saying why, is
// declared lost by the provider: once the events reader has had its catch-up window (its
// interval and the margin it re-reads) to bring a killed event that names the reason.
func (c Config) lostAfter(since time.Time) time.Time {
	return since.Add(max(c.EventsEvery, 0) + eventsMargin)
}

// verifyDue reports whether a page opened at now should queue a verification of sb: only
// states the provider can contradict, last verified longer than VerifyStaleness ago.
func (c Config) verifyDue(sb db.Sandbox, now time.Time) bool {
	switch sb.Status {
	case sandbox.Running, sandbox.Paused, sandbox.Unknown:
	default:
		return false
	}
	return sb.LastVerifiedAt == nil || now.Sub(*sb.LastVerifiedAt) >= c.VerifyStaleness
}

// lifetimeEnd is when a sandbox given its lifetime (SandboxTimeout) at now ends: our estimate
// of the provider's end time when its answer carries none.
func (c Config) lifetimeEnd(now time.Time) time.Time { return now.Add(c.SandboxTimeout) }

// pastExpiry reports whether the sandbox's lifetime had ended at now.
func pastExpiry(sb db.Sandbox, now time.Time) bool {
	end := overview.ExpiresAt(sb)
	return end != nil && !now.Before(*end)
}

// buildJobTimeout is the longest a build job may run: each step's deadline, and a minute for
// the bookkeeping between them.
func (c Config) buildJobTimeout() time.Duration {
	return c.CreateTimeout + c.UploadTimeout + c.InstallTimeout + c.ReadyTimeout + time.Minute
}

// resumeJobTimeout is the longest a resume job may run: two attempts, the wait between them,
// and the bookkeeping.
func (c Config) resumeJobTimeout() time.Duration {
	return 2*c.ResumeTimeout + c.ResumeRetryWait + 30*time.Second
}

// stuckMargin is how much longer than its job's timeout a sandbox may stay in starting or
// resuming before the sweep (and River's rescuer) decide its worker went away.
const stuckMargin = time.Minute

// buildStuckAfter is how long a sandbox may be starting before its build counts as lost.
func (c Config) buildStuckAfter() time.Duration { return c.buildJobTimeout() + stuckMargin }

// resumeStuckAfter is how long a sandbox may be resuming before its resume counts as lost.
func (c Config) resumeStuckAfter() time.Duration { return c.resumeJobTimeout() + stuckMargin }
