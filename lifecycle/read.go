package lifecycle

import (
	"context"

	"github.com/google/uuid"

	"sandman/db"
)

// Credits returns the founder's current credits.
func (s *Service) Credits(ctx context.Context, owner uuid.UUID) (int32, error) {
	u, err := s.q.GetUserByID(ctx, owner)
	return u.Credits, db.MapError(err)
}

// IdleTimeout is how long a sandbox may go without activity before it is paused.
func (s *Service) IdleTimeout() int64 { return s.cfg.IdleTimeout.Milliseconds() }

// IdleTimeoutText is the idle timeout as pages write it ("3 min").
func (s *Service) IdleTimeoutText() string { return DurationText(s.cfg.IdleTimeout) }

// SandboxTimeout is the lifetime each create or connect gives a sandbox.
func (s *Service) SandboxTimeout() int64 { return s.cfg.SandboxTimeout.Milliseconds() }
