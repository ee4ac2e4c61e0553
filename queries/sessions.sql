-- The sessions table is scs's (pgxstore reads and writes it); Sandman only clears it.

-- name: DeleteExpiredSessions :exec
DELETE FROM sessions WHERE expiry < now();

-- name: AnnounceSession :one
-- Announces a session's end or change (delivered at once, outside a transaction) and counts
-- the instances' feeds that will hear it (application_name sandman_feed, in this database):
-- each answers on sandman_session_forgotten once it has dropped its copy (accounts.SessionStore).
SELECT pg_notify(@channel::text, @payload::text)::text AS sent,
    (SELECT count(*) FROM pg_catalog.pg_stat_activity
     WHERE application_name = 'sandman_feed' AND datname = current_database())::int AS feeds;
