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
