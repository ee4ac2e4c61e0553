-- API tokens and the failed bearer attempts per address (accounts/tokens.go).

-- name: InsertAPIToken :one
INSERT INTO api_tokens (owner_id, name, prefix, token_hash, expires_at)
VALUES (@owner_id, @name, @prefix, @token_hash, sqlc.narg('expires_at'))
RETURNING *;

-- name: CountLiveAPITokens :one
-- The founder's tokens that still work: neither revoked nor expired.
SELECT count(*)::integer FROM api_tokens
WHERE owner_id = @owner_id AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > @now::timestamptz);

-- name: ListAPITokensByOwner :many
-- The founder's tokens that are not revoked (expired ones included, until revoked), newest first.
SELECT * FROM api_tokens WHERE owner_id = @owner_id AND revoked_at IS NULL ORDER BY created_at DESC, id;

-- name: RevokeAPIToken :execrows
-- Zero rows: no such token of this founder, or revoked already.
UPDATE api_tokens SET revoked_at = now() WHERE id = @id AND owner_id = @owner_id AND revoked_at IS NULL;

-- name: GetAPITokenByHash :one
-- A bearer request's token and founder, by the SHA-256 of the token: the one lookup of an
-- authenticated request, with how long its address must wait, in seconds, for its failed
-- attempts to be within their limit (0 or less: they are).
SELECT sqlc.embed(t), sqlc.embed(u),
    (coalesce((SELECT extract(epoch FROM f.tat - now()) FROM bearer_failures f WHERE f.ip = @ip), 0)
        + sqlc.arg('every_seconds')::float8 - sqlc.arg('window_seconds')::float8)::float8 AS failures_wait
FROM api_tokens t JOIN users u ON u.id = t.owner_id
WHERE t.token_hash = @token_hash;

-- name: TakeAPITokenRequest :execrows
-- Counts a request against the token's limit, unless it is over it (zero rows), and sets its
-- last use when the one recorded is older than a minute.
UPDATE api_tokens SET rate_tat = greatest(rate_tat, now()) + sqlc.arg('every_seconds')::float8 * interval '1 second',
    last_used_from = CASE WHEN last_used_at IS NULL OR last_used_at <= now() - interval '1 minute' THEN @ip ELSE last_used_from END,
    last_used_at = CASE WHEN last_used_at IS NULL OR last_used_at <= now() - interval '1 minute' THEN now() ELSE last_used_at END
WHERE id = @id
  AND greatest(rate_tat, now()) + sqlc.arg('every_seconds')::float8 * interval '1 second' <= now() + sqlc.arg('window_seconds')::float8 * interval '1 second';

-- name: GetAPITokenWait :one
-- How long, in seconds, until the token's next request is within its limit.
SELECT (extract(epoch FROM rate_tat - now()) + sqlc.arg('every_seconds')::float8 - sqlc.arg('window_seconds')::float8)::float8
FROM api_tokens WHERE id = @id;

-- name: TakeBearerFailure :one
-- Counts a failed bearer attempt from the address, unless it is over its limit already (no row).
INSERT INTO bearer_failures (ip, tat) VALUES (@ip, now() + sqlc.arg('every_seconds')::float8 * interval '1 second')
ON CONFLICT (ip) DO UPDATE SET tat = greatest(bearer_failures.tat, now()) + sqlc.arg('every_seconds')::float8 * interval '1 second'
WHERE greatest(bearer_failures.tat, now()) + sqlc.arg('every_seconds')::float8 * interval '1 second' <= now() + sqlc.arg('window_seconds')::float8 * interval '1 second'
RETURNING ip;

-- name: GetBearerFailuresWait :one
-- How long, in seconds, until the address's next failed attempt is within its limit.
SELECT (extract(epoch FROM tat - now()) + sqlc.arg('every_seconds')::float8 - sqlc.arg('window_seconds')::float8)::float8
FROM bearer_failures WHERE ip = @ip;

-- name: DeleteBearerFailuresBefore :exec
-- Addresses whose failures no longer count at all.
DELETE FROM bearer_failures WHERE tat < now();
