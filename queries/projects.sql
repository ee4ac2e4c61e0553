-- name: InsertProject :one
INSERT INTO projects (owner_id, name, starter, install_command, start_command, port, pause_kind, reloads_itself)
VALUES (@owner_id, @name, sqlc.narg('starter'), @install_command, @start_command, @port, @pause_kind, @reloads_itself)
RETURNING *;

-- name: GetProjectByOwner :one
-- Ownership is part of the lookup: another founder's project is simply not found.
SELECT * FROM projects WHERE id = @id AND owner_id = @owner_id;

-- name: ListProjectsByOwner :many
SELECT sqlc.embed(projects),
       coalesce(cur.file_count, 0)::integer AS file_count, coalesce(cur.number, 0)::integer AS current_version,
       EXISTS (SELECT 1 FROM share_links l WHERE l.project_id = projects.id)::boolean AS shared
FROM projects
LEFT JOIN LATERAL (SELECT v.number, v.file_count FROM versions v WHERE v.project_id = projects.id
    ORDER BY v.number DESC LIMIT 1) cur ON true
WHERE owner_id = @owner_id ORDER BY created_at DESC, id;

-- name: GetProjectState :one
-- One founder's project as ListProjectsByOwner reads each (a page's, an answer's and the live
-- feed's read: one round trip, docs/architecture.md "Reads and verification"), named by its id
-- or by one of its sandboxes' (another founder's is not found).
SELECT sqlc.embed(projects),
       coalesce(cur.file_count, 0)::integer AS file_count, coalesce(cur.number, 0)::integer AS current_version,
       EXISTS (SELECT 1 FROM share_links l WHERE l.project_id = projects.id)::boolean AS shared
FROM projects
LEFT JOIN LATERAL (SELECT v.number, v.file_count FROM versions v WHERE v.project_id = projects.id
    ORDER BY v.number DESC LIMIT 1) cur ON true
WHERE projects.owner_id = @owner_id AND projects.id = coalesce(sqlc.narg('id')::uuid,
    (SELECT s.project_id FROM sandboxes s WHERE s.id = sqlc.narg('sandbox_id')::uuid AND s.owner_id = @owner_id));

-- name: GetProject :one
-- A project by id alone: for a visitor of its share link, whose link names the project.
SELECT * FROM projects WHERE id = @id;

-- name: CountProjectsByOwnerAndStarter :one
SELECT count(*) FROM projects WHERE owner_id = @owner_id AND starter = @starter;

-- name: LockProjectByOwner :one
-- Serialises builds and versions of one project: concurrent requests queue here. NO KEY: rows
-- that refer to the project (a sandbox written twice in one transaction checks its reference
-- again) are not held up, so a writer here can wait for a sandbox's lock without a deadlock
-- (docs/architecture.md, "Data and SQL").
SELECT * FROM projects WHERE id = @id AND owner_id = @owner_id FOR NO KEY UPDATE;

-- name: SetProjectReloadsItself :one
-- The project's reload choice (docs/states.md, "Versions").
UPDATE projects SET reloads_itself = @reloads_itself WHERE id = @id AND owner_id = @owner_id RETURNING *;
