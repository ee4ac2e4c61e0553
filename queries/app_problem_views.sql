-- The founder's pages' reads of the app's problems (overview's ProjectView, the build page's
-- Logs panel); applog writes them (queries/app_logs.sql).

-- name: CountOpenProblemsByOwner :many
-- Each of the founder's projects with open problems, and how many: the cards' counts.
SELECT p.project_id, count(*)::bigint AS open
FROM app_problems p JOIN projects pr ON pr.id = p.project_id
WHERE pr.owner_id = @owner_id AND p.closed_at IS NULL
GROUP BY p.project_id;

-- name: CountOpenProblems :one
SELECT count(*)::bigint FROM app_problems WHERE project_id = @project_id AND closed_at IS NULL;

-- name: GetOpenProblemOfVersion :one
-- The newest open problem of the app or the install of a version: what the pane says of a
-- version that does not start.
SELECT * FROM app_problems
WHERE project_id = @project_id AND version = @version AND closed_at IS NULL AND source IN ('app', 'install')
ORDER BY last_seen DESC, id LIMIT 1;

-- name: ListNewestAppLogLines :many
-- A project's newest lines, newest first: the build page's Logs panel without JavaScript.
SELECT seq, at, sandbox_id, version, source, stream, text FROM app_log_lines
WHERE project_id = @project_id
ORDER BY seq DESC LIMIT @max_lines;
