package versions_test

import (
	"context"
	"testing"

	"sandman/db/dbtest"
	"sandman/versions"
)

// The sum of a founder's stored bytes, which the quota is checked against, is kept by the
// database on every statement that inserts or deletes content, whoever runs it: a version's new
// files, content they already had (nothing), retention's collection, and the account's removal.
func TestTheStoredSumFollowsEveryInsertAndDeleteOfContent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	owner, pid := project(t, pool)
	s := versions.New(pool, nil)
	check := func(when string, want int64) {
		t.Helper()
		u, err := s.Usage(ctx, owner)
		if err != nil {
			t.Fatal(err)
		}
		var actual int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(sum(octet_length(content)), 0)::bigint FROM blobs WHERE owner_id = $1`, owner).Scan(&actual); err != nil {
			t.Fatal(err)
		}
		if u.Stored != want || actual != want || u.Quota != versions.DefaultQuota {
			t.Fatalf("%s: the sum kept is %d of %d, the content is %d bytes; want %d", when, u.Stored, u.Quota, actual, want)
		}
	}
	check("version 1", 2) // "v1"
	if _, err := s.Create(ctx, owner, pid, versions.Change{Source: versions.SourceAPI, Files: []versions.File{
		{Path: "a.txt", Content: []byte("hello")}, {Path: "b.txt", Content: []byte("hello")}, {Path: "c.txt", Content: []byte("v1")}}}); err != nil {
		t.Fatal(err)
	}
	check("a version of one new content twice and one the founder had", 2+5)
	if _, err := pool.Exec(ctx, `DELETE FROM blobs WHERE owner_id = $1 AND content = 'hello'`, owner); err != nil {
		t.Fatal(err)
	}
	check("a collection", 2)
	if _, err := pool.Exec(ctx, `DELETE FROM projects WHERE id = $1`, pid); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM users WHERE id = $1`, owner); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM founder_storage WHERE owner_id = $1`, owner).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("the removed account's sum: %d rows (%v)", rows, err)
	}
}
