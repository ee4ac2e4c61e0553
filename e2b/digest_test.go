package e2b_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"

	"sandman/e2b"
	"sandman/sandboxd/sandboxdtest"
)

// TestDigestFilesAgainstSandboxd digests, in a real sandbox, files whose names a shell would
// mangle, next to paths that hold no regular file, and a list long enough for several commands.
func TestDigestFilesAgainstSandboxd(t *testing.T) {
	t.Parallel()
	h := sandboxdtest.Start(t)
	c := clientFor(t, h)
	ctx := t.Context()
	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	odd := map[string]string{
		"server.js":                       "console.log('hi')\n",
		"a b/c d.txt":                     "spaces",
		"quote's \"double\".txt":          "quotes",
		"$(touch pwned) `id` ${HOME}.txt": "expansions",
		"-n":                              "a leading dash",
		"(":                               "a find expression",
		"*.js":                            "a glob",
		`back\slash.txt`:                  "a backslash",
		"ünï/cødé ✓.txt":                  "unicode",
		"empty":                           "",
	}
	var files []e2b.File
	for p, content := range odd {
		files = append(files, e2b.File{Path: "app/" + p, Content: []byte(content)})
	}
	if err := c.UploadFiles(ctx, sb, files); err != nil {
		t.Fatalf("upload: %v", err)
	}
	// What an upload cannot make: a newline in a name, a symlink, a directory and a FIFO at
	// paths a file is expected at.
	if res := run(t, c, sb, `cd app && printf 'nl' > "$(printf 'new\nline')" && ln -s server.js link.js && mkdir dir.js && mkfifo fifo.js`); res.ExitCode != 0 {
		t.Fatalf("setting up the odd paths: %+v", res)
	}
	odd["new\nline"] = "nl"
	paths := []string{"missing.txt", "link.js", "dir.js", "fifo.js", "nested/missing"}
	for p := range odd {
		paths = append(paths, p)
	}
	got, err := c.DigestFiles(ctx, sb, "/home/user/app", paths)
	if err != nil {
		t.Fatalf("digest: %v", err)
	}
	if !got.DirExists || len(got.Files) != len(paths) {
		t.Fatalf("digest = %+v; want the directory and %d files", got, len(paths))
	}
	for i, f := range got.Files {
		if f.Path != paths[i] {
			t.Fatalf("file %d is %q, want %q (the order asked)", i, f.Path, paths[i])
		}
		content, ok := odd[f.Path]
		if !ok {
			if f.Regular {
				t.Errorf("%q: reported a regular file of %d bytes, want none", f.Path, f.Size)
			}
			continue
		}
		if !f.Regular || f.Size != int64(len(content)) || f.SHA256 != sha256.Sum256([]byte(content)) {
			t.Errorf("%q: %+v, want %d bytes with sha256 %x", f.Path, f, len(content), sha256.Sum256([]byte(content)))
		}
	}
	if res := run(t, c, sb, "ls pwned app/pwned 2>&1"); res.ExitCode == 0 {
		t.Fatalf("a name was run as a command: %q", res.Stdout)
	}

	// Many files, some with long names: several commands, every answer in its place.
	many := make([]string, 2500)
	var made []e2b.File
	for i := range many {
		many[i] = fmt.Sprintf("f%04d-%s", i, strings.Repeat("x", i%200))
		if i%3 != 0 {
			made = append(made, e2b.File{Path: "many/" + many[i], Content: []byte(fmt.Sprint(i))})
		}
	}
	if err := c.UploadFiles(ctx, sb, made); err != nil {
		t.Fatalf("upload many files: %v", err)
	}
	got, err = c.DigestFiles(ctx, sb, "many", many)
	if err != nil || !got.DirExists || len(got.Files) != len(many) {
		t.Fatalf("digest of %d files: %d answers, dir %v, %v", len(many), len(got.Files), got.DirExists, err)
	}
	for i, f := range got.Files {
		want := fmt.Sprint(i)
		if f.Path != many[i] || f.Regular != (i%3 != 0) || f.Regular && f.SHA256 != sha256.Sum256([]byte(want)) {
			t.Fatalf("file %d: %+v", i, f)
		}
	}

	// A directory that is gone is an answer, not an error.
	if got, err := c.DigestFiles(ctx, sb, "/home/user/gone", []string{"server.js"}); err != nil || got.DirExists || len(got.Files) != 0 {
		t.Fatalf("digest in a missing directory = %+v, %v; want no directory", got, err)
	}
	for _, bad := range [][]string{{"/etc/passwd"}, {"a\x00b"}, {""}, {"a", "a"}} {
		if _, err := c.DigestFiles(ctx, sb, "app", bad); !errors.Is(err, e2b.ErrInvalid) {
			t.Errorf("digest of %q = %v, want ErrInvalid", bad, err)
		}
	}
}
