-- +goose Up
-- A version's source and a share hit's kind become enums, as the sandboxes' statuses are: the Go
-- code reads and writes them as sqlc's generated types, so a value outside the list cannot be
-- written from Go, and the database refuses one from anywhere else (docs/architecture.md,
-- "Data and SQL").
CREATE TYPE version_source AS ENUM ('created', 'upload', 'api', 'restore');
ALTER TABLE versions DROP CONSTRAINT versions_source_check;
ALTER TABLE versions ALTER COLUMN source TYPE version_source USING source::version_source;

CREATE TYPE share_hit_kind AS ENUM ('wake', 'activity');
ALTER TABLE share_hits DROP CONSTRAINT share_hits_kind_check;
ALTER TABLE share_hits ALTER COLUMN kind TYPE share_hit_kind USING kind::share_hit_kind;

-- +goose Down
ALTER TABLE share_hits ALTER COLUMN kind TYPE text USING kind::text;
ALTER TABLE share_hits ADD CONSTRAINT share_hits_kind_check CHECK (kind IN ('wake', 'activity'));
DROP TYPE share_hit_kind;

ALTER TABLE versions ALTER COLUMN source TYPE text USING source::text;
ALTER TABLE versions ADD CONSTRAINT versions_source_check CHECK (source IN ('created', 'upload', 'api', 'restore'));
DROP TYPE version_source;
