package e2b_test

import (
	"fmt"
	"testing"

	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/sandboxd/sandboxdtest"
)

// BENCHMARKS.md: what the integrity check costs a resume. One DigestFiles call is the check's
// one envd command: 10, 100 and 1,000 files of 2 KiB in a few directories, against sandboxd.
func BenchmarkDigestFiles(b *testing.B) {
	h := sandboxdtest.Start(b)
	c := clientFor(b, h)
	ctx := b.Context()
	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 3600, Secure: true})
	if err != nil {
		b.Fatal(err)
	}
	content := make([]byte, 2048)
	for i := range content {
		content[i] = byte('a' + i%26)
	}
	for _, n := range []int{10, 100, 1000}[:testkit.BenchSize(3, 1)] {
		b.Run(fmt.Sprintf("files=%d", n), func(b *testing.B) {
			dir := fmt.Sprintf("app%d", n)
			paths := make([]string, n)
			files := make([]e2b.File, n)
			for i := range paths {
				paths[i] = fmt.Sprintf("src/dir%02d/file-%04d.js", i%20, i)
				files[i] = e2b.File{Path: dir + "/" + paths[i], Content: content}
			}
			if err := c.UploadFiles(ctx, sb, files); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				d, err := c.DigestFiles(ctx, sb, dir, paths)
				if err != nil || len(d.Files) != n || !d.Files[n-1].Regular {
					b.Fatalf("digest: %d files, %v", len(d.Files), err)
				}
			}
		})
	}
}
