-- name: InsertBuild :one
-- The next version of the project's build.
INSERT INTO builds (project_id, version, kind, files_version_id)
VALUES (@project_id, (SELECT coalesce(max(version), 0) + 1 FROM builds WHERE project_id = @project_id), @kind, @files_version_id)
RETURNING *;

-- name: GetBuild :one
SELECT * FROM builds WHERE id = @id;

-- name: GetLatestBuild :one
SELECT * FROM builds WHERE project_id = @project_id ORDER BY version DESC LIMIT 1;

-- name: SetBuildStage :exec
UPDATE builds SET status = 'building', stage = @stage WHERE id = @id AND status IN ('queued', 'building');

-- name: FinishBuild :execrows
-- Zero rows: the build had finished already (it is finished once).
UPDATE builds SET status = @status, stage = '', error = @error, finished_at = now()
WHERE id = @id AND status IN ('queued', 'building');
