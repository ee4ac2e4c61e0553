-- name: ListProjectEnv :many
-- The project's variables, by name (a secret's sealed value with its key id; its value NULL).
SELECT * FROM project_env WHERE project_id = @project_id ORDER BY name;

-- name: UpsertProjectEnv :exec
-- Sets one variable (envvars checked the batch, inside the transaction that holds the
-- project's lock).
INSERT INTO project_env (project_id, name, secret, value, sealed, key_id, updated_at)
VALUES (@project_id, @name, @secret, sqlc.narg('value'), sqlc.narg('sealed'), sqlc.narg('key_id'), now())
ON CONFLICT (project_id, name) DO UPDATE SET secret = excluded.secret, value = excluded.value,
    sealed = excluded.sealed, key_id = excluded.key_id, updated_at = now();

-- name: DeleteProjectEnv :many
-- Deletes the named variables and returns the names that existed.
DELETE FROM project_env WHERE project_id = @project_id AND name = ANY(@names::text[]) RETURNING name;

-- name: BumpProjectEnvRevision :one
-- A change of the project's variables: the count its previews compare theirs to.
UPDATE projects SET env_revision = env_revision + 1 WHERE id = @id RETURNING env_revision;

-- name: GetProjectEnvRevision :one
SELECT env_revision FROM projects WHERE id = @id;

-- name: ListUsedEnvNames :many
-- Which of names the project's current version's files mention, byte for byte (the page's
-- "not used by any file").
SELECT n.name::text FROM unnest(@names::text[]) AS n(name)
WHERE EXISTS (
    SELECT 1 FROM version_files f
    JOIN versions v ON v.project_id = f.project_id
        AND v.number = (SELECT max(c.number) FROM versions c WHERE c.project_id = f.project_id)
    JOIN blobs b ON b.owner_id = @owner_id AND b.sha256 = f.sha256
    WHERE f.project_id = @project_id AND f.from_number <= v.number AND (f.until_number IS NULL OR f.until_number > v.number)
      AND position(convert_to(n.name, 'UTF8') IN b.content) > 0);

-- name: ListStaleSealedEnv :many
-- The secrets sealed under another key than current_key_id (a rotation's work), a page at a time.
SELECT project_id, name, sealed, key_id FROM project_env
WHERE secret AND key_id <> @current_key_id AND (project_id, name) > (@after_project::uuid, @after_name::text)
ORDER BY project_id, name LIMIT @max_rows;

-- name: ResealProjectEnv :execrows
-- Stores a secret sealed again under the current key, unless it changed since it was read.
UPDATE project_env SET sealed = @sealed, key_id = @key_id
WHERE project_id = @project_id AND name = @name AND secret AND key_id = @old_key_id;

-- name: SetSandboxEnvRevision :exec
-- The variables' count the sandbox's dev server was started with.
UPDATE sandboxes SET env_revision = @env_revision WHERE id = @id;

-- name: ListSealedEnvByProjects :many
-- The secrets of the projects (the app log's redaction), sealed.
SELECT project_id, name, sealed, key_id FROM project_env WHERE secret AND project_id = ANY(@project_ids::uuid[]) ORDER BY project_id, name;
