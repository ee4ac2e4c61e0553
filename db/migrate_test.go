package db_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"sandman/db"
	"sandman/db/dbtest"
	"sandman/sandbox"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func TestMigrateEmptyDatabaseIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.EmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := range 2 {
		if err := db.Migrate(ctx, pool); err != nil {
			t.Fatalf("migrate run %d: %v", i+1, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM goose_db_version WHERE is_applied AND version_id > 0").Scan(&n); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir("migrations")
	if n != len(files) {
		t.Fatalf("applied %d migrations, have %d files", n, len(files))
	}
}

func TestConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	q := db.New(pool)
	if _, err := q.InsertUser(ctx, db.InsertUserParams{Email: "a@example.com", PasswordHash: "x", Credits: 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		params db.InsertUserParams
		want   func(error) bool
	}{
		{"duplicate email", db.InsertUserParams{Email: "a@example.com", PasswordHash: "x", Credits: 1},
			func(err error) bool { return db.IsConstraint(err, "users_email_key") }},
		{"negative credits", db.InsertUserParams{Email: "b@example.com", PasswordHash: "x", Credits: -1},
			func(err error) bool { return db.IsConstraint(err, "users_credits_check") }},
		{"upper-case email", db.InsertUserParams{Email: "C@example.com", PasswordHash: "x", Credits: 1},
			func(err error) bool { return db.IsConstraint(err, "users_email_check") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := q.InsertUser(ctx, tt.params)
			if err == nil || !tt.want(err) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// TestIntegrityMigrationDigestsStoredFiles applies the migrations up to the one before the
// integrity check, stores files as Sandman did then (no digest), and migrates on: every stored
// file gets the SHA-256 Sandman computes for new ones, and the sandboxes made before have never
// been looked at.
func TestIntegrityMigrationDigestsStoredFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.EmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 4); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"server.js": []byte("console.log('hi')\n"), "empty.txt": {}, "bin/x": {0, 1, 2, 255}}
	_, err = pool.Exec(ctx, `
		WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ('m@example.com', 'x', 1) RETURNING id),
		     p AS (INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING id, owner_id),
		     b AS (INSERT INTO builds (project_id, version, kind) SELECT id, 1, 'initial' FROM p RETURNING id, project_id),
		     s AS (INSERT INTO sandboxes (owner_id, project_id, build_id) SELECT p.owner_id, p.id, b.id FROM p, b RETURNING id),
		     pf AS (INSERT INTO project_files (project_id, path, content) SELECT p.id, f.path, f.content FROM p,
		            unnest($1::text[], $2::bytea[]) AS f(path, content))
		INSERT INTO build_files (build_id, path, content) SELECT b.id, f.path, f.content FROM b, unnest($1::text[], $2::bytea[]) AS f(path, content)`,
		[]string{"server.js", "empty.txt", "bin/x"}, [][]byte{files["server.js"], files["empty.txt"], files["bin/x"]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"project_files", "build_files"} {
		rows, err := pool.Query(ctx, "SELECT path, sha256 FROM "+table)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var path string
			var sum []byte
			if err := rows.Scan(&path, &sum); err != nil {
				t.Fatal(err)
			}
			if want := sha256.Sum256(files[path]); !bytes.Equal(sum, want[:]) {
				t.Errorf("%s %s: sha256 %x, want %x", table, path, sum, want)
			}
			n++
		}
		if rows.Err() != nil || n != len(files) {
			t.Fatalf("%s: %d rows (%v)", table, n, rows.Err())
		}
	}
	var seen *time.Time
	var changed []string
	if err := pool.QueryRow(ctx, "SELECT files_seen_at, app_changed_files FROM sandboxes").Scan(&seen, &changed); err != nil {
		t.Fatal(err)
	}
	if seen != nil || len(changed) != 0 {
		t.Fatalf("a sandbox from before the migration: files seen at %v, app changed %q; want never looked at", seen, changed)
	}
}

// TestVersionsMigrationMakesStoredFilesVersionOne stores a project's files as Sandman did before
// versions, with a build and its sandbox, and migrates on: the files are the project's version 1
// (content once per founder, the same digests), the build builds it, the sandbox runs it, and the
// copies are gone.
func TestVersionsMigrationMakesStoredFilesVersionOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.EmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"server.js": []byte("console.log('hi')\n"), "empty.txt": {}, "bin/x": {0, 1, 2, 255}, "copy.js": []byte("console.log('hi')\n")}
	paths := []string{"server.js", "empty.txt", "bin/x", "copy.js"}
	contents := [][]byte{files["server.js"], files["empty.txt"], files["bin/x"], files["copy.js"]}
	_, err = pool.Exec(ctx, `
		WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ('v@example.com', 'x', 1) RETURNING id),
		     p AS (INSERT INTO projects (owner_id, name, start_command, port, starter) SELECT id, 'p', 'node dev-server.js', 5173, 'static' FROM u RETURNING id, owner_id),
		     b AS (INSERT INTO builds (project_id, version, kind) SELECT id, v, 'initial' FROM p, generate_series(1, 2) v RETURNING id, project_id),
		     s AS (INSERT INTO sandboxes (owner_id, project_id, build_id) SELECT p.owner_id, p.id, b.id FROM p, b RETURNING id),
		     pf AS (INSERT INTO project_files (project_id, path, content, sha256) SELECT p.id, f.path, f.content, sha256(f.content) FROM p,
		            unnest($1::text[], $2::bytea[]) AS f(path, content))
		INSERT INTO build_files (build_id, path, content, sha256) SELECT b.id, f.path, f.content, sha256(f.content) FROM b,
		       unnest($1::text[], $2::bytea[]) AS f(path, content)`, paths, contents)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var number, fileCount, added int32
	var total int64
	var source string
	var reloads bool
	if err := pool.QueryRow(ctx, `SELECT v.number, v.file_count, v.total_bytes, v.added, v.source, p.reloads_itself
		FROM versions v JOIN projects p ON p.id = v.project_id`).Scan(&number, &fileCount, &total, &added, &source, &reloads); err != nil {
		t.Fatal(err)
	}
	if number != 1 || fileCount != 4 || added != 4 || total != int64(2*len(files["server.js"])+4) || source != "created" || !reloads {
		t.Fatalf("version %d of %d files (%d added), %d bytes, source %q, reloads itself %v; want version 1 of the 4 files, created, the static starter reloading itself",
			number, fileCount, added, total, source, reloads)
	}
	rows, err := pool.Query(ctx, `SELECT f.path, f.size, f.sha256, b.content FROM version_files f
		JOIN blobs b ON b.sha256 = f.sha256 WHERE f.from_number = 1 AND f.until_number IS NULL`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var path string
		var size int64
		var sum, content []byte
		if err := rows.Scan(&path, &size, &sum, &content); err != nil {
			t.Fatal(err)
		}
		if want := sha256.Sum256(files[path]); !bytes.Equal(sum, want[:]) || !bytes.Equal(content, files[path]) || size != int64(len(files[path])) {
			t.Errorf("%s: %d bytes, sha256 %x; want the stored file", path, size, sum)
		}
		n++
	}
	if rows.Err() != nil || n != len(files) {
		t.Fatalf("%d files in version 1 (%v), want %d", n, rows.Err(), len(files))
	}
	var blobs, stale int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM blobs),
		(SELECT count(*) FROM builds b JOIN sandboxes s ON s.build_id = b.id JOIN versions v ON v.project_id = b.project_id
		 WHERE b.files_version_id IS DISTINCT FROM v.id OR s.deployed_version_id IS DISTINCT FROM v.id)`).Scan(&blobs, &stale); err != nil {
		t.Fatal(err)
	}
	if blobs != 3 || stale != 0 {
		t.Fatalf("%d blobs (want 3: the two copies stored once), %d builds or sandboxes not on version 1", blobs, stale)
	}
	for _, table := range []string{"project_files", "build_files"} {
		var exists bool
		if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil || exists {
			t.Fatalf("%s still exists (%v): the copies must go", table, err)
		}
	}
}

// TestCodesMigrationMapsOldStrings applies the migrations up to the one before the codes,
// stores what Sandman wrote then (sentences and free text as keys), and migrates on: every
// known string becomes its code, its free-form part the row's detail; an unknown one becomes
// the catch-all code with its text kept.
func TestCodesMigrationMapsOldStrings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedUpTo(t, 6)
	events := []struct{ from, to, old, code, detail string }{
		{"starting", "starting", "created", "created", ""},
		{"running", "paused", "paused after the build (SANDMAN_PAUSE_AFTER_READY=immediate)", "after_build", ""},
		{"running", "unknown", "cannot verify: dial tcp: refused", "cannot_verify", "dial tcp: refused"},
		{"resuming", "resume_failed", "resume failed: files lost", "resume_files_lost", ""},
		{"starting", "terminated", "build_failed: refunded", "build_failed_refunded", ""},
		{"running", "killed", "admin", "provider_other", "admin"},
		{"running", "killed", "lost by the provider", "lost", ""},
		{"running", "expired", "missing after its end time", "missing_past_end", ""},
		{"paused", "running", "synced with provider", "synced", ""},
		{"running", "running", "version live", "version_live", ""},
		{"running", "paused", "test", "other", "test"},
	}
	var sandboxID string
	err := pool.QueryRow(ctx, `
		WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ('c@example.com', 'x', 1) RETURNING id),
		     p AS (INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING id, owner_id),
		     b AS (INSERT INTO builds (project_id, version, kind) SELECT id, 1, 'initial' FROM p RETURNING id)
		INSERT INTO sandboxes (owner_id, project_id, build_id, status, killed_reason, failure_cause)
		SELECT p.owner_id, p.id, b.id, 'resume_failed', 'timeout', 'The preview''s files were lost by the provider and couldn''t be restored. Rebuild it from your saved files.'
		FROM p, b RETURNING id`).Scan(&sandboxID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if _, err := pool.Exec(ctx, `INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) VALUES ($1, $2, $3, 'reconciler', $4)`,
			sandboxID, e.from, e.to, e.old); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{
		`INSERT INTO webhook_deliveries (event_id, headers, body, outcome) VALUES ('e1', '{}', '', 'applied'), ('e2', '{}', '', 'exploded')`,
		`INSERT INTO credit_ledger (user_id, delta, reason) SELECT id, -1, 'rebuild' FROM users`,
		`INSERT INTO credit_ledger (user_id, delta, reason) SELECT id, 1, 'refund: the provider failed after retries: 502' FROM users`,
		`INSERT INTO credit_ledger (user_id, delta, reason) SELECT id, -1, 'gift' FROM users`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, `SELECT reason::text, detail FROM sandbox_events ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Code, Detail string }])
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range events {
		if got[i].Code != e.code || got[i].Detail != e.detail {
			t.Errorf("event reason %q became %q (detail %q), want %q (%q)", e.old, got[i].Code, got[i].Detail, e.code, e.detail)
		}
	}
	var killed, cause string
	if err := pool.QueryRow(ctx, `SELECT killed_reason::text, failure_cause::text FROM sandboxes`).Scan(&killed, &cause); err != nil {
		t.Fatal(err)
	}
	if killed != "provider_timeout" || cause != "files_lost" {
		t.Errorf("sandbox: killed_reason %q, failure_cause %q; want provider_timeout, files_lost", killed, cause)
	}
	for q, want := range map[string]string{
		`SELECT string_agg(outcome::text || ':' || detail, ',' ORDER BY id) FROM webhook_deliveries`: "applied:,other:exploded",
		`SELECT string_agg(reason::text || ':' || detail, ',' ORDER BY id) FROM credit_ledger`:       "rebuild:,refund:the provider failed after retries: 502,other:gift",
	} {
		var s string
		if err := pool.QueryRow(ctx, q).Scan(&s); err != nil {
			t.Fatal(err)
		}
		if s != want {
			t.Errorf("%s: %q, want %q", q, s, want)
		}
	}
}

