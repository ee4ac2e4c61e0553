-- +goose Up
-- What every stored line paid for and no read needs (docs/architecture.md, "The app's health"):
-- the index by run (a run's last lines are read through the project's key instead: a project
-- keeps at most 10,000 lines, so that walk is bounded) and the foreign key to projects, checked
-- and locked once per line; the batch's totals row (app_log_totals, which keeps its foreign
-- key) checks the project once per batch, in the same transaction.
DROP INDEX app_log_lines_run_idx;
ALTER TABLE app_log_lines DROP CONSTRAINT app_log_lines_project_id_fkey;

-- +goose Down
ALTER TABLE app_log_lines ADD CONSTRAINT app_log_lines_project_id_fkey
    FOREIGN KEY (project_id) REFERENCES projects (id) ON DELETE CASCADE;
CREATE INDEX app_log_lines_run_idx ON app_log_lines (run_id, seq);
