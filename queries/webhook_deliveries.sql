-- name: InsertWebhookDelivery :one
-- A repeated event id (the provider's retry, with a new delivery id) inserts nothing.
INSERT INTO webhook_deliveries (event_id, delivery_id, event_type, headers, body, event_at)
VALUES (@event_id, @delivery_id, @event_type, @headers, @body, sqlc.narg('event_at'))
ON CONFLICT (event_id) DO NOTHING
RETURNING id;

-- name: GetWebhookDelivery :one
SELECT * FROM webhook_deliveries WHERE id = @id;

-- name: SetWebhookDeliveryOutcome :exec
UPDATE webhook_deliveries SET outcome = @outcome, processed_at = now() WHERE id = @id;

-- name: InsertWebhookDeliveries :many
-- A group of deliveries (lifecycle's group commit) in one statement, each event id once: the
-- ids of the events not stored before. An event without a time has the zero time, stored NULL.
-- Each is stored processed, with the outcome its group expects of it; the group's transaction
-- corrects the ones that had another (SetWebhookDeliveryOutcomes) before it commits.
INSERT INTO webhook_deliveries (event_id, delivery_id, event_type, headers, body, event_at, outcome, processed_at)
SELECT unnest(@event_ids::text[]), unnest(@delivery_ids::text[]), unnest(@event_types::text[]), unnest(@headers::jsonb[]),
    unnest(@bodies::bytea[]), nullif(unnest(@event_ats::timestamptz[]), '0001-01-01 00:00:00+00'),
    unnest(@outcomes::text[])::webhook_outcome, now()
ON CONFLICT (event_id) DO NOTHING
RETURNING id, event_id;

-- name: SetWebhookDeliveryOutcomes :exec
UPDATE webhook_deliveries d SET outcome = o.outcome::webhook_outcome, processed_at = now()
FROM (SELECT unnest(@ids::bigint[]) AS id, unnest(@outcomes::text[]) AS outcome) o
WHERE d.id = o.id;
