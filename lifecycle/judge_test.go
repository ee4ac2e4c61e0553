package lifecycle

import (
	"crypto/sha256"
	"slices"
	"testing"

	"sandman/db"
	"sandman/e2b"
)

// What the integrity check holds against the sandbox, and what it leaves to the app.
func TestJudge(t *testing.T) {
	t.Parallel()
	stored := func(path, content string) db.ListBuildFileDigestsRow {
		sum := sha256.Sum256([]byte(content))
		return db.ListBuildFileDigestsRow{Path: path, Size: int64(len(content)), Sha256: sum[:]}
	}
	found := func(path, content string) e2b.FileDigest {
		return e2b.FileDigest{Path: path, Regular: true, Size: int64(len(content)), SHA256: sha256.Sum256([]byte(content))}
	}
	missing := func(path string) e2b.FileDigest { return e2b.FileDigest{Path: path} }
	files := []db.ListBuildFileDigestsRow{stored("a", "aaaa"), stored("b", "bbbb"), stored("c", "cccc"), stored("d", "dddd"), stored("e", "eeee")}
	sandbox := []e2b.FileDigest{
		found("a", "aaaa"), // whole
		found("b", "BBBB"), // same size, other bytes
		missing("c"),       // gone (or not a regular file)
		found("d", "dd"),   // another size
		found("e", "EEEE"), // changed, by the app at a look
	}
	tests := []struct {
		name                 string
		appChanged           []string
		looked, judgeAll     bool
		damaged, appsChanged []string
	}{
		{"after a look", []string{"e"}, true, false, []string{"b", "c", "d"}, []string{"e"}},
		{"the app removed a file it owns", []string{"c", "e"}, true, false, []string{"b", "d"}, []string{"c", "e"}},
		{"never looked: only what is missing is damage", nil, false, false, []string{"c"}, []string{"b", "d", "e"}},
		{"right after an upload: everything is judged", []string{"e"}, true, true, []string{"b", "c", "d", "e"}, nil},
	}
	for _, tt := range tests {
		v := judge(files, sandbox, tt.appChanged, tt.looked, tt.judgeAll)
		if !slices.Equal(v.damaged, tt.damaged) || !slices.Equal(v.appChanged, tt.appsChanged) {
			t.Errorf("%s: damaged %q, the app's %q; want %q, %q", tt.name, v.damaged, v.appChanged, tt.damaged, tt.appsChanged)
		}
	}
}
