package e2b_test

import (
	"strings"
	"testing"

	"sandman/e2b"
	"sandman/sandboxd/sandboxdtest"
)

// TestRemoveFilesAgainstSandboxd removes, in one call, files whose names a shell would mangle
// and the folders they leave empty (a later file may take a removed folder's name), leaves
// everything else, marks executables, and takes a path that is not there as done.
func TestRemoveFilesAgainstSandboxd(t *testing.T) {
	t.Parallel()
	h := sandboxdtest.Start(t)
	c := clientFor(t, h)
	ctx := t.Context()
	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	var files []e2b.File
	for _, p := range []string{"keep.txt", "gone/deep/a b.txt", "$(touch pwned).txt", "-n", "lib/keep.js", "lib/gone.js", "run.sh"} {
		files = append(files, e2b.File{Path: "app/" + p, Content: []byte(p)})
	}
	if err := c.UploadFiles(ctx, sb, files); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveFiles(ctx, sb, "/home/user/app", []string{"gone/deep/a b.txt", "$(touch pwned).txt", "-n", "lib/gone.js", "never/there"},
		[]string{"run.sh"}); err != nil {
		t.Fatalf("remove: %v", err)
	}
	res := run(t, c, sb, `cd app && find . | sort && test -x run.sh && echo executable; ls pwned ../pwned 2>/dev/null`)
	want := ".\n./keep.txt\n./lib\n./lib/keep.js\n./run.sh\nexecutable\n"
	if got := res.Stdout; got != want {
		t.Fatalf("after the removal the app holds:\n%s\nwant:\n%s", got, want)
	}
	if err := c.RemoveFiles(ctx, sb, "/home/user/app", []string{"/etc/passwd"}, nil); err == nil || !strings.Contains(err.Error(), "relative") {
		t.Fatalf("an absolute path: %v, want refused", err)
	}
}
