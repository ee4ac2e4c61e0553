-- Outgoing webhooks: endpoints, events, deliveries and their attempts (package outbox).

-- name: InsertWebhookEndpoint :one
INSERT INTO webhook_endpoints (id, owner_id, url, description, event_types, secret_key_id, secret_sealed)
VALUES (@id, @owner_id, @url, @description, sqlc.arg('event_types')::text[], @secret_key_id, @secret_sealed)
RETURNING *;

-- name: CountWebhookEndpoints :one
SELECT count(*)::integer FROM webhook_endpoints WHERE owner_id = @owner_id;

-- name: LockWebhookOwner :exec
-- Serialises one founder's endpoint creations, so two at once cannot pass the limit together.
SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || sqlc.arg('owner_id')::uuid::text, 0));

-- name: ListWebhookEndpoints :many
SELECT * FROM webhook_endpoints WHERE owner_id = @owner_id ORDER BY created_at, id;

-- name: GetWebhookEndpoint :one
SELECT * FROM webhook_endpoints WHERE id = @id AND owner_id = @owner_id;

-- name: UpdateWebhookEndpoint :one
-- Turning an endpoint on again forgets its failures: it gets 3 more days.
UPDATE webhook_endpoints SET url = @url, description = @description, event_types = sqlc.arg('event_types')::text[],
    enabled = @enabled,
    disabled_reason = CASE WHEN @enabled::boolean THEN NULL ELSE disabled_reason END,
    failing_since = CASE WHEN @enabled::boolean AND NOT enabled THEN NULL ELSE failing_since END
WHERE id = @id AND owner_id = @owner_id
RETURNING *;

-- name: DeleteWebhookEndpoint :execrows
DELETE FROM webhook_endpoints WHERE id = @id AND owner_id = @owner_id;

-- name: RotateWebhookSecret :one
-- The current secret becomes the previous one, which keeps signing until previous_until.
UPDATE webhook_endpoints SET previous_key_id = secret_key_id, previous_sealed = secret_sealed,
    previous_until = @previous_until, secret_key_id = @secret_key_id, secret_sealed = @secret_sealed
WHERE id = @id AND owner_id = @owner_id
RETURNING *;

-- name: ListStaleWebhookSecrets :many
-- Endpoints with a secret sealed under another key than the current one (a key rotation).
SELECT * FROM webhook_endpoints
WHERE (secret_key_id <> @key_id OR (previous_key_id IS NOT NULL AND previous_key_id <> @key_id)) AND id > @after
ORDER BY id LIMIT @max;

-- name: ResealWebhookSecrets :execrows
-- Only if neither secret changed since it was read (a rotation in between wins).
UPDATE webhook_endpoints SET secret_key_id = @secret_key_id, secret_sealed = @secret_sealed,
    previous_key_id = sqlc.narg('previous_key_id'), previous_sealed = sqlc.narg('previous_sealed')
WHERE id = @id AND secret_sealed = @old_sealed
  AND previous_sealed IS NOT DISTINCT FROM sqlc.narg('old_previous_sealed')::bytea;

-- name: RecordOutboxEvent :one
-- An event and its deliveries to every endpoint of its founder that is on and wants its type,
-- in the caller's transaction, announced at commit when it has a delivery: one statement.
-- endpoint_id set: a test for that endpoint only. Without owner_id, the project's owner.
WITH ev AS (
    INSERT INTO outbox_events (owner_id, type, sandbox_id, endpoint_id, payload)
    VALUES (coalesce(sqlc.narg('owner_id')::uuid, (SELECT p.owner_id FROM projects p WHERE p.id = sqlc.narg('project_id')::uuid)), @type, sqlc.narg('sandbox_id'), sqlc.narg('endpoint_id'), @payload)
    RETURNING id, owner_id, type, sandbox_id, endpoint_id
), d AS (
    INSERT INTO outbox_deliveries (event_id, endpoint_id, owner_id, order_key)
    SELECT ev.id, e.id, ev.owner_id, coalesce(ev.sandbox_id::text, 'event:' || ev.id::text)
    FROM ev JOIN webhook_endpoints e ON e.owner_id = ev.owner_id AND e.enabled
        AND (ev.endpoint_id IS NULL OR e.id = ev.endpoint_id)
        AND (ev.endpoint_id IS NOT NULL OR cardinality(e.event_types) = 0 OR ev.type = ANY (e.event_types))
    RETURNING id
)
SELECT ev.id, (SELECT count(*) FROM d)::integer AS deliveries,
    (SELECT count(pg_notify(@channel::text, '')) FROM (SELECT 1 FROM d LIMIT 1) x)::integer AS notified
