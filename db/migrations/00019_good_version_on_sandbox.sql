-- +goose Up
-- The newest version whose app was up moves from the project's row to its sandboxes' (the
-- project's is the greatest of them). The app's writer holds the sandbox's lock; writing the
-- project's row as well took the two locks in the order opposite to a new version's (project,
-- then sandbox), and ten versions made at once while the app came up deadlocked
-- (docs/architecture.md, "Data and SQL").
ALTER TABLE sandboxes ADD COLUMN app_good_version integer;
UPDATE sandboxes s SET app_good_version = p.last_good_version
FROM projects p
WHERE p.id = s.project_id AND p.last_good_version IS NOT NULL
  AND s.id = (SELECT n.id FROM sandboxes n WHERE n.project_id = p.id ORDER BY n.created_at DESC LIMIT 1);
ALTER TABLE projects DROP COLUMN last_good_version;

-- +goose Down
ALTER TABLE projects ADD COLUMN last_good_version integer;
UPDATE projects p SET last_good_version = (SELECT max(s.app_good_version) FROM sandboxes s WHERE s.project_id = p.id);
ALTER TABLE sandboxes DROP COLUMN app_good_version;
