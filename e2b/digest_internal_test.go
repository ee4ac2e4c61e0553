package e2b

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestParseDigest reads the digest command's output, and refuses any output that does not
// account for itself: a check that cannot be read must never pass for files that are fine, nor
// for files that are gone.
func TestParseDigest(t *testing.T) {
	t.Parallel()
	sum := sha256.Sum256([]byte("hello"))
	hash := hex.EncodeToString(sum[:])
	rec := func(parts ...string) string { return strings.Join(parts, "\x00") + "\x00" }
	const dir = "/app"
	paths := []string{"a b.txt", "gone.txt", "sub"}
	mark := digestDir + " " + dir
	good := rec(mark, "5 /app/a b.txt", "D /app/sub", mark, hash+"  /app/a b.txt")

	for name, out := range map[string]string{
		"hashes last":         good,
		"hashes among sizes":  rec(mark, "5 /app/a b.txt", hash+"  /app/a b.txt", "D /app/sub", mark),
		"hashes before sizes": rec(hash+"  /app/a b.txt", mark, "5 /app/a b.txt", mark),
	} {
		files, exists, err := parseDigest([]byte(out), dir, paths)
		if err != nil || !exists || len(files) != 3 {
			t.Fatalf("%s: parse = %+v, %v, %v", name, files, exists, err)
		}
		if f := files[0]; f.Path != "a b.txt" || !f.Regular || f.Size != 5 || f.SHA256 != sum {
			t.Errorf("%s: first file %+v", name, f)
		}
		for _, f := range files[1:] {
			if f.Regular {
				t.Errorf("%s: a path the command did not size: %+v, want not a regular file", name, f)
			}
		}
	}
	if _, exists, err := parseDigest(nil, dir, paths); err != nil || exists {
		t.Errorf("no output (no directory): exists %v, %v", exists, err)
	}
	for name, out := range map[string]string{
		"cut short":           rec(mark, "5 /app/a b.txt"),
		"its head cut off":    good[len(mark)+1:],
		"sized, not digested": rec(mark, "5 /app/a b.txt", mark),
		"digested, not sized": rec(mark, mark, hash+"  /app/a b.txt"),
		"sized twice":         rec(mark, "5 /app/a b.txt", "5 /app/a b.txt", mark, hash+"  /app/a b.txt"),
		"a path never asked":  rec(mark, "5 /app/other", mark, hash+"  /app/other"),
		"a bad size":          rec(mark, "five /app/a b.txt", mark, hash+"  /app/a b.txt"),
		"a bad digest":        rec(mark, "5 /app/a b.txt", mark, strings.Repeat("z", 64)+"  /app/a b.txt"),
		"an error message":    rec(mark, "5 /app/a b.txt", mark, "sha256sum: invalid option -- 'z'"),
		"another directory":   rec("D /elsewhere", "5 /app/a b.txt", "D /elsewhere", hash+"  /app/a b.txt"),
	} {
		if files, _, err := parseDigest([]byte(out), dir, paths); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, files)
		}
	}
}
