-- The rate limits of accounts: log-in attempts and sign-ups, per email and per client address.

-- name: InsertLoginFailure :exec
-- Recorded before the password is checked (accounts.LogIn): a success deletes it again.
INSERT INTO login_failures (email, ip) VALUES (@email, @ip);

-- name: CountLoginFailures :one
-- Recent attempts for this email and for this address, counted separately.
SELECT
    count(*) FILTER (WHERE email = @email)::bigint AS by_email,
    count(*) FILTER (WHERE ip = @ip)::bigint AS by_ip
FROM login_failures
WHERE created_at > @since::timestamptz
  AND (email = @email OR ip = @ip);

-- name: DeleteLoginFailuresByEmail :exec
-- A successful login forgives the email's earlier failures (not the address's).
DELETE FROM login_failures WHERE email = @email;

-- name: DeleteLoginFailuresBefore :exec
DELETE FROM login_failures WHERE created_at < @before::timestamptz;

-- name: InsertSignup :one
INSERT INTO signups (ip) VALUES (@ip) RETURNING id;

-- name: CountSignups :one
-- Recent sign-ups from this address, and when the oldest of them stops counting.
SELECT count(*)::bigint AS n, coalesce(min(created_at), now())::timestamptz AS oldest
FROM signups WHERE ip = @ip AND created_at > @since::timestamptz;

-- name: DeleteSignup :exec
DELETE FROM signups WHERE id = @id;

-- name: DeleteSignupsBefore :exec
DELETE FROM signups WHERE created_at < @before::timestamptz;

-- name: LockRateLimit :exec
-- Serializes, until the transaction ends, the checks of one rate limit's key (an email, an
-- address), on every instance: each check then sees the attempts recorded before it.
SELECT pg_advisory_xact_lock(hashtextextended(@key::text, 0));
