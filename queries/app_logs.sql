-- name: CopyAppLogLines :copyfrom
-- One batch of lines, of any number of projects, in one COPY (applog.Writer); AddAppLogTotals
-- follows it in the same transaction.
INSERT INTO app_log_lines (project_id, sandbox_id, version, run_id, source, stream, at, text)
VALUES (@project_id, @sandbox_id, @version, @run_id, @source, @stream, @at, @text);

-- name: AddAppLogTotals :many
-- The batch's lines and bytes per project, added to each project's totals, which say whether its
-- trim must run (TrimAppLogLines). The writer sorts the projects, so two writers lock their
-- totals rows in the same order.
INSERT INTO app_log_totals AS t (project_id, lines, bytes)
SELECT unnest(@project_ids::uuid[]), unnest(@lines::bigint[]), unnest(@bytes::bigint[])
ON CONFLICT (project_id) DO UPDATE SET lines = t.lines + excluded.lines, bytes = t.bytes + excluded.bytes
RETURNING t.project_id, t.lines, t.bytes;

-- name: TrimAppLogLines :exec
-- Deletes each listed project's oldest lines until its newest max_lines and max_bytes remain.
-- The cut is found walking from the oldest line (the window is computed in seq order and the
-- first row that leaves the project within bounds stops the walk), so a trim reads the lines it
-- deletes and no more.
WITH cut AS (
    SELECT p.id AS project_id, c.seq, c.n, c.b
    FROM unnest(@project_ids::uuid[]) AS p(id)
    JOIN app_log_totals t ON t.project_id = p.id
    CROSS JOIN LATERAL (
        SELECT o.seq, o.n, o.b FROM (
            SELECT l.seq, row_number() OVER w AS n, sum(l.bytes) OVER w AS b
            FROM app_log_lines l WHERE l.project_id = p.id
            WINDOW w AS (ORDER BY l.seq)
        ) o
        WHERE t.lines - o.n <= @max_lines::bigint AND t.bytes - o.b <= @max_bytes::bigint
        ORDER BY o.seq LIMIT 1
    ) c
), del AS (
    DELETE FROM app_log_lines l USING cut WHERE l.project_id = cut.project_id AND l.seq <= cut.seq
)
UPDATE app_log_totals t SET lines = t.lines - cut.n, bytes = t.bytes - cut.b
FROM cut WHERE t.project_id = cut.project_id;

-- name: ListAppLogLines :many
-- A project's lines after a cursor, oldest first.
SELECT seq, at, sandbox_id, version, source, stream, text FROM app_log_lines
WHERE project_id = @project_id AND seq > @after
ORDER BY seq LIMIT @max_lines;

-- name: ListRunLastLines :many
-- A run's newest lines, newest first: an exit's problem is told from its own run's output only.
-- Read through the project's key, newest first: the run is its project's latest, or nearly, and
-- a project keeps at most 10,000 lines (no index by run: every line would pay for it).
SELECT seq, stream, text FROM app_log_lines
WHERE project_id = @project_id AND run_id = @run_id ORDER BY seq DESC LIMIT @max_lines;

-- name: CountAppLogLines :one
SELECT count(*)::bigint AS lines, coalesce(sum(bytes), 0)::bigint AS bytes
FROM app_log_lines WHERE project_id = @project_id;

-- name: OwnsProject :one
SELECT EXISTS (SELECT 1 FROM projects WHERE id = @id AND owner_id = @owner_id)::boolean;

-- name: UpsertAppProblem :one
-- A problem seen: a new row, or the same one (its fingerprint) again, counted, with the newest
-- message and detail, and open again.
INSERT INTO app_problems AS p (project_id, source, version, fingerprint, message, detail, sandbox_id)
VALUES (@project_id, @source, @version, @fingerprint, @message, @detail, @sandbox_id)
ON CONFLICT (project_id, fingerprint) DO UPDATE SET count = p.count + 1, last_seen = now(),
    message = excluded.message, detail = excluded.detail, sandbox_id = excluded.sandbox_id, closed_at = NULL
RETURNING *, (xmax = 0)::boolean AS created;

-- name: TrimAppProblems :exec
-- A project keeps its newest max_problems problems: distinct messages cannot grow the table.
DELETE FROM app_problems d WHERE d.project_id = @project_id AND d.id NOT IN (
    SELECT k.id FROM app_problems k WHERE k.project_id = d.project_id ORDER BY k.last_seen DESC LIMIT @max_problems);

-- name: CloseAppProblems :many
-- A newer version is up: every open problem of an older version is over.
UPDATE app_problems SET closed_at = now()
WHERE project_id = @project_id AND version < @up_version AND closed_at IS NULL
RETURNING id, version;

-- name: ListAppProblems :many
SELECT * FROM app_problems WHERE project_id = @project_id ORDER BY last_seen DESC, id;

-- name: GetReportTarget :one
-- Where a browser's report about a sandbox goes: its project and the version its preview runs
-- (its app's version; the files it was last given before the app was ever seen), for its owner only.
SELECT s.project_id, coalesce(s.app_version, (SELECT v.number FROM versions v WHERE v.id = s.deployed_version_id), 0)::integer AS version
FROM sandboxes s WHERE s.id = @sandbox_id AND s.owner_id = @owner_id;

-- name: GetProjectReportTarget :one
-- The same for a share link's visitor, who sees the project's current (newest) sandbox.
SELECT s.id AS sandbox_id, coalesce(s.app_version, (SELECT v.number FROM versions v WHERE v.id = s.deployed_version_id), 0)::integer AS version
FROM sandboxes s WHERE s.project_id = @project_id ORDER BY s.created_at DESC LIMIT 1;

-- name: NotifyAppLogs :exec
-- One notification per batch and group of projects (applog.Writer), delivered at commit.
SELECT pg_notify('sandman_applog', x) FROM unnest(@payloads::text[]) AS x;