// migratedUpTo is a pool on a new database migrated up to the version only, for a test of a
// later migration on the rows Sandman stored before it; closed when t ends.
func migratedUpTo(t *testing.T, version int64) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.EmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	return pool
}

// Each sandbox's changed_by_provider says whether its last status change (a move, not a note)
// applied a provider event.
func TestChangedByProviderMigrationFollowsEachSandboxsLastChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedUpTo(t, 12)
	if _, err := pool.Exec(ctx, `
		WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ('p@example.com', 'x', 1) RETURNING id),
		     p AS (INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING id)
		INSERT INTO versions (project_id, number, source, file_count, total_bytes) SELECT id, 1, 'created', 0, 0 FROM p`); err != nil {
		t.Fatal(err)
	}
	type move struct{ from, to, source, reason string } // from a provider when the source is webhook or events_api
	cases := []struct {
		name, status string
		moves        []move
		want         bool
	}{
		{"a provider's resume, then a version went live", "running", []move{
			{"starting", "starting", "user", "created"}, {"starting", "running", "build", "ready"}, {"running", "paused", "scheduler", "idle"},
			{"paused", "running", "webhook", "provider_resumed"}, {"running", "running", "user", "version_live"}}, true},
		{"the provider's pause, then Sandman's resume and pause", "paused", []move{
			{"starting", "starting", "user", "created"}, {"starting", "running", "build", "ready"}, {"running", "paused", "events_api", "provider_paused"},
			{"paused", "running", "user", "requested"}, {"running", "paused", "scheduler", "idle"}}, false},
		{"gone by the provider's kill", "killed", []move{
			{"starting", "starting", "user", "created"}, {"starting", "running", "build", "ready"}, {"running", "killed", "webhook", "provider_other"}}, true},
		{"only created", "starting", []move{{"starting", "starting", "user", "created"}}, false},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		if err := pool.QueryRow(ctx, `
			WITH b AS (INSERT INTO builds (project_id, version, kind, files_version_id) SELECT project_id, $1, 'initial', id FROM versions RETURNING *)
			INSERT INTO sandboxes (owner_id, project_id, build_id, status, deployed_version_id)
			SELECT p.owner_id, p.id, b.id, $2, b.files_version_id FROM b JOIN projects p ON p.id = b.project_id RETURNING id`,
			i+1, c.status).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
		for _, m := range c.moves {
			if _, err := pool.Exec(ctx, `INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, provider_timestamp)
				VALUES ($1, $2, $3, $4, $5, CASE WHEN $4::event_source IN ('webhook', 'events_api') THEN now() END)`, ids[i], m.from, m.to, m.source, m.reason); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		var got bool
		if err := pool.QueryRow(ctx, `SELECT changed_by_provider FROM sandboxes WHERE id = $1`, ids[i]).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: changed_by_provider %v, want %v", c.name, got, c.want)
		}
	}
}

