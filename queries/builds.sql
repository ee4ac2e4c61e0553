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
UPDATE builds SET status = @status, stage = '', failure_code = sqlc.narg('failure_code'), failure_detail = @failure_detail,
    failure_command = @failure_command, failure_exit_code = sqlc.narg('failure_exit_code'), failure_port = sqlc.narg('failure_port'),
    failure_limit_ms = sqlc.narg('failure_limit_ms'), finished_at = now()
WHERE id = @id AND status IN ('queued', 'building');
