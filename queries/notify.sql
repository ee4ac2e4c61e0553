-- name: Notify :exec
-- Delivered at commit, so listeners never hear of a change that rolled back.
SELECT pg_notify(@channel::text, @payload::text);
