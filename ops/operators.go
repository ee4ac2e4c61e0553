package ops

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/apperr"
	"sandman/db"
)

// Operators are the founders' accounts that may open the console (`sandman operator add`).
type Operators struct {
	pool *pgxpool.Pool
	q    *db.Queries
}

// NewOperators returns the operators' registry.
func NewOperators(pool *pgxpool.Pool) *Operators { return &Operators{pool: pool, q: db.New(pool)} }

// IsOperator reports whether the account may open the console.
func (o *Operators) IsOperator(ctx context.Context, userID uuid.UUID) (bool, error) {
	return o.q.IsOperator(ctx, userID)
}

// Grant makes the account with this email an operator, recorded with who did it (actor). It
// answers what happened, for the command line: a second grant changes nothing and says so.
func (o *Operators) Grant(ctx context.Context, email, actor string) (string, error) {
	return o.change(ctx, email, actor, db.OperatorActionGrant)
}

// Revoke takes the console away from the account (idempotent, like Grant): its console streams
// end on every instance (feed.Feed.EndOperator).
func (o *Operators) Revoke(ctx context.Context, email, actor string) (string, error) {
	return o.change(ctx, email, actor, db.OperatorActionRevoke)
}

func (o *Operators) change(ctx context.Context, email, actor string, action db.OperatorAction) (string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	var msg string
	err := db.InTx(ctx, o.pool, func(tx db.Tx) error {
		u, err := tx.GetUserByEmail(ctx, email)
		if db.IsNotFound(err) {
			return apperr.New(apperr.KindNotFound, codeNoAccount, fmt.Sprintf("No account has the email %q: the founder must sign up first.", email))
		}
		if err != nil {
			return err
		}
		var n int64
		if action == db.OperatorActionGrant {
			n, err = tx.InsertOperator(ctx, db.InsertOperatorParams{UserID: u.ID, AddedBy: actor})
		} else {
			n, err = tx.DeleteOperator(ctx, u.ID)
		}
		if err != nil {
			return err
		}
		switch {
		case n == 0 && action == db.OperatorActionGrant:
			msg = email + " already is an operator"
			return nil
		case n == 0:
			msg = email + " was not an operator"
			return nil
		case action == db.OperatorActionGrant:
			msg = email + " is now an operator"
		default:
			msg = email + " is no longer an operator"
			// Their open console streams end on every instance, at commit.
			if err := tx.Notify(ctx, db.NotifyParams{Channel: db.OperatorEndChannel, Payload: u.ID.String()}); err != nil {
				return err
			}
		}
		return tx.InsertOperatorLog(ctx, db.InsertOperatorLogParams{Action: action, Actor: actor, UserID: &u.ID})
	})
	return msg, err
}
