-- +goose Up
CREATE TABLE users (
    id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    -- Stored lower-cased so the unique constraint is case-insensitive.
    email         text NOT NULL CHECK (email = lower(email) AND length(email) BETWEEN 3 AND 254),
    password_hash text NOT NULL,
    credits       integer NOT NULL CHECK (credits >= 0),
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_email_key UNIQUE (email)
);

-- The scs pgxstore table, with the schema pgxstore expects.
CREATE TABLE sessions (
    token  text PRIMARY KEY,
    data   bytea NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_idx ON sessions (expiry);

-- Failed logins, kept in the database so the limit holds across instances.
CREATE TABLE login_failures (
    id         bigserial PRIMARY KEY,
    email      text NOT NULL,
    ip         text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_email_idx ON login_failures (email, created_at);
CREATE INDEX login_failures_ip_idx ON login_failures (ip, created_at);

CREATE TYPE pause_kind AS ENUM ('memory', 'filesystem');

CREATE TABLE projects (
    id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_id        uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name            text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    -- The bundled starter it came from, or NULL for uploaded files.
    starter         text,
    install_command text NOT NULL DEFAULT '',
    start_command   text NOT NULL CHECK (start_command <> ''),
    port            integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    pause_kind      pause_kind NOT NULL DEFAULT 'memory',
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX projects_owner_idx ON projects (owner_id, created_at);

-- The project's current source files; each build copies them (see builds).
CREATE TABLE project_files (
    project_id uuid NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    path       text NOT NULL,
    content    bytea NOT NULL,
    PRIMARY KEY (project_id, path)
);

-- +goose Down
DROP TABLE project_files;
DROP TABLE projects;
DROP TYPE pause_kind;
DROP TABLE login_failures;
DROP TABLE sessions;
DROP TABLE users;
