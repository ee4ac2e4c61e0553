package versions_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/db"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
	"sandman/versions"
)

// otherProject makes a second project of owner, with version 1 (one file).
func otherProject(t testing.TB, pool *pgxpool.Pool, owner uuid.UUID) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	var id uuid.UUID
	if err := pool.QueryRow(ctx, `INSERT INTO projects (owner_id, name, start_command, port) VALUES ($1, 'q', 'node server.js', 3000) RETURNING id`,
		owner).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := db.InTx(ctx, pool, func(tx db.Tx) error {
		_, err := versions.CreateFirst(ctx, tx, owner, id, []versions.File{{Path: "server.js", Content: []byte("q1")}}, versions.DefaultQuota)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

// waitOthers returns once another session of the test's database waits on a lock, or done is
// closed: whichever comes first says how the other transaction met this one.
func waitOthers(ctx context.Context, pool *pgxpool.Pool, done <-chan struct{}) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		select {
		case <-done:
			return nil
		default:
		}
		var waiting int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			return err
		}
		if waiting > 0 {
			return nil
		}
	}
	return errors.New("the other transaction neither finished nor waited in 10 s")
}

// A version made while another project of the same founder prunes the only version that used
// the same content never points at deleted content: both orders, the prune made by a new
// version or by a restore, many rounds. Each round holds
// one transaction open at the moment that matters (after storing, before committing; after
// collecting, before committing) until the other has finished or waits on it.
func TestStoredContentIsNeverLostToAConcurrentPrune(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, p := project(t, pool)
	q := otherProject(t, pool, owner)
	// Project p at MaxVersions: version k (k >= 2) alone holds "content k", so each new version
	// of p prunes the oldest and collects its content.
	// Written in one statement, as Create would write them one by one.
	if _, err := pool.Exec(ctx, `WITH k AS (SELECT generate_series(2, $3::integer) AS k),
		b AS (INSERT INTO blobs (owner_id, sha256, content) SELECT $1, sha256(convert_to('content ' || k, 'UTF8')), convert_to('content ' || k, 'UTF8') FROM k),
		f AS (INSERT INTO version_files (project_id, path, from_number, until_number, size, sha256)
			SELECT $2, 'n.txt', k, CASE WHEN k < $3 THEN k + 1 END, length('content ' || k), sha256(convert_to('content ' || k, 'UTF8')) FROM k)
		INSERT INTO versions (project_id, number, parent_number, source, added, changed, file_count, total_bytes)
		SELECT $2, k, k - 1, 'api', CASE WHEN k = 2 THEN 1 ELSE 0 END, CASE WHEN k = 2 THEN 0 ELSE 1 END, 2, 2 + length('content ' || k) FROM k`,
		owner, p, versions.MaxVersions); err != nil {
		t.Fatal(err)
	}
	plain := versions.New(pool, nil)
	if _, _, err := plain.FileContent(ctx, owner, p, versions.MaxVersions, "n.txt"); err != nil {
		t.Fatal(err)
	}
	const rounds = 100
	for round := range rounds {
		oldest := round + 1 // the version p's next one prunes (version 1 holds no content of its own)
		content := fmt.Appendf(nil, "content %d", oldest)
		pDone, qDone, hold := make(chan struct{}), make(chan struct{}), make(chan struct{})
		qFirst := round%2 == 0
		// The transaction that goes first signals hold, then waits for the other.
		hook := func(other <-chan struct{}) versions.Hook {
			return func(ctx context.Context, _ db.Tx, _ uuid.UUID, _ db.Version) error {
				close(hold)
				return waitOthers(ctx, pool, other)
			}
		}
		pSvc, qSvc := plain, plain
		if qFirst {
			qSvc = versions.New(pool, hook(pDone))
		} else {
			pSvc = versions.New(pool, hook(qDone))
		}
		errs := make(chan error, 2)
		makeP := func() {
			defer close(pDone)
			var err error
			if round/2%2 == 0 {
				_, err = pSvc.Create(ctx, owner, p, versions.Change{Source: versions.SourceAPI,
					Files: []versions.File{{Path: "n.txt", Content: fmt.Appendf(nil, "p round %d", round)}}})
			} else { // a restore stores no content but prunes too
				_, err = pSvc.Restore(ctx, owner, p, int32(versions.MaxVersions+round-1), nil)
			}
			errs <- err
		}
		makeQ := func() {
			defer close(qDone)
			_, err := qSvc.Create(ctx, owner, q, versions.Change{Source: versions.SourceAPI,
				Files: []versions.File{{Path: "x.txt", Content: content}}})
			errs <- err
		}
		first, second := makeP, makeQ
		if qFirst {
			first, second = makeQ, makeP
		}
		go first()
		<-hold
		go second()
		<-pDone
		<-qDone
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		cur, err := plain.Current(ctx, owner, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, got, err := plain.FileContent(ctx, owner, q, cur.Number, "x.txt"); err != nil || !bytes.Equal(got, content) {
			t.Fatalf("round %d (%s first): version %d's x.txt reads %q, %v; want %q", round, map[bool]string{true: "storing", false: "pruning"}[qFirst],
				cur.Number, got, err, content)
		}
	}
	var lost int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM version_files f JOIN projects p ON p.id = f.project_id
		WHERE NOT EXISTS (SELECT 1 FROM blobs b WHERE b.owner_id = p.owner_id AND b.sha256 = f.sha256)`).Scan(&lost); err != nil {
		t.Fatal(err)
	}
	if lost != 0 {
		t.Fatalf("%d files of kept versions have no content", lost)
	}
	for _, pid := range []uuid.UUID{p, q} {
		cur, err := plain.Current(ctx, owner, pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := plain.Archive(ctx, owner, pid, cur.Number, io.Discard); err != nil {
			t.Fatalf("the archive of version %d: %v", cur.Number, err)
		}
	}
	testkit.Record(t, testkit.Scenario{ID: "prune-store-race", Times: rounds,
		Injected: "per round: a version of one project storing the content that a version of another project of the same founder prunes (its project kept at 1,000 versions); one of the two transactions held open, stored or collected and not committed, until the other finished or waited (each order in half the rounds; the prune made by a new version or by a restore, alternately)",
		Result:   "0 files of any kept version without their content; each round's new file and every archive read back whole"})
}

// A version whose stored content is missing is never read short: its file, its archive, its
// contents and its changes fail, naming the missing content.
func TestAVersionWithMissingContentFailsEveryRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, pid := project(t, pool)
	s := versions.New(pool, nil)
	res, err := s.Create(ctx, owner, pid, versions.Change{Source: versions.SourceAPI,
		Files: []versions.File{{Path: "a.txt", Content: []byte("kept")}, {Path: "gone.txt", Content: []byte("lost content")}}})
	if err != nil {
		t.Fatal(err)
	}
	v := res.Version
	if _, err := pool.Exec(ctx, `DELETE FROM blobs WHERE owner_id = $1 AND content = 'lost content'`, owner); err != nil {
		t.Fatal(err)
	}
	reads := []struct {
		name string
		read func() error
	}{
		{"the file", func() error { _, _, err := s.FileContent(ctx, owner, pid, v.Number, "gone.txt"); return err }},
		{"the archive", func() error { return s.Archive(ctx, owner, pid, v.Number, io.Discard) }},
		{"every file's contents", func() error { _, err := versions.Contents(ctx, db.New(pool), owner, v, nil); return err }},
		{"some files' contents", func() error {
			_, err := versions.Contents(ctx, db.New(pool), owner, v, []string{"a.txt", "gone.txt"})
			return err
		}},
		{"the changes", func() error { _, _, err := s.VersionChanges(ctx, owner, pid, v.Number); return err }},
	}
	for _, r := range reads {
		if err := r.read(); !errors.Is(err, versions.ErrContentMissing) {
			t.Errorf("%s of a version with missing content: %v, want ErrContentMissing", r.name, err)
		}
	}
	if _, _, err := s.FileContent(ctx, owner, pid, v.Number, "a.txt"); err != nil {
		t.Fatalf("a file whose content is stored: %v", err)
	}
}
