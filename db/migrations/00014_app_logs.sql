-- +goose Up
-- What the app in a preview said, line by line (docs/architecture.md, "The app's health"): the
-- output of the install and of every dev server run. Keyed by project and a global sequence,
-- the cursor of the API's reads and of the log stream's Last-Event-ID. No foreign key to the
-- sandbox: a line outlives its sandbox's row changes, and ingest checks one key, the project's.
CREATE TABLE app_log_lines (
    project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    seq        bigserial,
    sandbox_id uuid NOT NULL,
    version    integer NOT NULL,
    -- One run of a program (applog.Run.ID): a problem's detail is its own run's lines.
    run_id     uuid NOT NULL,
    source     text NOT NULL CHECK (source IN ('install', 'app')),
    stream     text NOT NULL CHECK (stream IN ('stdout', 'stderr')),
    at         timestamptz NOT NULL,
    text       text NOT NULL,
    -- Counted once at insert, so the trim sums integers and never reads (or detoasts) a text.
    bytes      integer GENERATED ALWAYS AS (octet_length(text)) STORED,
    PRIMARY KEY (project_id, seq)
);
CREATE INDEX app_log_lines_run_idx ON app_log_lines (run_id, seq);

-- Each project's stored lines and bytes, kept by the insert's own statement, so the trim knows
-- at no cost whether a project is over its bounds and runs only then.
CREATE TABLE app_log_totals (
    project_id uuid PRIMARY KEY REFERENCES projects (id) ON DELETE CASCADE,
    lines      bigint NOT NULL,
    bytes      bigint NOT NULL
);

-- What broke, deduplicated: one row per project and fingerprint (source, version and the
-- message with its numbers and ids taken out); a repeat bumps count and last_seen and opens the
-- row again. A newer version that is up closes every older version's row (closed_at).
CREATE TABLE app_problems (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    project_id  uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    source      text NOT NULL CHECK (source IN ('install', 'app', 'browser')),
    version     integer NOT NULL,
    fingerprint bytea NOT NULL,
    message     text NOT NULL,
    detail      text NOT NULL,
    sandbox_id  uuid NOT NULL,
    count       bigint NOT NULL DEFAULT 1,
    first_seen  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz NOT NULL DEFAULT now(),
    closed_at   timestamptz,
    UNIQUE (project_id, fingerprint)
);
CREATE INDEX app_problems_project_idx ON app_problems (project_id, last_seen DESC);

-- +goose Down
DROP TABLE app_problems;
DROP TABLE app_log_totals;
DROP TABLE app_log_lines;
