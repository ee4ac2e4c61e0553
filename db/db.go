// Package db holds Sandman's schema (goose migrations), the sqlc-generated queries, the pool set-up
// and the one place where database errors become the app's errors.
package db

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound means the row does not exist or belongs to someone else: callers answer 404 either way.
var ErrNotFound = errors.New("not found")

// ErrConflict means a unique constraint refused the write.
var ErrConflict = errors.New("conflict")

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the embedded goose migrations.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory exists
	}
	return sub
}

// defaultMaxConns is the pool size unless DATABASE_URL sets pool_max_conns.
const defaultMaxConns = 25

// Open connects a pool and checks the database answers.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// pgxpool's default (the CPU count, at least 4) starves River on a small machine: its
		// notifier, elector, producer and completer each want a connection beside the jobs'.
		cfg.MaxConns = defaultMaxConns
	}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		uuidsAsBytes(c.TypeMap())
		return nil
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reach database: %w", err)
	}
	return pool, nil
}

// TxBeginner is satisfied by *pgxpool.Pool and pgx.Tx (where Begin makes a savepoint), so the
// same code runs in the app and inside a test's transaction.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Tx is an open transaction: every query, run inside it. Only InTx makes a usable one (its
// fields are unexported), so a function that takes a Tx is called inside a transaction by
// construction, not by convention.
type Tx struct {
	*queries
	tx pgx.Tx
}

// queries lets Tx embed Queries under an unexported name: its methods are promoted, but no
// other package can fill the field in.
type queries = Queries

// Pgx is the driver's transaction, for work that must commit or roll back with the queries
// (River's InsertTx).
func (t Tx) Pgx() pgx.Tx { return t.tx }

// InTx runs fn in one transaction, committing when fn returns nil.
func InTx(ctx context.Context, b TxBeginner, fn func(tx Tx) error) error {
	tx, err := b.Begin(ctx)
	if err != nil {
		return MapError(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(Tx{queries: New(tx), tx: tx}); err != nil {
		return err
	}
	return MapError(tx.Commit(ctx))
}

// MapError turns driver errors into ErrNotFound and ErrConflict so no caller imports pgx to
// recognise them; other errors pass through unchanged.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return fmt.Errorf("%w: %s", ErrConflict, pgErr.ConstraintName)
	}
	return err
}

// IsNotFound reports whether err says a row was not found: a query that returned no row
// (pgx.ErrNoRows, mapped or not) or ErrNotFound itself. Write-once inserts (ON CONFLICT DO
// NOTHING RETURNING …) also answer this way when the row already existed.
func IsNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, pgx.ErrNoRows)
}

// IsConstraint reports whether err is a violation of the named constraint.
func IsConstraint(err error, name string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.ConstraintName == name
}
