package versions

import (
	"bytes"
	"path"
	"strconv"
	"strings"
	"testing"
)

func TestCheckPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		ok   bool
	}{
		{"package.json", true},
		{"src/app/index.js", true},
		{".env.example", true},
		{"dir with space/file name.txt", true},
		{"", false},
		{"/etc/passwd", false},
		{"../secret", false},
		{"a/../../b", false},
		{"a/..", false},
		{"./a", false},
		{"a//b", false},
		{"a/", false},
		{".", false},
		{`a\b`, false},
		{"a\x00b", false},
		{"a\nb", false},
		{"\xff", false},
		{strings.Repeat("a", MaxPathLength+1), false},
	}
	for _, tt := range tests {
		err := CheckPath(tt.path)
		if (err == nil) != tt.ok {
			t.Errorf("CheckPath(%q) = %v, want ok=%v", tt.path, err, tt.ok)
		}
	}
}

func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../x", "/x", "a/./b", "é/ü", "a\\b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if CheckPath(p) != nil {
			return
		}
		// Whatever passes is stored as given and must stay inside the project root when joined.
		const root = "/home/user/project"
		if joined := path.Join(root, p); !strings.HasPrefix(joined, root+"/") || joined != root+"/"+p {
			t.Fatalf("%q escapes or is rewritten under the root: %q", p, joined)
		}
	})
}

func TestCheckFiles(t *testing.T) {
	t.Parallel()
	file := func(p string, n int) File { return File{Path: p, Content: bytes.Repeat([]byte("x"), n)} }
	many := make([]File, MaxFiles+1)
	for i := range many {
		many[i] = file("f/"+strconv.Itoa(i), 1)
	}
	tests := []struct {
		name     string
		files    []File
		wantErrs []string // substrings, one per expected error, in order
	}{
		{"ok", []File{file("a.js", 10), file("src/b.js", 10)}, nil},
		{"empty upload", nil, []string{"Choose at least one file"}},
		{"traversal", []File{file("../evil", 1), file("ok.txt", 1)}, []string{`".." is not allowed`}},
		{"absolute", []File{file("/abs", 1)}, []string{"Absolute paths"}},
		{"duplicate", []File{file("a", 1), file("a", 1)}, []string{"appears twice"}},
		{"file and folder", []File{file("a", 1), file("a/b", 1)}, []string{"both a file and a folder"}},
		{"file too large", []File{file("big.bin", MaxFileBytes+1)}, []string{"the limit is 5.0 MiB"}},
		{"total too large", []File{file("a", MaxFileBytes), file("b", MaxFileBytes), file("c", MaxFileBytes), file("d", MaxFileBytes), file("e", 1)}, []string{"limit is 20.0 MiB in all"}},
		{"too many files", many, []string{"at most 500 files"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := CheckFiles(tt.files)
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("got %d errors %v, want %d", len(errs), errs, len(tt.wantErrs))
			}
			for i, want := range tt.wantErrs {
				if !strings.Contains(errs[i].Message, want) {
					t.Errorf("error %d = %q, want %q", i, errs[i].Message, want)
				}
			}
		})
	}
}
