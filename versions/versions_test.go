package versions_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/db"
	"sandman/db/dbtest"
	"sandman/versions"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func entry(path, content string, exec bool) versions.Entry {
	sum := sha256.Sum256([]byte(content))
	return versions.Entry{Path: path, Size: int64(len(content)), SHA256: sum[:], Executable: exec}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	base := []versions.Entry{entry("a", "1", false), entry("b", "2", false), entry("c", "3", false), entry("d/e", "4", true)}
	tests := []struct {
		name                    string
		to                      []versions.Entry
		added, changed, removed []string
	}{
		{"the same", base, nil, nil, nil},
		{"nothing from something", nil, nil, nil, []string{"a", "b", "c", "d/e"}},
		{"content, a new file, a removed one", []versions.Entry{entry("a", "1", false), entry("aa", "new", false), entry("b", "22", false), entry("d/e", "4", true)},
			[]string{"aa"}, []string{"b"}, []string{"c"}},
		{"the executable bit alone", []versions.Entry{entry("a", "1", false), entry("b", "2", false), entry("c", "3", false), entry("d/e", "4", false)},
			nil, []string{"d/e"}, nil},
	}
	for _, tt := range tests {
		d := versions.Diff(base, tt.to)
		if !slices.Equal(d.Added, tt.added) || !slices.Equal(d.Changed, tt.changed) || !slices.Equal(d.Removed, tt.removed) {
			t.Errorf("%s: +%q ~%q -%q, want +%q ~%q -%q", tt.name, d.Added, d.Changed, d.Removed, tt.added, tt.changed, tt.removed)
		}
		if d.Empty() != (len(tt.added)+len(tt.changed)+len(tt.removed) == 0) {
			t.Errorf("%s: Empty() = %v", tt.name, d.Empty())
		}
	}
}

// project makes a founder and a project with version 1 (one file) in the database.
func project(t testing.TB, pool *pgxpool.Pool) (owner, projectID uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ($1, 'x', 1) RETURNING id)
		INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING owner_id, id`,
		uuid.NewString()[:8]+"@example.com").Scan(&owner, &projectID); err != nil {
		t.Fatal(err)
	}
	err := db.InTx(ctx, pool, func(tx db.Tx) error {
		_, err := versions.CreateFirst(ctx, tx, owner, projectID, []versions.File{{Path: "server.js", Content: []byte("v1")}}, versions.DefaultQuota)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return owner, projectID
}

// Retention: past MaxVersions the oldest versions go, never one a build uses nor the newest,
// and content no version uses any more is deleted.
func TestRetentionPrunesTheOldestUnusedVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, pid := project(t, pool)
	// Version 1 is a build's: it stays.
	if _, err := pool.Exec(ctx, `INSERT INTO builds (project_id, version, kind, files_version_id)
		SELECT project_id, 1, 'initial', id FROM versions WHERE project_id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	s := versions.New(pool, nil)
	for i := 2; i <= versions.MaxVersions+2; i++ {
		if _, err := s.Create(ctx, owner, pid, versions.Change{Source: versions.SourceAPI,
			Files: []versions.File{{Path: "n.txt", Content: fmt.Appendf(nil, "only in version %d", i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	var kept, oldest, newest int32
	if err := pool.QueryRow(ctx, "SELECT count(*), min(number), max(number) FROM versions WHERE project_id = $1", pid).Scan(&kept, &oldest, &newest); err != nil {
		t.Fatal(err)
	}
	if kept != versions.MaxVersions || oldest != 1 || newest != versions.MaxVersions+2 {
		t.Fatalf("%d versions kept, %d to %d; want %d, version 1 (a build's) to the newest", kept, oldest, newest, versions.MaxVersions)
	}
	for n, want := range map[int]bool{2: false, 3: false, 4: true} {
		if _, _, err := s.Get(ctx, owner, pid, int32(n)); (err == nil) != want {
			t.Errorf("version %d kept: %v, want %v", n, err == nil, want)
		}
	}
	var orphans int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM blobs b WHERE NOT EXISTS (SELECT 1 FROM version_files f WHERE f.sha256 = b.sha256)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Fatalf("%d stored contents no version uses are kept", orphans)
	}
	sum := sha256.Sum256([]byte("only in version 2"))
	var left int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM blobs WHERE sha256 = $1", sum[:]).Scan(&left); err != nil || left != 0 {
		t.Fatalf("version 2's own content is still stored (%d, %v)", left, err)
	}
}

// Content is stored once per founder, never shared between founders: the same file of two
// founders is two rows, and a founder's many versions of one file one.
func TestContentIsStoredOncePerFounder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	a, pa := project(t, pool)
	b, pb := project(t, pool)
	s := versions.New(pool, nil)
	for _, who := range []struct{ owner, project uuid.UUID }{{a, pa}, {b, pb}} {
		for _, content := range []string{"shared", "other", "shared"} {
			if _, err := s.Create(ctx, who.owner, who.project, versions.Change{Source: versions.SourceAPI,
				Files: []versions.File{{Path: "x.txt", Content: []byte(content)}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sum := sha256.Sum256([]byte("shared"))
	var rows int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM blobs WHERE sha256 = $1", sum[:]).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d rows hold the file both founders stored (%v), want one each", rows, err)
	}
}
