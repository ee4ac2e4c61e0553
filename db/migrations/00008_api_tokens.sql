-- +goose Up
-- API tokens (docs/architecture.md, "API tokens"): a founder's backend calls the JSON API with
-- one instead of a browser session. Only the token's SHA-256 is kept, and a request's token is
-- found by it; prefix is the token's first characters, for the founder to recognise it by. A
-- revoked token keeps its row (revoked_at), so the request logs' token ids still name a token;
-- the founder's account going takes its tokens with it.
CREATE TABLE api_tokens (
    id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id       uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name           text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    prefix         text NOT NULL,
    token_hash     bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    created_at     timestamptz NOT NULL DEFAULT now(),
    -- NULL: it never expires.
    expires_at     timestamptz,
    revoked_at     timestamptz,
    -- Set by the first use and moved at most once a minute after.
    last_used_at   timestamptz,
    last_used_from text NOT NULL DEFAULT '',
    -- The token's request limit, a generic cell rate algorithm: the theoretical arrival time of
    -- its next request. A request moves it one interval on and is refused when that would put it
    -- more than the limit's window ahead of now (accounts.TokenLimit).
    rate_tat       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX api_tokens_owner_idx ON api_tokens (owner_id, created_at);

-- Failed bearer attempts per client address, counted the same way as a token's requests: one row
-- per address that failed lately, on every instance together.
CREATE TABLE bearer_failures (
    ip  text PRIMARY KEY,
    tat timestamptz NOT NULL
);

-- The name of the API token a founder acted through, for the history to say so ("Rebuilt
-- through the API (token "ci")"); NULL for the browser and for Sandman's own changes. The name
-- is copied: the history keeps it when the token is revoked.
ALTER TABLE sandbox_events ADD COLUMN via_token text;

-- +goose Down
ALTER TABLE sandbox_events DROP COLUMN via_token;
DROP TABLE bearer_failures;
DROP TABLE api_tokens;
