-- name: MoveUsageInterval :one
-- At a change of class (ops.Record): ends the sandbox's open stretch (awake or asleep) at @now
-- when @close, and opens the next from @now when @kind is set, in one round trip; the ended
-- stretch is returned (no row when none was open or none was to close). A sleep counts until the
-- lifetime the sandbox had when it was paused ends (@end_at, which a pause leaves as it was), or
-- when the row has none, the start of the stretch awake it leaves plus the lifetime the provider
-- gives at each start; never before @now: a sleep past its lifetime saves nothing. The insert
-- reads the ended stretch, so it runs after the update (the open stretch is unique per sandbox).
WITH closed AS (
    UPDATE usage_intervals u SET ended_at = greatest(u.started_at, @now::timestamptz)
    WHERE u.sandbox_id = @sandbox_id::uuid AND u.ended_at IS NULL AND @close::boolean
    RETURNING *
), opened AS (
    INSERT INTO usage_intervals (sandbox_id, kind, started_at, counts_until, vcpus, memory_mib)
    SELECT @sandbox_id::uuid, sqlc.narg('kind')::usage_kind, @now::timestamptz,
        CASE WHEN sqlc.narg('kind')::usage_kind = 'asleep' THEN greatest(@now::timestamptz,
            coalesce(sqlc.narg('end_at')::timestamptz, c.started_at + make_interval(secs => @lifetime_seconds::integer))) END,
        @vcpus::integer, @memory_mib::integer
    FROM (SELECT) one LEFT JOIN closed c ON true
    WHERE sqlc.narg('kind')::usage_kind IS NOT NULL
)
SELECT * FROM closed;

-- name: AddUsageHours :exec
-- Adds a closed stretch's hours (ops.Split) to the rollup. The hours come in ascending order, so
-- two transactions adding to the same rows lock them in the same order.
INSERT INTO usage_hours AS h (hour, shard, awake_seconds, awake_vcpu_seconds, awake_gib_seconds, saved_vcpu_seconds, saved_gib_seconds)
SELECT unnest(@hours::timestamptz[]), @shard::smallint, unnest(@awake_seconds::float8[]), unnest(@awake_vcpu_seconds::float8[]),
    unnest(@awake_gib_seconds::float8[]), unnest(@saved_vcpu_seconds::float8[]), unnest(@saved_gib_seconds::float8[])
ON CONFLICT (hour, shard) DO UPDATE SET
    awake_seconds      = h.awake_seconds + excluded.awake_seconds,
    awake_vcpu_seconds = h.awake_vcpu_seconds + excluded.awake_vcpu_seconds,
    awake_gib_seconds  = h.awake_gib_seconds + excluded.awake_gib_seconds,
    saved_vcpu_seconds = h.saved_vcpu_seconds + excluded.saved_vcpu_seconds,
    saved_gib_seconds  = h.saved_gib_seconds + excluded.saved_gib_seconds;

-- name: ListSandboxUsage :many
-- One sandbox's stretches, for its cost and savings so far.
SELECT * FROM usage_intervals WHERE sandbox_id = @sandbox_id ORDER BY started_at, id;

-- name: SumUsageHours :many
-- Closed stretches' totals since each of the given instants, from the hourly rollup, each row
-- named by its instant's place in the list (1 for the first). The hour that holds an instant
-- counts for the share of it after the instant.
SELECT p.i::integer AS i,
    coalesce(sum(h.awake_vcpu_seconds * w.w), 0)::float8 AS awake_vcpu_seconds,
    coalesce(sum(h.awake_gib_seconds * w.w), 0)::float8 AS awake_gib_seconds,
    coalesce(sum(h.saved_vcpu_seconds * w.w), 0)::float8 AS saved_vcpu_seconds,
    coalesce(sum(h.saved_gib_seconds * w.w), 0)::float8 AS saved_gib_seconds
FROM unnest(@since::timestamptz[]) WITH ORDINALITY AS p(since, i)
LEFT JOIN usage_hours h ON h.hour > p.since - interval '1 hour'
CROSS JOIN LATERAL (SELECT CASE WHEN h.hour < p.since
    THEN extract(epoch FROM h.hour + interval '1 hour' - p.since)::float8 / 3600 ELSE 1 END AS w) w
GROUP BY p.i;

-- name: SumOpenUsage :many
-- Open stretches' totals since each of the given instants until now (a sleep until its
-- counts_until at most), by kind, each row named by its instant's place in the list.
SELECT p.i::integer AS i, u.kind,
    coalesce(sum(u.vcpus * s.seconds), 0)::float8 AS vcpu_seconds,
    coalesce(sum(u.memory_mib / 1024.0 * s.seconds), 0)::float8 AS gib_seconds
FROM unnest(@since::timestamptz[]) WITH ORDINALITY AS p(since, i)
JOIN usage_intervals u ON u.ended_at IS NULL
CROSS JOIN LATERAL (SELECT greatest(0, extract(epoch FROM least(@now::timestamptz, coalesce(u.counts_until, @now::timestamptz))
    - greatest(u.started_at, p.since)))::float8 AS seconds) s
GROUP BY p.i, u.kind;

-- name: SumAwakeNow :one
-- What is awake right now (the provider bills it): how many, and their size.
SELECT count(*)::bigint AS sandboxes, coalesce(sum(vcpus), 0)::bigint AS vcpus, coalesce(sum(memory_mib), 0)::bigint AS memory_mib
FROM usage_intervals WHERE ended_at IS NULL AND kind = 'awake';

-- name: ListUsageByHour :many
-- The rollup per hour since an instant, all shards together: the console's chart.
SELECT hour, sum(awake_seconds)::float8 AS awake_seconds, sum(awake_vcpu_seconds)::float8 AS awake_vcpu_seconds,
    sum(awake_gib_seconds)::float8 AS awake_gib_seconds
FROM usage_hours WHERE hour >= @since::timestamptz
GROUP BY hour ORDER BY hour;

-- name: ListOpenAwakeByHour :many
-- The open awake stretches' share of each hour since an instant (they reach the rollup only when
-- they close): the chart's newest hours. since is the start of an hour. The stretches are read
-- first, on their own, so the plan reads them from their index once.
WITH open AS MATERIALIZED (
    SELECT started_at, vcpus, memory_mib FROM usage_intervals WHERE ended_at IS NULL AND kind = 'awake'
)
SELECT g.hour::timestamptz AS hour, sum(s.seconds)::float8 AS awake_seconds, sum(u.vcpus * s.seconds)::float8 AS awake_vcpu_seconds,
    sum(u.memory_mib / 1024.0 * s.seconds)::float8 AS awake_gib_seconds
FROM generate_series(@since::timestamptz, @now::timestamptz, interval '1 hour') AS g(hour)
JOIN open u ON u.started_at < g.hour + interval '1 hour'
CROSS JOIN LATERAL (SELECT greatest(0, extract(epoch FROM least(g.hour + interval '1 hour', @now::timestamptz)
    - greatest(g.hour, u.started_at)))::float8 AS seconds) s
GROUP BY g.hour ORDER BY g.hour;
