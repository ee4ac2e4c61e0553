-- name: InsertCreditDebit :one
-- Claims the idempotency key; a repeated key inserts nothing and returns no row.
INSERT INTO credit_ledger (user_id, delta, reason, idempotency_key)
VALUES (@user_id, -1, @reason, @idempotency_key)
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING id;

-- name: GetCreditLedgerByKey :one
SELECT * FROM credit_ledger WHERE idempotency_key = @idempotency_key;

-- name: SetCreditLedgerBuild :exec
UPDATE credit_ledger SET build_id = @build_id WHERE id = @id;

-- name: DebitUserCredit :execrows
-- Zero rows means the founder has no credit left.
UPDATE users SET credits = credits - 1 WHERE id = @id AND credits >= 1;

-- name: InsertCreditRefund :one
-- Gives a failed build's credit back, once (credit_ledger_refund_once); a second refund of the
-- same build inserts nothing and returns no row.
INSERT INTO credit_ledger (user_id, delta, reason, detail, build_id)
VALUES (@user_id, 1, 'refund', @detail, @build_id::uuid)
ON CONFLICT (build_id) WHERE delta > 0 DO NOTHING
RETURNING id;

-- name: CreditUser :exec
UPDATE users SET credits = credits + 1 WHERE id = @id;

-- name: ListCreditLedger :many
-- A founder's ledger, oldest first.
SELECT * FROM credit_ledger WHERE user_id = @user_id ORDER BY id;

-- name: GetUserCredits :one
-- A founder's balance.
SELECT credits FROM users WHERE id = @id;
