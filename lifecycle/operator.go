package lifecycle

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"sandman/apperr"
	"sandman/db"
	"sandman/sandbox"
)

// Operator is who acts on the console: an operator's account, recorded with each action.
type Operator struct {
	ID    uuid.UUID
	Email string
}

// operatorStopped is a build an operator's kill ended before it finished: not the founder's
// doing, so its credit is given back.
var operatorStopped = &buildFailure{fact: sandbox.Failure{Code: sandbox.FailOperatorStopped}, refund: true,
	cause: "stopped by an operator"}

// Operate is an operator's action on any founder's sandbox (operatorPause, operatorKill),
// logged with who asked for it.
func (s *Service) Operate(ctx context.Context, by Operator, action db.OperatorAction, sandboxID uuid.UUID) error {
	switch action {
	case db.OperatorActionPause:
		return s.operatorPause(ctx, by, sandboxID)
	case db.OperatorActionKill:
		return s.operatorKill(ctx, by, sandboxID)
	}
	return fmt.Errorf("operator action %q: no such action", action)
}

// operatorPause pauses any founder's running sandbox in the background, as the founder's Pause
// does; the history says "Paused by an operator". The request is logged with who made it.
func (s *Service) operatorPause(ctx context.Context, by Operator, sandboxID uuid.UUID) error {
	return s.asOperator(ctx, by, db.OperatorActionPause, sandboxID, func(tx db.Tx, sb db.Sandbox) (bool, error) {
		switch sb.Status {
		case sandbox.Paused:
			return false, nil
		case sandbox.Running, sandbox.Unknown:
		default:
			return false, apperr.New(apperr.KindConflict, codeNotRunning, "Only a running preview can be paused.")
		}
		_, err := s.river.InsertTx(ctx, tx.Pgx(), PauseArgs{SandboxID: sb.ID, Version: sb.Version, Operator: true}, nil)
		return true, err
	})
}

// operatorKill ends any founder's sandbox at once, as a rebuild ends the one it replaces: the
// row is terminated ("Stopped by an operator") in this transaction, and the provider's sandbox
// is killed by a job queued with it. A build under way fails and its credit is given back.
func (s *Service) operatorKill(ctx context.Context, by Operator, sandboxID uuid.UUID) error {
	return s.asOperator(ctx, by, db.OperatorActionKill, sandboxID, func(tx db.Tx, sb db.Sandbox) (bool, error) {
		if sb.Status.Gone() {
			return false, nil
		}
		if sb.Status == sandbox.Starting {
			if err := s.finishFailed(ctx, tx, sb, operatorStopped); err != nil {
				return false, err
			}
		}
		if err := tx.SetSandboxKillRequested(ctx, sb.ID); err != nil {
			return false, err
		}
		if _, err := apply(ctx, tx, sb, Change{To: sandbox.Terminated, Source: sandbox.SourceOperator, Reason: sandbox.ReasonRequested,
			KilledReason: ptr(sandbox.ReasonRequested)}); err != nil {
			return false, err
		}
		if sb.ProviderID != nil {
			_, err := s.river.InsertTx(ctx, tx.Pgx(), KillArgs{ProviderID: *sb.ProviderID}, nil)
			return true, err
		}
		return true, nil
	})
}

// asOperator runs an operator's action on the sandbox, locked, in one transaction with the
// operators' log row saying who did it; act reports whether it did anything (a pause of a
// paused sandbox does nothing, and is not logged).
func (s *Service) asOperator(ctx context.Context, by Operator, action db.OperatorAction, sandboxID uuid.UUID,
	act func(db.Tx, db.Sandbox) (bool, error)) error {
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		sb, err := tx.GetSandboxForUpdate(ctx, sandboxID)
		if db.IsNotFound(err) {
			return apperr.NotFound("Sandbox")
		}
		if err != nil {
			return err
		}
		if did, err := act(tx, sb); err != nil || !did {
			return err
		}
		return tx.InsertOperatorLog(ctx, db.InsertOperatorLogParams{Action: action, ActorID: &by.ID, Actor: by.Email, SandboxID: &sb.ID})
	})
}