// A version's source and a share hit's kind keep their stored words across migration 00020 and
// back down, and either way the database refuses a word outside the list.
func TestTypedSourcesMigrationKeepsStoredWordsBothWays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedUpTo(t, 19)
	if _, err := pool.Exec(ctx, `
		WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ('t@example.com', 'x', 1) RETURNING id),
		     p AS (INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING id),
		     v AS (INSERT INTO versions (project_id, number, source, file_count, total_bytes)
		           SELECT id, n, s, 0, 0 FROM p, unnest(ARRAY['created', 'upload', 'api', 'restore']) WITH ORDINALITY AS x(s, n))
		INSERT INTO share_hits (link_id, ip, kind) SELECT gen_random_uuid(), '192.0.2.1', k FROM unnest(ARRAY['wake', 'activity']) AS k`); err != nil {
		t.Fatal(err)
	}
	const stored = `SELECT (SELECT string_agg(source::text, ',' ORDER BY number) FROM versions) || ';' ||
		(SELECT string_agg(kind::text, ',' ORDER BY id) FROM share_hits)`
	const want = "created,upload,api,restore;wake,activity"
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		run  func() error
	}{
		{"up", func() error { _, err := p.UpTo(ctx, 20); return err }},
		{"down", func() error { _, err := p.DownTo(ctx, 19); return err }},
	} {
		if err := step.run(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		var got string
		if err := pool.QueryRow(ctx, stored).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("after %s: stored %q, want %q", step.name, got, want)
		}
		for _, q := range []string{
			`UPDATE versions SET source = 'email' WHERE number = 1`,
			`UPDATE share_hits SET kind = 'visit' WHERE kind = 'wake'`,
		} {
			if _, err := pool.Exec(ctx, q); err == nil {
				t.Errorf("after %s: %s was accepted, want it refused", step.name, q)
			}
		}
	}
}

