package lifecycle

import (
	"crypto/sha256"
	"slices"
	"testing"

	"sandman/e2b"
	"sandman/versions"
)

// What the integrity check holds against the sandbox, and what it leaves to the app.
func TestJudge(t *testing.T) {
	t.Parallel()
	stored := func(path, content string) versions.Entry {
		sum := sha256.Sum256([]byte(content))
		return versions.Entry{Path: path, Size: int64(len(content)), SHA256: sum[:]}
	}
	found := func(path, content string) e2b.FileDigest {
		return e2b.FileDigest{Path: path, Regular: true, Size: int64(len(content)), SHA256: sha256.Sum256([]byte(content))}
	}
	missing := func(path string) e2b.FileDigest { return e2b.FileDigest{Path: path} }
	files := []versions.Entry{stored("a", "aaaa"), stored("b", "bbbb"), stored("c", "cccc"), stored("d", "dddd"), stored("e", "eeee")}
	sandbox := []e2b.FileDigest{
		found("a", "aaaa"), // whole
		found("b", "BBBB"), // same size, other bytes
		missing("c"),       // gone (or not a regular file)
		found("d", "dd"),   // another size
		found("e", "EEEE"), // changed, by the app at a look
	}
	tests := []struct {
		name                 string
		ours                 []string // the files the new version changes
		appChanged           []string
		looked               bool
		j                    judgement
		damaged, appsChanged []string
	}{
		{"after a look", nil, []string{"e"}, true, judgeSlept, []string{"b", "c", "d"}, []string{"e"}},
		{"the app removed a file it owns", nil, []string{"c", "e"}, true, judgeSlept, []string{"b", "d"}, []string{"c", "e"}},
		{"never looked: only what is missing is damage", nil, nil, false, judgeSlept, []string{"c"}, []string{"b", "d", "e"}},
		{"right after an upload: everything is judged", nil, []string{"e"}, true, judgeAll, []string{"b", "c", "d", "e"}, nil},
		{"a file a version changes is the version's, the app's or not", []string{"e"}, []string{"e"}, true, judgeSlept, []string{"b", "c", "d", "e"}, nil},
		{"running: only the version's files are judged", []string{"a", "b"}, nil, true, judgeVersion, []string{"b"}, nil},
	}
	for _, tt := range tests {
		ours := map[string]bool{}
		for _, p := range tt.ours {
			ours[p] = true
		}
		v := judge(files, sandbox, ours, tt.appChanged, tt.looked, tt.j)
		if !slices.Equal(v.damaged, tt.damaged) || !slices.Equal(v.appChanged, tt.appsChanged) {
			t.Errorf("%s: damaged %q, the app's %q; want %q, %q", tt.name, v.damaged, v.appChanged, tt.damaged, tt.appsChanged)
		}
	}
}
