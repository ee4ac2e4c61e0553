// Package credits is the founders' build credits: the balance each founder's row keeps and the
// ledger of every change to it (docs/states.md, "Credits"). It knows nothing of sandboxes: a
// debit pays for a build and a refund gives a build's credit back, each inside the transaction of
// the caller, which makes the build and its state change in the same commit.
package credits

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/db"
	"sandman/outbox"
)

// ErrNoCredit is a debit refused: the founder has no credit left, and nothing was taken.
var ErrNoCredit = errors.New("credits: no credit left")

// Ledger reads founders' balances. The debit and the refund are not its methods: they run in the
// caller's transaction (Claim, Refund).
type Ledger struct{ q *db.Queries }

// New reads balances from pool.
func New(pool *pgxpool.Pool) *Ledger { return &Ledger{q: db.New(pool)} }

// Balance is the founder's credits now.
func (l *Ledger) Balance(ctx context.Context, owner uuid.UUID) (int32, error) {
	n, err := l.q.GetUserCredits(ctx, owner)
	return n, db.MapError(err)
}

// Debit is one credit being spent in the caller's transaction: claimed by its idempotency key
// (Claim), taken from the balance (Take), tied to the build it paid for (PaysFor).
type Debit struct {
	id    int64
	owner uuid.UUID
}

// Claim claims the founder's idempotency key for a debit for reason. A key is the founder's own
// (another founder's same key is another key) and pays for one thing: when it was claimed before
// (the same request again, or another one with the same key), Claim returns no Debit but that
// claim's ledger entry, whose reason and build say what it paid for. A claim made while another
// transaction holds the same key waits for it, so of requests at once exactly one claims it. The
// claim commits or rolls back with the caller's transaction: a request refused after it leaves
// its key free.
func Claim(ctx context.Context, tx db.Tx, owner uuid.UUID, key string, reason db.LedgerReason) (*Debit, *db.CreditLedger, error) {
	ledgerKey := owner.String() + ":" + key
	id, err := tx.InsertCreditDebit(ctx, db.InsertCreditDebitParams{UserID: owner, Reason: reason, IdempotencyKey: &ledgerKey})
	if err == nil {
		return &Debit{id: id, owner: owner}, nil, nil
	}
	if !db.IsNotFound(err) {
		return nil, nil, err
	}
	earlier, err := tx.GetCreditLedgerByKey(ctx, &ledgerKey)
	if err != nil {
		return nil, nil, err
	}
	return nil, &earlier, nil
}

// Take takes the credit from the founder's balance, or answers ErrNoCredit when there is none
// (the balance never goes below zero).
func (d *Debit) Take(ctx context.Context, tx db.Tx) error {
	n, err := tx.DebitUserCredit(ctx, d.owner)
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNoCredit
	}
	return outbox.Record(ctx, tx, changed(d.owner, -1, "debit"))
}

// changed is the webhook event of a change of the founder's balance (docs/api.md, "Webhooks").
func changed(owner uuid.UUID, delta int, reason string) outbox.Event {
	return outbox.Event{Owner: owner, Type: outbox.CreditsChanged, Reason: reason, Extra: map[string]any{"delta": delta}}
}

// PaysFor records the build the debit paid for: what a later claim of its key finds.
func (d *Debit) PaysFor(ctx context.Context, tx db.Tx, build uuid.UUID) error {
	return tx.SetCreditLedgerBuild(ctx, db.SetCreditLedgerBuildParams{ID: d.id, BuildID: &build})
}

// Refund gives the build's credit back to the founder, with a ledger entry whose detail says why.
// A build is refunded at most once: a second refund of it changes nothing.
func Refund(ctx context.Context, tx db.Tx, owner, build uuid.UUID, detail string) error {
	_, err := tx.InsertCreditRefund(ctx, db.InsertCreditRefundParams{UserID: owner, BuildID: build, Detail: detail})
	if db.IsNotFound(err) {
		return nil // refunded before
	}
	if err != nil {
		return err
	}
	if err := tx.CreditUser(ctx, owner); err != nil {
		return err
	}
	return outbox.Record(ctx, tx, changed(owner, 1, "refund"))
}
