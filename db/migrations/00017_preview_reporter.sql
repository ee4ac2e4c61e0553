-- +goose Up
-- The project's switch of the preview's error reporter (docs/architecture.md, "The preview
-- proxy"): on, the proxy in front of the app adds the reporter to its pages; off, it passes
-- them untouched.
ALTER TABLE projects ADD COLUMN preview_reporter boolean NOT NULL DEFAULT true;

-- +goose Down
ALTER TABLE projects DROP COLUMN preview_reporter;
