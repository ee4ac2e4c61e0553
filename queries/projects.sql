-- name: InsertProject :one
INSERT INTO projects (owner_id, name, starter, install_command, start_command, port, pause_kind, reloads_itself)
VALUES (@owner_id, @name, sqlc.narg('starter'), @install_command, @start_command, @port, @pause_kind, @reloads_itself)
RETURNING *;

-- name: GetProjectByOwner :one
-- Ownership is part of the lookup: another founder's project is simply not found.
SELECT * FROM projects WHERE id = @id AND owner_id = @owner_id;

-- name: ListProjectsByOwner :many
-- The founder's projects, newest first, each with its state (project_states; the current
-- sandbox's ids are NULL for a project never built).
SELECT sqlc.embed(projects), sqlc.embed(st)
FROM project_states st JOIN projects ON projects.id = st.project_id
WHERE st.owner_id = @owner_id ORDER BY projects.created_at DESC, projects.id;

-- name: GetProjectState :one
-- One founder's project as ListProjectsByOwner reads each (a page's and an answer's read,
-- docs/architecture.md "Reads and verification"; another founder's is not found).
SELECT sqlc.embed(projects), sqlc.embed(st)
FROM project_states st JOIN projects ON projects.id = st.project_id
WHERE st.owner_id = @owner_id AND st.project_id = @id;

-- name: GetProjectStateOfSandbox :one
-- The state of the project one of the founder's sandboxes (x) belongs to, with its current
-- sandbox's rows (x, or a later one; every sandbox has its build and its first event from its
-- creation, so the joins always hold), in one round trip: the JSON status read's, an action's
-- answer's and the live feed's. With the founder's balance: the live feed draws the header's
-- from the same read.
SELECT sqlc.embed(projects), u.credits AS owner_credits, sqlc.embed(st),
       sqlc.embed(s), sqlc.embed(b), sqlc.embed(e)
FROM sandboxes x
JOIN project_states st ON st.project_id = x.project_id AND st.owner_id = @owner_id
JOIN projects ON projects.id = st.project_id
JOIN users u ON u.id = projects.owner_id
JOIN sandboxes s ON s.id = st.sandbox_id
JOIN builds b ON b.id = s.build_id
JOIN sandbox_events e ON e.id = st.change_event_id
WHERE x.id = @sandbox_id AND x.owner_id = @owner_id;

-- name: ListProjectStatesByOwner :many
-- The dashboard's read in one round trip: each of the founder's projects that has a sandbox,
-- with its state and its current sandbox's rows (as GetProjectStateOfSandbox reads them), in
-- ListProjectsByOwner's order; how many projects the founder has in all (fewer rows than that
-- means some were never built: overview.Projects then reads the list); and the founder's
-- credits, the page header's balance.
SELECT sqlc.embed(projects), sqlc.embed(st), sqlc.embed(s), sqlc.embed(b), sqlc.embed(e),
       (SELECT count(*) FROM projects o WHERE o.owner_id = @owner_id)::integer AS project_count,
       (SELECT u.credits FROM users u WHERE u.id = @owner_id)::integer AS credits
FROM project_states st
JOIN projects ON projects.id = st.project_id
JOIN sandboxes s ON s.id = st.sandbox_id
JOIN builds b ON b.id = s.build_id
JOIN sandbox_events e ON e.id = st.change_event_id
WHERE st.owner_id = @owner_id ORDER BY projects.created_at DESC, projects.id;

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

-- name: SetProjectPreviewReporter :one
-- The project's preview reporter switch (docs/architecture.md, "The preview proxy").
UPDATE projects SET preview_reporter = @preview_reporter WHERE id = @id AND owner_id = @owner_id RETURNING *;

-- name: CountProjectsByOwner :one
SELECT count(*)::integer FROM projects WHERE owner_id = @owner_id;
