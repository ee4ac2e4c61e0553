-- name: InsertProject :one
INSERT INTO projects (owner_id, name, starter, install_command, start_command, port, pause_kind)
VALUES (@owner_id, @name, sqlc.narg('starter'), @install_command, @start_command, @port, @pause_kind)
RETURNING *;

-- name: GetProjectByOwner :one
-- Ownership is part of the lookup: another founder's project is simply not found.
SELECT * FROM projects WHERE id = @id AND owner_id = @owner_id;

-- name: ListProjectsByOwner :many
SELECT sqlc.embed(projects),
       (SELECT count(*) FROM project_files f WHERE f.project_id = projects.id)::integer AS file_count,
       EXISTS (SELECT 1 FROM share_links l WHERE l.project_id = projects.id)::boolean AS shared
FROM projects WHERE owner_id = @owner_id ORDER BY created_at DESC, id;

-- name: IsProjectShared :one
-- Whether the project has a share link on.
SELECT EXISTS (SELECT 1 FROM share_links WHERE project_id = @project_id)::boolean;

-- name: GetProject :one
-- A project by id alone: for a visitor of its share link, whose link names the project.
SELECT * FROM projects WHERE id = @id;

-- name: InsertProjectFiles :copyfrom
-- sha256 is the content's, computed once by the caller as the files are stored.
INSERT INTO project_files (project_id, path, content, sha256) VALUES (@project_id, @path, @content, @sha256);

-- name: ListProjectFiles :many
-- Paths and sizes only: the project page lists files without loading them.
SELECT path, length(content)::integer AS size
FROM project_files WHERE project_id = @project_id ORDER BY path;

-- name: CountProjectsByOwnerAndStarter :one
SELECT count(*) FROM projects WHERE owner_id = @owner_id AND starter = @starter;

-- name: LockProjectByOwner :one
-- Serialises builds of one project: concurrent build and rebuild requests queue here.
SELECT * FROM projects WHERE id = @id AND owner_id = @owner_id FOR UPDATE;
