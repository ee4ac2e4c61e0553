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
-- One founder's project as ListProjectsByOwner reads each (a page's and an answer's read,
-- docs/architecture.md "Reads and verification"; another founder's is not found).
SELECT sqlc.embed(projects),
       coalesce(cur.file_count, 0)::integer AS file_count, coalesce(cur.number, 0)::integer AS current_version,
       coalesce((SELECT max(n.app_good_version) FROM sandboxes n WHERE n.project_id = projects.id), 0)::integer AS last_good_version,
       EXISTS (SELECT 1 FROM share_links l WHERE l.project_id = projects.id)::boolean AS shared
FROM projects
LEFT JOIN LATERAL (SELECT v.number, v.file_count FROM versions v WHERE v.project_id = projects.id
    ORDER BY v.number DESC LIMIT 1) cur ON true
WHERE projects.owner_id = @owner_id AND projects.id = @id;

-- name: GetProjectStateOfSandbox :one
-- What GetProjectState and GetCurrentSandboxState read together, in one round trip, for the
-- project one of the founder's sandboxes (x) belongs to: the JSON status read's, an action's
-- answer's and the live feed's. The current sandbox is the project's newest (x, or a later one);
-- every sandbox has its build and its first event from its creation, so the joins always hold.
-- With the founder's balance: the live feed draws the header's from the same read.
SELECT sqlc.embed(projects), u.credits AS owner_credits,
       coalesce(cur.file_count, 0)::integer AS file_count, coalesce(cur.number, 0)::integer AS current_version,
       coalesce((SELECT max(n.app_good_version) FROM sandboxes n WHERE n.project_id = projects.id), 0)::integer AS last_good_version,
       EXISTS (SELECT 1 FROM share_links l WHERE l.project_id = projects.id)::boolean AS shared,
       sqlc.embed(s), sqlc.embed(b), sqlc.embed(e),
       (SELECT max(ev.id) FROM sandbox_events ev WHERE ev.sandbox_id = s.id)::bigint AS latest_event_id,
       (SELECT v.number FROM versions v WHERE v.id = s.deployed_version_id)::integer AS deployed_number,
       coalesce((SELECT v.number FROM versions v WHERE v.id = s.deploying_version_id), 0)::integer AS deploying_number
FROM sandboxes x
JOIN projects ON projects.id = x.project_id AND projects.owner_id = @owner_id
JOIN users u ON u.id = projects.owner_id
LEFT JOIN LATERAL (SELECT v.number, v.file_count FROM versions v WHERE v.project_id = projects.id
    ORDER BY v.number DESC LIMIT 1) cur ON true
JOIN sandboxes s ON s.id = (SELECT n.id FROM sandboxes n WHERE n.project_id = projects.id
    ORDER BY n.created_at DESC LIMIT 1)
JOIN builds b ON b.id = s.build_id
JOIN sandbox_events e ON e.id = (SELECT max(ev.id) FROM sandbox_events ev WHERE ev.sandbox_id = s.id
    AND NOT (ev.source = 'visitor' AND ev.from_status = ev.to_status))
WHERE x.id = @sandbox_id AND x.owner_id = @owner_id;

-- name: ListProjectStatesByOwner :many
-- The dashboard's read in one round trip: each of the founder's projects that has a sandbox,
-- as GetProjectStateOfSandbox reads it (its newest sandbox with its build, newest change and
-- versions), in ListProjectsByOwner's order; how many projects the founder has in all (fewer
-- rows than that means some were never built: lifecycle.Projects then reads the list); and the
-- founder's credits, the page header's balance.
SELECT sqlc.embed(projects),
       coalesce(cur.file_count, 0)::integer AS file_count, coalesce(cur.number, 0)::integer AS current_version,
       coalesce((SELECT max(n.app_good_version) FROM sandboxes n WHERE n.project_id = projects.id), 0)::integer AS last_good_version,
       EXISTS (SELECT 1 FROM share_links l WHERE l.project_id = projects.id)::boolean AS shared,
       sqlc.embed(s), sqlc.embed(b), sqlc.embed(e),
       (SELECT max(ev.id) FROM sandbox_events ev WHERE ev.sandbox_id = s.id)::bigint AS latest_event_id,
       (SELECT v.number FROM versions v WHERE v.id = s.deployed_version_id)::integer AS deployed_number,
       coalesce((SELECT v.number FROM versions v WHERE v.id = s.deploying_version_id), 0)::integer AS deploying_number,
       (SELECT count(*) FROM projects o WHERE o.owner_id = @owner_id)::integer AS project_count,
       (SELECT u.credits FROM users u WHERE u.id = @owner_id)::integer AS credits
FROM projects
LEFT JOIN LATERAL (SELECT v.number, v.file_count FROM versions v WHERE v.project_id = projects.id
    ORDER BY v.number DESC LIMIT 1) cur ON true
JOIN sandboxes s ON s.id = (SELECT n.id FROM sandboxes n WHERE n.project_id = projects.id
    ORDER BY n.created_at DESC LIMIT 1)
JOIN builds b ON b.id = s.build_id
JOIN sandbox_events e ON e.id = (SELECT max(ev.id) FROM sandbox_events ev WHERE ev.sandbox_id = s.id
    AND NOT (ev.source = 'visitor' AND ev.from_status = ev.to_status))
WHERE projects.owner_id = @owner_id ORDER BY projects.created_at DESC, projects.id;

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