// A build that failed before the failure codes, and a version's event that said why it did not
// start, read as they did: code other, their sentence kept (a build's as its detail, an event's
// as its output); a build that did not fail has no failure.
func TestBuildFailureMigrationKeepsOldSentences(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedUpTo(t, 19)
	const buildSentence = "The install command \"npm ci\" failed with exit code 1. Its last output:\nnpm ERR!"
	const eventSentence = "The start command \"node server.js\" exited with code 1 before it answered on port 3000. Its last output:\nboom"
	var sandboxID string
	if err := pool.QueryRow(ctx, `
		WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ('f@example.com', 'x', 1) RETURNING id),
		     p AS (INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING id, owner_id),
		     v AS (INSERT INTO versions (project_id, number, source, file_count, total_bytes) SELECT id, 1, 'created', 0, 0 FROM p RETURNING id, project_id),
		     b AS (INSERT INTO builds (project_id, version, kind, files_version_id, status, error)
		           SELECT project_id, 1, 'initial'::build_kind, id, 'failed'::build_status, $1 FROM v UNION ALL
		           SELECT project_id, 2, 'rebuild', id, 'ready', '' FROM v RETURNING id, version, project_id)
		INSERT INTO sandboxes (owner_id, project_id, build_id, status, deployed_version_id)
		SELECT p.owner_id, p.id, b.id, 'running', v.id FROM p, b, v WHERE b.version = 2 RETURNING id`, buildSentence).Scan(&sandboxID); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason, version_number, output)
		VALUES ($1, 'running', 'running', 'user', 'version_failed', 1, $2), ($1, 'running', 'running', 'user', 'version_live', 1, '')`,
		sandboxID, eventSentence); err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx, pool); err != nil {
		t.Fatal(err)
	}
	q := db.New(pool)
	rows, err := pool.Query(ctx, `SELECT id FROM builds ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []sandbox.Failure{{Code: sandbox.FailOther, Output: buildSentence}, {}} {
		b, err := q.GetBuild(ctx, ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := b.Failure(); got != want {
			t.Errorf("build %d: failure %+v, want %+v", b.Version, got, want)
		}
	}
	evs, err := q.ListSandboxEvents(ctx, uuid.MustParse(sandboxID))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := evs[0].Failure(), (sandbox.Failure{Code: sandbox.FailOther, Output: eventSentence}); got != want {
		t.Errorf("the failed version's event: %+v, want %+v", got, want)
	}
	if got := evs[1].Failure(); got.Failed() {
		t.Errorf("the live version's event has a failure: %+v", got)
	}
}
