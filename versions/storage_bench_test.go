package versions_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"sandman/db/dbtest"
	"sandman/versions"
)

// BENCHMARKS.md: the storage of 100 versions of a 100-file app (4 KiB files of random bytes,
// which no compression shrinks), each changing 3 files, against the unique bytes stored:
// the content alone (blobs' bytes) and everything versions keep on disk (the tables' total
// relation sizes: content, the versions' files and the versions, their indexes).
func BenchmarkVersionStorage(b *testing.B) {
	for range b.N {
		ctx := context.Background()
		pool := dbtest.NewPool(b)
		owner, pid := project(b, pool)
		s := versions.New(pool, nil)
		random := func() []byte {
			p := make([]byte, 4096)
			_, _ = rand.Read(p)
			return p
		}
		app := versions.Change{Replace: true, Source: versions.SourceAPI}
		for i := range 100 {
			app.Files = append(app.Files, versions.File{Path: fmt.Sprintf("src/f%02d.js", i), Content: random()})
		}
		if _, err := s.Create(ctx, owner, pid, app); err != nil {
			b.Fatal(err)
		}
		unique := int64(100*4096 + len("v1")) // version 1's own file, replaced by the app
		for v := 1; v < 100; v++ {
			ch := versions.Change{Source: versions.SourceAPI}
			for j := range 3 {
				ch.Files = append(ch.Files, versions.File{Path: fmt.Sprintf("src/f%02d.js", (v*3+j)%100), Content: random()})
			}
			if _, err := s.Create(ctx, owner, pid, ch); err != nil {
				b.Fatal(err)
			}
			unique += 3 * 4096
		}
		var content, total int64
		if err := pool.QueryRow(ctx, `SELECT (SELECT sum(octet_length(content)) FROM blobs),
			pg_total_relation_size('blobs') + pg_total_relation_size('version_files') +
			pg_total_relation_size('versions')`).Scan(&content, &total); err != nil {
			b.Fatal(err)
		}
		var blobs int64
		if err := pool.QueryRow(ctx, `SELECT pg_total_relation_size('blobs')`).Scan(&blobs); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(content)/float64(unique), "content/unique")
		b.ReportMetric(float64(blobs)/float64(unique), "blobs-on-disk/unique")
		b.ReportMetric(float64(total)/float64(unique), "on-disk/unique")
	}
}
