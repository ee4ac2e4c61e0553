-- The sessions table is scs's (pgxstore reads and writes it); Sandman only clears it.

-- name: DeleteExpiredSessions :exec
DELETE FROM sessions WHERE expiry < now();
