-- +goose Up
-- A project's state as every read of it sees it (docs/architecture.md, "Reads and
-- verification"): its newest version's number and file count, whether it is shared, the last
-- good version (the greatest of its sandboxes'), and its current (newest) sandbox with that
-- sandbox's newest change (a visitor's note is not a change), newest event and versions. The
-- queries that read a project's state select from here and join the rows by the ids it names,
-- so the rule is written once. A project never built has no sandbox: its sandbox's columns
-- are NULL
-- (its ids) or 0 (its numbers).
CREATE VIEW project_states AS
SELECT p.id AS project_id, p.owner_id,
       coalesce(cur.file_count, 0)::integer AS file_count,
       coalesce(cur.number, 0)::integer AS current_version,
       coalesce((SELECT max(n.app_good_version) FROM sandboxes n WHERE n.project_id = p.id), 0)::integer AS last_good_version,
       EXISTS (SELECT 1 FROM share_links l WHERE l.project_id = p.id)::boolean AS shared,
       s.id AS sandbox_id,
       coalesce(chg.id, 0)::bigint AS change_event_id,
       coalesce((SELECT max(ev.id) FROM sandbox_events ev WHERE ev.sandbox_id = s.id), 0)::bigint AS latest_event_id,
       coalesce((SELECT v.number FROM versions v WHERE v.id = s.deployed_version_id), 0)::integer AS deployed_number,
       coalesce((SELECT v.number FROM versions v WHERE v.id = s.deploying_version_id), 0)::integer AS deploying_number
FROM projects p
LEFT JOIN LATERAL (SELECT v.number, v.file_count FROM versions v WHERE v.project_id = p.id
    ORDER BY v.number DESC LIMIT 1) cur ON true
-- Laterals, not subqueries in a join's condition: each is computed once per project, however
-- many times the queries that read the view join on its result.
LEFT JOIN LATERAL (SELECT n.id FROM sandboxes n WHERE n.project_id = p.id
    ORDER BY n.created_at DESC LIMIT 1) newest ON true
LEFT JOIN sandboxes s ON s.id = newest.id
LEFT JOIN LATERAL (SELECT max(ev.id) AS id FROM sandbox_events ev WHERE ev.sandbox_id = s.id
    AND NOT (ev.source = 'visitor' AND ev.from_status = ev.to_status)) chg ON true;

-- +goose Down
DROP VIEW project_states;
