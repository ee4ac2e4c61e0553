-- +goose Up
-- Outgoing webhooks and the event feed (docs/architecture.md, "Outgoing webhooks"). A founder's
-- endpoints (at most 10, outbox.MaxEndpoints), each with its signing secret sealed by the
-- keyring (bound to the endpoint's id) and, for a day after a rotation, the previous one.
CREATE TABLE webhook_endpoints (
    id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id             uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    url                  text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    description          text NOT NULL DEFAULT '' CHECK (length(description) <= 500),
    -- Empty: every type.
    event_types          text[] NOT NULL DEFAULT '{}',
    enabled              boolean NOT NULL DEFAULT true,
    -- Why it was turned off by Sandman ('failing': 3 days of failed deliveries); NULL when the
    -- founder turned it off or it is on.
    disabled_reason      text,
    secret_key_id        text NOT NULL,
    secret_sealed        bytea NOT NULL,
    previous_key_id      text,
    previous_sealed      bytea,
    previous_until       timestamptz,
    -- The first failure since the last success: 3 days of it turns the endpoint off.
    failing_since        timestamptz,
    created_at           timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_owner_idx ON webhook_endpoints (owner_id, created_at);

-- Every event of a founder, kept 7 days: the feed (GET /api/events) reads it, deliveries point
-- to it. payload is the whole Standard Webhooks body ({"type","timestamp","data"}), json (not
-- jsonb) so that the bytes signed and sent are the bytes written. An event
-- with endpoint_id is a test sent to that endpoint only, and is no part of the feed.
CREATE TABLE outbox_events (
    id          bigserial PRIMARY KEY,
    owner_id    uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    type        text NOT NULL,
    sandbox_id  uuid,
    endpoint_id uuid REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    payload     json NOT NULL,
    -- The inserting transaction: the feed hands out only events of transactions older than
    -- every running one, so a reader's cursor never passes an event that commits later.
    txid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_events_owner_idx ON outbox_events (owner_id, txid, id); -- the feed's order
CREATE INDEX outbox_events_created_idx ON outbox_events (created_at);

-- One event to one endpoint: its id is the webhook-id of every attempt. Pending rows are the
-- queue: a sender claims due ones (next_attempt_at) with a lease (lease_until), so one that
-- dies mid-delivery loses nothing: the lease runs out and another claims it. order_key (the
-- sandbox, or the event when there is none) keeps one sandbox's deliveries in order: only the
-- oldest pending of a key is claimed.
CREATE TABLE outbox_deliveries (
    id              bigserial PRIMARY KEY,
    event_id        bigint NOT NULL REFERENCES outbox_events (id) ON DELETE CASCADE,
    endpoint_id     uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    owner_id        uuid NOT NULL,
    order_key       text NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    -- Attempts since the delivery was made or retried by hand: the retry schedule's index.
    tries           integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    lease_until     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_deliveries_due_idx ON outbox_deliveries (owner_id, next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX outbox_deliveries_order_idx ON outbox_deliveries (endpoint_id, order_key, id) WHERE state = 'pending';
CREATE INDEX outbox_deliveries_endpoint_idx ON outbox_deliveries (endpoint_id, id);

-- Every attempt, with what the endpoint answered (its first 4 KiB).
CREATE TABLE outbox_attempts (
    id           bigserial PRIMARY KEY,
    delivery_id  bigint NOT NULL REFERENCES outbox_deliveries (id) ON DELETE CASCADE,
    attempted_at timestamptz NOT NULL DEFAULT now(),
    status_code  integer NOT NULL DEFAULT 0,
    duration_ms  integer NOT NULL DEFAULT 0,
    error        text NOT NULL DEFAULT '',
    response     text NOT NULL DEFAULT ''
);
CREATE INDEX outbox_attempts_delivery_idx ON outbox_attempts (delivery_id, id);

-- +goose Down
DROP TABLE outbox_attempts;
DROP TABLE outbox_deliveries;
DROP TABLE outbox_events;
DROP TABLE webhook_endpoints;
