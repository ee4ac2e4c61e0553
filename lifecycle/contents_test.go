package lifecycle

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/db/dbtest"
	"sandman/versions"
)

// A deploy or a repair never uploads a version short: when a file's stored content is
// missing, reading the version's contents fails instead of leaving the file out.
func TestContentsOfAVersionWithMissingContentFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	var owner, pid uuid.UUID
	if err := pool.QueryRow(ctx, `WITH u AS (INSERT INTO users (email, password_hash, credits) VALUES ('contents@example.com', 'x', 1) RETURNING id)
		INSERT INTO projects (owner_id, name, start_command, port) SELECT id, 'p', 'node server.js', 3000 FROM u RETURNING owner_id, id`).Scan(&owner, &pid); err != nil {
		t.Fatal(err)
	}
	var v db.Version
	if err := db.InTx(ctx, pool, func(tx db.Tx) error {
		var err error
		v, err = versions.CreateFirst(ctx, tx, owner, pid, []versions.File{{Path: "server.js", Content: []byte("kept")},
			{Path: "public/index.html", Content: []byte("lost content")}}, versions.DefaultQuota)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := &Service{q: db.New(pool)}
	w, err := s.versionFiles(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if files, err := s.contents(ctx, owner, w, nil); err != nil || len(files) != 2 {
		t.Fatalf("the contents of a whole version: %d files, %v", len(files), err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM blobs WHERE owner_id = $1 AND content = 'lost content'`, owner); err != nil {
		t.Fatal(err)
	}
	for _, paths := range [][]string{nil, {"public/index.html", "server.js"}} {
		if files, err := s.contents(ctx, owner, w, paths); !errors.Is(err, versions.ErrContentMissing) {
			t.Errorf("the contents at %q with one file's content missing: %d files, %v; want ErrContentMissing", paths, len(files), err)
		}
	}
}
