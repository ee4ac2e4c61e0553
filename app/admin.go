package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/accounts"
	"sandman/db"
	"sandman/envvars"
	"sandman/lifecycle"
	"sandman/ops"
	"sandman/outbox"
	"sandman/overview"
	"sandman/projects"
)

// Migrate applies every pending migration (Sandman's and River's) and returns: `sandman
// migrate`. New does the same at every start; both are safe to run from several instances.
func Migrate(ctx context.Context, cfg Config) error {
	pool, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	return db.Migrate(ctx, pool)
}

// DemoFounder creates the founder (or finds them) with the starter projects and queues a first
// build of each project never built, so `make run` opens on live previews: `sandman
// demo-founder`. It needs no provider: the builds run on whichever instance takes them.
func DemoFounder(ctx context.Context, cfg Config, email, password string) error {
	pool, err := migrated(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	u, err := accounts.New(pool, accounts.Options{StartCredits: cfg.StartCredits, BcryptCost: cfg.BcryptCost}).
		EnsureUser(ctx, accounts.Credentials{Email: email, Password: password})
	if err != nil {
		return err
	}
	if err := projects.New(pool).WithLimits(cfg.ProjectLimit, cfg.StorageQuota).EnsureStarterProjects(ctx, u.ID); err != nil {
		return err
	}
	life, err := lifecycle.New(lifecycle.Options{Pool: pool, Config: cfg.Lifecycle})
	if err != nil {
		return err
	}
	shown, _, err := overview.New(db.New(pool), cfg.Lifecycle.IdleDeadline).Projects(ctx, u.ID)
	if err != nil {
		return err
	}
	for _, v := range shown {
		if v.Build != nil {
			continue
		}
		// The key makes a second `make run` before the first build lands a replay, not a charge.
		if _, err := life.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, v.Project.ID, "demo-first-build-"+v.Project.ID.String(), false); err != nil {
			return fmt.Errorf("build %s: %w", v.Project.Name, err)
		}
	}
	return nil
}

// Operator lets the founder's account with this email open the operator's console (add), or
// stops it (remove), recorded with who did it (actor): `sandman operator add|remove EMAIL`. It
// answers what happened; the account must exist.
func Operator(ctx context.Context, cfg Config, add bool, email, actor string) (string, error) {
	pool, err := migrated(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	o := ops.NewOperators(pool)
	if add {
		return o.Grant(ctx, email, actor)
	}
	return o.Revoke(ctx, email, actor)
}

// RotateSecrets seals again under SANDMAN_SECRETS_KEY every value kept secret that is sealed
// under another key (SANDMAN_SECRETS_KEY_PREVIOUS), and says how many it sealed
// (docs/architecture.md, "Secrets at rest").
func RotateSecrets(ctx context.Context, cfg Config) (string, error) {
	if !cfg.Secrets.Enabled() {
		return "", errors.New("SANDMAN_SECRETS_KEY is not set: set the new key, and the old one as SANDMAN_SECRETS_KEY_PREVIOUS")
	}
	pool, err := migrated(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	n, err := envvars.New(pool, cfg.Secrets, nil).Reseal(ctx)
	w, werr := outbox.New(pool, cfg.Secrets, cfg.Webhooks, slog.New(slog.DiscardHandler)).Reseal(ctx)
	msg := fmt.Sprintf("%d environment secret(s) and %d webhook signing secret(s) sealed again under key %s", n, w, cfg.Secrets.CurrentID())
	if err = errors.Join(err, werr); err != nil {
		return msg, fmt.Errorf("%s; some did not open: %w", msg, err)
	}
	return msg, nil
}

// migrated opens the database and brings its schema up to date, for a command run by hand.
func migrated(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pool, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := db.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}