FROM ev;

-- name: ClaimOutboxDeliveries :many
-- Due deliveries, each the oldest pending of its endpoint and sandbox (the order of one
-- sandbox's events), of endpoints that are on and not busy on this instance, leased to the
-- claimer: one that dies lets its lease run out and another claims them again. At most
-- per_owner of each founder's: one founder's flood shares every claim with the others'.
UPDATE outbox_deliveries d SET lease_until = now() + make_interval(secs => @lease_seconds::float8), tries = d.tries + 1
FROM outbox_events ev, webhook_endpoints e
WHERE d.id IN (
    SELECT c.id
    FROM (SELECT DISTINCT o.owner_id FROM outbox_deliveries o WHERE o.state = 'pending' AND o.next_attempt_at <= now()) owners
    CROSS JOIN LATERAL (
        SELECT c.id FROM outbox_deliveries c
        WHERE c.owner_id = owners.owner_id AND c.state = 'pending' AND c.next_attempt_at <= now()
          AND (c.lease_until IS NULL OR c.lease_until < now())
          AND NOT (c.endpoint_id = ANY (sqlc.arg('busy')::uuid[]))
          AND EXISTS (SELECT 1 FROM webhook_endpoints w WHERE w.id = c.endpoint_id AND w.enabled)
          AND NOT EXISTS (SELECT 1 FROM outbox_deliveries p WHERE p.state = 'pending' AND p.endpoint_id = c.endpoint_id
              AND p.order_key = c.order_key AND p.id < c.id)
        ORDER BY c.next_attempt_at, c.id
        LIMIT @per_owner
        FOR UPDATE SKIP LOCKED) c
    LIMIT @max)
  AND ev.id = d.event_id AND e.id = d.endpoint_id
RETURNING d.id, d.tries, d.endpoint_id, ev.payload, e.url, e.secret_key_id, e.secret_sealed,
    e.previous_key_id, e.previous_sealed, e.previous_until;

-- name: NextOutboxDue :one
-- When the next pending delivery may be claimed (in an hour: none pending).
SELECT coalesce(min(greatest(d.next_attempt_at, coalesce(d.lease_until, d.next_attempt_at))), now() + interval '1 hour')::timestamptz
FROM outbox_deliveries d WHERE d.state = 'pending';

-- name: FinishOutboxAttempt :one
-- An attempt's record and its outcome: delivered, tried again at next_attempt_at, or failed;
-- the endpoint's run of failures, which turns it off after 3 days.
WITH a AS (
    INSERT INTO outbox_attempts (delivery_id, status_code, duration_ms, error, response)
    VALUES (@id, @status_code, @duration_ms, @error, @response)
), d AS (
    UPDATE outbox_deliveries SET state = @state, next_attempt_at = @next_attempt_at, lease_until = NULL
    WHERE id = @id
    RETURNING endpoint_id
)
UPDATE webhook_endpoints e SET
    failing_since = CASE WHEN @ok::boolean THEN NULL ELSE coalesce(e.failing_since, now()) END,
    enabled = e.enabled AND (@ok::boolean OR e.failing_since IS NULL OR e.failing_since > now() - make_interval(secs => @disable_after_seconds::float8)),
    disabled_reason = CASE WHEN e.enabled AND NOT @ok::boolean AND e.failing_since <= now() - make_interval(secs => @disable_after_seconds::float8)
        THEN 'failing' ELSE e.disabled_reason END
FROM d WHERE e.id = d.endpoint_id
RETURNING e.enabled;

-- name: ListOutboxDeliveries :many
-- An endpoint's deliveries, newest first, each with its last attempt.
SELECT d.id, d.state, d.tries, d.next_attempt_at, d.created_at, ev.type AS event_type,
    coalesce(la.status_code, 0)::integer AS status_code, coalesce(la.duration_ms, 0)::integer AS duration_ms,
    coalesce(la.error, '')::text AS error, coalesce(la.response, '')::text AS response,
    coalesce(la.attempted_at, d.created_at)::timestamptz AS attempted_at,
    (SELECT count(*) FROM outbox_attempts x WHERE x.delivery_id = d.id)::integer AS attempts
FROM outbox_deliveries d
JOIN outbox_events ev ON ev.id = d.event_id
LEFT JOIN LATERAL (SELECT a.status_code, a.duration_ms, a.error, a.response, a.attempted_at FROM outbox_attempts a
    WHERE a.delivery_id = d.id ORDER BY a.id DESC LIMIT 1) la ON true
WHERE d.endpoint_id = @endpoint_id AND d.owner_id = @owner_id AND (@before::bigint = 0 OR d.id < @before)
ORDER BY d.id DESC
LIMIT @max;

-- name: RetryOutboxDelivery :execrows
-- A delivery sent again by hand, now, with the retry schedule from its start; not one in flight.
UPDATE outbox_deliveries SET state = 'pending', tries = 0, next_attempt_at = now(), lease_until = NULL
WHERE id = @id AND endpoint_id = @endpoint_id AND owner_id = @owner_id
  AND (lease_until IS NULL OR lease_until < now());

-- name: ListOutboxEvents :many
-- The founder's feed after a cursor, in the order of their transactions, then of their ids:
-- only events of transactions older than every running one, so every transaction before the
-- cursor's had ended when it was read and none can commit an event behind it
-- (docs/architecture.md, "Outgoing webhooks").
SELECT id, txid::text::bigint AS tx, payload FROM outbox_events
WHERE owner_id = @owner_id AND endpoint_id IS NULL
  AND (txid, id) > (CAST(CAST(sqlc.arg(after_tx)::bigint AS text) AS xid8), sqlc.arg(after_id)::bigint)
  AND txid < pg_snapshot_xmin(pg_current_snapshot())
ORDER BY txid, id
LIMIT @max;

-- name: PruneOutboxEvents :execrows
DELETE FROM outbox_events WHERE created_at < now() - make_interval(secs => @keep_seconds::float8);

-- name: FinishOutboxAttempts :exec
-- FinishOutboxAttempt for many attempts in one statement: the sender writes its outcomes in
-- batches. A delivery deleted meanwhile (its endpoint deleted) is skipped.
WITH o AS (
    SELECT unnest(sqlc.arg('ids')::bigint[]) AS id, unnest(sqlc.arg('status_codes')::integer[]) AS status_code,
        unnest(sqlc.arg('durations_ms')::integer[]) AS duration_ms, unnest(sqlc.arg('errors')::text[]) AS error,
        unnest(sqlc.arg('responses')::text[]) AS response, unnest(sqlc.arg('states')::text[]) AS state,
        unnest(sqlc.arg('next_attempts')::timestamptz[]) AS next_attempt_at, unnest(sqlc.arg('oks')::boolean[]) AS ok
), a AS (
    INSERT INTO outbox_attempts (delivery_id, status_code, duration_ms, error, response)
    SELECT o.id, o.status_code, o.duration_ms, o.error, o.response FROM o
    WHERE EXISTS (SELECT 1 FROM outbox_deliveries x WHERE x.id = o.id)
), d AS (
    UPDATE outbox_deliveries x SET state = o.state, next_attempt_at = o.next_attempt_at, lease_until = NULL
    FROM o WHERE x.id = o.id
    RETURNING x.endpoint_id, o.ok
), e AS (
    SELECT d.endpoint_id, bool_or(d.ok) AS ok FROM d GROUP BY d.endpoint_id
)
UPDATE webhook_endpoints w SET
    failing_since = CASE WHEN e.ok THEN NULL ELSE coalesce(w.failing_since, now()) END,
    enabled = w.enabled AND (e.ok OR w.failing_since IS NULL OR w.failing_since > now() - make_interval(secs => @disable_after_seconds::float8)),
    disabled_reason = CASE WHEN w.enabled AND NOT e.ok AND w.failing_since <= now() - make_interval(secs => @disable_after_seconds::float8)
        THEN 'failing' ELSE w.disabled_reason END
FROM e WHERE w.id = e.endpoint_id;
