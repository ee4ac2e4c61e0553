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
	paths := []string{"a b.txt", "gone.txt"}
	good := rec(digestBegin, "5 ./a b.txt", digestHashes, hash+"  ./a b.txt", digestEnd)

	files, exists, err := parseDigest([]byte(good), paths)
	if err != nil || !exists || len(files) != 2 {
		t.Fatalf("parse = %+v, %v, %v", files, exists, err)
	}
	if f := files[0]; f.Path != "a b.txt" || !f.Regular || f.Size != 5 || f.SHA256 != sum {
		t.Errorf("first file %+v", f)
	}
	if f := files[1]; f.Path != "gone.txt" || f.Regular {
		t.Errorf("a path the command did not list: %+v, want not a regular file", f)
	}
	if _, exists, err := parseDigest([]byte(rec(digestNoDir)), paths); err != nil || exists {
		t.Errorf("no directory: exists %v, %v", exists, err)
	}
	for name, out := range map[string]string{
		"nothing":             "",
		"cut short":           good[:len(good)-len(digestEnd)-2],
		"its head cut off":    good[len(digestBegin)+1:],
		"sized, not digested": rec(digestBegin, "5 ./a b.txt", digestHashes, digestEnd),
		"digested, not sized": rec(digestBegin, digestHashes, hash+"  ./a b.txt", digestEnd),
		"a path never asked":  rec(digestBegin, "5 ./other", digestHashes, hash+"  ./other", digestEnd),
		"a bad size":          rec(digestBegin, "five ./a b.txt", digestHashes, hash+"  ./a b.txt", digestEnd),
		"a bad digest":        rec(digestBegin, "5 ./a b.txt", digestHashes, strings.Repeat("z", 64)+"  ./a b.txt", digestEnd),
		"an error message":    rec(digestBegin, "5 ./a b.txt", digestHashes, "sha256sum: invalid option -- 'z'", digestEnd),
	} {
		if files, _, err := parseDigest([]byte(out), paths); err == nil {
			t.Errorf("%s: parsed as %+v, want an error", name, files)
		}
	}
}
