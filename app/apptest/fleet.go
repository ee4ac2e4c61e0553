package apptest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SeedFleet fills the database with a production-sized history for the console's plans and
// benchmarks: sandboxes sandboxes of 1,000 founders (a project each, rebuilt many times: the
// current sandbox of one in 20 projects runs, one in 20 is starting, one in 20 failed to resume,
// the rest sleep; every earlier one was replaced), events events spread over 30 days (one in a thousand a failed resume), a stretch
// awake and one asleep per sandbox with the open ones of the current sandboxes, 90 days of
// hourly rollups, and 50,000 webhook deliveries. Each table is one INSERT … SELECT.
func SeedFleet(t testing.TB, pool *pgxpool.Pool, sandboxes, events int) {
	t.Helper()
	const founders = 1000
	perProject := max(sandboxes/founders, 1)
	ctx := context.Background()
	start := time.Now()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO users (email, password_hash, credits) SELECT 'fleet-' || g || '@example.com', 'x', 10 FROM generate_series(1, $1) g`, []any{founders}},
		{`INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'Fleet app', 'node server.js', 3000 FROM users WHERE email LIKE 'fleet-%'`, nil},
		{`INSERT INTO versions (project_id, number, source, file_count, total_bytes) SELECT id, 1, 'created', 0, 0 FROM projects WHERE name = 'Fleet app'`, nil},
		{`INSERT INTO builds (project_id, version, kind, status, files_version_id)
			SELECT p.id, g, CASE WHEN g = 1 THEN 'initial' ELSE 'rebuild' END::build_kind, 'ready', v.id
			FROM projects p JOIN versions v ON v.project_id = p.id, generate_series(1, $1) g WHERE p.name = 'Fleet app'`, []any{perProject}},
		// The current sandbox (the newest build) by the project's number; the older ones replaced.
		{`INSERT INTO sandboxes (owner_id, project_id, build_id, deployed_version_id, status, snapshot_kind, provider_id, state_changed_at, created_at,
				killed_at, killed_reason, end_at)
			SELECT p.owner_id, p.id, b.id, b.files_version_id, s.status, CASE WHEN s.status = 'paused' THEN 'memory'::pause_kind END, 'fleet-' || b.id,
				now() - (($1 - b.version) * interval '7 hours') - interval '5 minutes', now() - (($1 - b.version) * interval '7 hours') - interval '1 hour',
				CASE WHEN b.version < $1 THEN now() - (($1 - b.version) * interval '7 hours') END,
				CASE WHEN b.version < $1 THEN 'replaced'::event_reason END, now() + interval '30 minutes'
			FROM projects p JOIN builds b ON b.project_id = p.id
			CROSS JOIN LATERAL (SELECT CASE
				WHEN b.version < $1 THEN 'terminated'
				WHEN abs(hashtext(p.id::text)) % 20 = 0 THEN 'running'
				WHEN abs(hashtext(p.id::text)) % 20 = 1 THEN 'starting'
				WHEN abs(hashtext(p.id::text)) % 20 = 2 THEN 'resume_failed'
				ELSE 'paused' END::sandbox_status AS status) s
			WHERE p.name = 'Fleet app'`, []any{perProject}},
		{`INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, created_at)
			SELECT s.id, e.from_status, e.to_status, e.source, e.reason, now() - (g % (30 * 24 * 60)) * interval '1 minute'
			FROM (SELECT id, row_number() OVER (ORDER BY id) AS n FROM sandboxes WHERE provider_id LIKE 'fleet-%') s
			JOIN generate_series(0, $1 - 1) g ON g % $2 = s.n - 1
			CROSS JOIN LATERAL (SELECT CASE WHEN g % 1000 = 999 THEN 5 ELSE 1 + g % 4 END AS i) k
			CROSS JOIN LATERAL (SELECT (ARRAY['running', 'paused', 'resuming', 'running', 'resuming'])[k.i]::sandbox_status AS from_status,
				(ARRAY['paused', 'resuming', 'running', 'unknown', 'resume_failed'])[k.i]::sandbox_status AS to_status,
				(ARRAY['scheduler', 'user', 'user', 'reconciler', 'user'])[k.i]::event_source AS source,
				(ARRAY['idle', 'resume', 'resumed', 'cannot_verify', 'resume_unreachable'])[k.i]::event_reason AS reason) e`,
			[]any{events, sandboxes}},
		{`INSERT INTO usage_intervals (sandbox_id, kind, started_at, ended_at, counts_until, vcpus, memory_mib)
			SELECT s.id, k.kind, s.created_at + k.off, CASE WHEN s.status IN ('killed', 'expired', 'terminated') OR k.kind <> cur.kind THEN s.created_at + k.off + interval '30 minutes' END,
				CASE WHEN k.kind = 'asleep' THEN s.created_at + k.off + interval '1 hour' END, 2, 512
			FROM sandboxes s
			CROSS JOIN LATERAL (SELECT CASE WHEN s.status IN ('paused', 'resume_failed') THEN 'asleep' ELSE 'awake' END::usage_kind AS kind) cur
			CROSS JOIN LATERAL (VALUES ('awake'::usage_kind, interval '0'), ('asleep'::usage_kind, interval '31 minutes')) k(kind, off)
			WHERE s.provider_id LIKE 'fleet-%'`, nil},
		{`INSERT INTO usage_hours (hour, shard, awake_seconds, awake_vcpu_seconds, awake_gib_seconds, saved_vcpu_seconds, saved_gib_seconds)
			SELECT to_timestamp(floor(extract(epoch FROM now()) / 3600) * 3600) - h * interval '1 hour', sh, 3600, 7200, 1800, 72000, 18000
			FROM generate_series(1, 90 * 24) h, generate_series(0, 15) sh
			ON CONFLICT DO NOTHING`, nil},
		{`INSERT INTO webhook_deliveries (event_id, event_type, headers, body, outcome, received_at, processed_at, event_at)
			SELECT 'fleet-ev-' || g, 'sandbox.lifecycle.paused', '{}', '', 'applied', now() - g * interval '10 seconds',
				now() - g * interval '10 seconds' + interval '30 milliseconds', now() - g * interval '10 seconds' - interval '200 milliseconds'
			FROM generate_series(1, 50000) g`, nil},
		{`ANALYZE`, nil},
	} {
		if _, err := pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("seed the fleet: %v\n%s", err, q.sql)
		}
	}
	t.Logf("seeded %d sandboxes and %d events in %s", sandboxes, events, time.Since(start).Round(time.Millisecond))
}
