package lifecycle

import (
	"context"

	"github.com/google/uuid"

	"sandman/applog"
	"sandman/db"
	"sandman/envvars"
	"sandman/sandbox"
)

// A project's environment variables reach its app (docs/states.md, "Environment variables"):
// every install and dev server start is given them, opened at that moment; a change is applied
// to a running preview in place like a version (the deploy job restarts its dev server), to a
// sleeping one when it wakes, and a rebuild starts with them.

// envChanged is the envvars package's hook, in the transaction that changes a project's
// variables: the change is in its preview's history (names, never values), and a running
// preview gets an apply job. The sandbox row is locked, so an apply under way either sees the
// change before it lets go or lets go before this job can run (deployWorker).
func (s *Service) envChanged(ctx context.Context, tx db.Tx, owner, projectID uuid.UUID, set, removed []string) error {
	sb, err := tx.GetCurrentSandboxByProjectForUpdate(ctx, projectID)
	if db.IsNotFound(err) {
		return nil
	}
	if err != nil || sb.Status.Gone() {
		return err
	}
	if err := record(ctx, tx, db.InsertSandboxEventParams{SandboxID: sb.ID, FromStatus: sb.Status, ToStatus: sb.Status,
		Source: sandbox.SourceUser, Reason: reasonEnvChanged, EnvSet: nonNilStrings(set), EnvRemoved: nonNilStrings(removed)}, owner); err != nil {
		return err
	}
	if sb.Status == sandbox.Running {
		_, err = s.river.InsertTx(ctx, tx.Pgx(), DeployArgs{SandboxID: sb.ID}, nil)
	}
	return err
}

// appEnv opens the project's variables for its app. A secret that does not open (no key, or
// not this row's) is left out and logged: the app starts without it rather than not at all.
func (s *Service) appEnv(ctx context.Context, sandboxID, projectID uuid.UUID) (envvars.Env, error) {
	env, err := s.env.Open(ctx, s.q, projectID)
	if err != nil && env.Vars != nil {
		s.log.Warn("the app starts without a secret that does not open", "sandbox_id", sandboxID, "err", err)
		err = nil
	}
	return env, err
}

// redactTail is the last lines a run printed with its project's secrets replaced, as the log
// stores its lines (applog's redaction): what a failure or an exit records in the history and
// its problem. When the secrets cannot be read the output is withheld rather than risked.
func (s *Service) redactTail(ctx context.Context, run applog.Run, tail string) string {
	secrets, err := s.env.SecretsOf(ctx, []uuid.UUID{run.ProjectID})
	if err != nil {
		s.log.Warn("read a project's secrets to replace them in its output", "project_id", run.ProjectID, "err", err)
		return "[output withheld: Sandman could not read this project's secrets to hide them]"
	}
	return applog.NewRedactor(secrets[run.ProjectID]).Redact(tail)
}
