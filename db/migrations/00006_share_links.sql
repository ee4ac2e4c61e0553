-- +goose Up
-- Share links (docs/architecture.md, "Share links"): one per project at most. The link's token is
-- HMAC-SHA256(SANDMAN_SHARE_KEY, nonce), so the founder's build page can show it again, while the
-- database alone cannot: it keeps the nonce and the token's SHA-256, by which visitors' links are
-- looked up. A new link replaces the row (a new id, nonce and hash): the old token stops working
-- at once.
CREATE TABLE share_links (
    project_id uuid PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    id         uuid NOT NULL UNIQUE DEFAULT gen_random_uuid(),
    nonce      bytea NOT NULL CHECK (length(nonce) = 32),
    token_hash bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- What visitors asked of a link (a wake, an activity report), per link and per client address:
-- the visitors' rate limits count these, as log-ins and sign-ups count theirs. Rows outlive their
-- link until the pruning (no foreign key).
CREATE TABLE share_hits (
    id         bigserial PRIMARY KEY,
    link_id    uuid NOT NULL,
    ip         text NOT NULL,
    kind       text NOT NULL CHECK (kind IN ('wake', 'activity')),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX share_hits_link_idx ON share_hits (link_id, kind, created_at);
CREATE INDEX share_hits_ip_idx ON share_hits (ip, kind, created_at);

-- A visitor's wake is a resume of its own, and a visitor who finds the preview gone is told to
-- the founder: both are recorded with this source.
ALTER TYPE event_source ADD VALUE IF NOT EXISTS 'visitor';

-- +goose Down
-- PostgreSQL cannot drop an enum value: 'visitor' stays, and its events are deleted.
DELETE FROM sandbox_events WHERE source::text = 'visitor';
DROP TABLE share_hits;
DROP TABLE share_links;
