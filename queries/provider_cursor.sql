-- name: GetProviderCursor :one
SELECT cursor FROM provider_cursor WHERE name = @name;

-- name: UpsertProviderCursor :exec
INSERT INTO provider_cursor (name, cursor) VALUES (@name, @cursor)
ON CONFLICT (name) DO UPDATE SET cursor = excluded.cursor, updated_at = now();
