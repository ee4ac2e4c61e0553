-- Share links and the visitors' rate limits (package shares).

-- name: GetShareLinkByProject :one
SELECT * FROM share_links WHERE project_id = @project_id;

-- name: GetShareLinkByTokenHash :one
-- A visitor's link, by the SHA-256 of its token: the one lookup a visitor's request makes.
SELECT l.id, l.project_id, p.owner_id
FROM share_links l JOIN projects p ON p.id = l.project_id
WHERE l.token_hash = @token_hash;

-- name: ReplaceShareLink :one
-- Creates the project's link, or replaces it (a new id: the old token stops working at once).
INSERT INTO share_links (project_id, nonce, token_hash) VALUES (@project_id, @nonce, @token_hash)
ON CONFLICT (project_id) DO UPDATE SET id = gen_random_uuid(), nonce = excluded.nonce,
    token_hash = excluded.token_hash, created_at = now()
RETURNING *;

-- name: InsertShareLinkIfNone :one
-- Creates the project's link unless it has one (no row returned then).
INSERT INTO share_links (project_id, nonce, token_hash) VALUES (@project_id, @nonce, @token_hash)
ON CONFLICT (project_id) DO NOTHING
RETURNING *;

-- name: DeleteShareLink :one
DELETE FROM share_links WHERE project_id = @project_id RETURNING id;

-- name: InsertShareHit :exec
INSERT INTO share_hits (link_id, ip, kind) VALUES (@link_id, @ip, @kind);

-- name: CountShareHits :one
-- A link's and an address's recent hits of one kind, counted separately, and when the oldest
-- of each stops counting.
SELECT
    count(*) FILTER (WHERE link_id = @link_id)::bigint AS by_link,
    coalesce(min(created_at) FILTER (WHERE link_id = @link_id), now())::timestamptz AS oldest_by_link,
    count(*) FILTER (WHERE ip = @ip)::bigint AS by_ip,
    coalesce(min(created_at) FILTER (WHERE ip = @ip), now())::timestamptz AS oldest_by_ip
FROM share_hits
WHERE kind = @kind AND created_at > @since::timestamptz AND (link_id = @link_id OR ip = @ip);

-- name: DeleteShareHitsBefore :exec
DELETE FROM share_hits WHERE created_at < @before::timestamptz;
