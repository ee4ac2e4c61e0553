-- name: InsertLoginFailure :exec
INSERT INTO login_failures (email, ip) VALUES (@email, @ip);

-- name: CountLoginFailures :one
-- Recent failures for this email and for this address, counted separately.
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
