package lifecycle

import (
	"context"
	"sandman/overview"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/sandbox"
)

// wakeable reports whether a visitor's wake resumes the sandbox: it sleeps, a resume failed
// for a reason that may pass, or the provider could not be reached (a resume asks it again).
func wakeable(sb db.Sandbox) bool {
	switch sb.Status {
	case sandbox.Paused, sandbox.Unknown:
		return true
	case sandbox.ResumeFailed:
		return !(sb.FailureCause != nil && sb.FailureCause.OnlyRebuildFixes())
	}
	return false
}

// Visit is a visitor opening the share link's page (a plain GET, which a link unfurler or a
// crawler sends too): it wakes nothing. It asks the provider for the truth of a stale row in the
// background, as the founder's pages do, and tells the founder when a visitor found the preview
// gone (once per sandbox).
func (s *Service) Visit(ctx context.Context, projectID uuid.UUID) (overview.SharedPreview, error) {
	sp, err := s.overview.SharedPreview(ctx, projectID)
	if err != nil || sp.Sandbox == nil {
		return sp, err
	}
	s.VerifyStale(ctx, overview.ProjectView{Sandbox: sp.Sandbox})
	if sp.State == sandbox.VisitorGone {
		return s.noteFoundGone(ctx, sp)
	}
	return sp, nil
}

// VisitorWake wakes the project's preview for a visitor of its share link: a resume like the
// founder's (startResume, the same job), recorded with the source "visitor", which costs no
// credit. The decision is made under the sandbox's row lock, so of any number of visitors at once
// one resumes it and the others find it resuming; a preview that does not sleep is left as it
// is. woke reports whether this call started the resume.
func (s *Service) VisitorWake(ctx context.Context, projectID uuid.UUID) (sp overview.SharedPreview, woke bool, err error) {
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetCurrentSandboxByProjectForUpdate(ctx, projectID)
		if db.IsNotFound(err) {
			return nil // never built: nothing to wake
		}
		if err != nil || !wakeable(sb) {
			return err
		}
		_, err = s.startResume(ctx, tx, sb, ResumeArgs{SandboxID: sb.ID, Visitor: true})
		woke = err == nil
		return err
	})
	if err != nil {
		return overview.SharedPreview{}, false, err
	}
	if woke {
		s.metrics.visitorWakes.Inc()
	}
	if sp, err = s.overview.SharedPreview(ctx, projectID); err != nil || sp.State != sandbox.VisitorGone || sp.Sandbox == nil {
		return sp, woke, err
	}
	sp, err = s.noteFoundGone(ctx, sp)
	return sp, woke, err
}

// VisitorActivity records that a visitor is looking at the project's preview: it moves the idle
// deadline as the founder's own activity does (Activity), so a preview someone watches is not
// paused under them.
func (s *Service) VisitorActivity(ctx context.Context, projectID uuid.UUID) error {
	sb, err := s.q.GetCurrentSandboxByProject(ctx, projectID)
	if db.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.Activity(ctx, sb.OwnerID, sb.ID)
}

// noteFoundGone records, once per sandbox, that a visitor found the preview gone: a note in the
// history ("A visitor found it gone"), not a change of state, announced like one so the founder's
// pages show it. It returns the preview with the note's event as its version.
func (s *Service) noteFoundGone(ctx context.Context, sp overview.SharedPreview) (overview.SharedPreview, error) {
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, sp.Sandbox.ID)
		if err != nil {
			return db.MapError(err)
		}
		if sb.Status != sp.Sandbox.Status {
			return nil // it moved on since it was read; the next visit tells
		}
		noted, err := tx.HasVisitorNote(ctx, db.HasVisitorNoteParams{SandboxID: sb.ID, Reason: reasonVisitorFoundGone})
		if err != nil || noted {
			return err
		}
		if err := announce(ctx, tx, sb, sandbox.SourceVisitor, reasonVisitorFoundGone, ""); err != nil {
			return err
		}
		last, err := tx.GetLatestSandboxEvent(ctx, sb.ID)
		sp.EventID = last.ID
		return err
	})
	return sp, err
}
