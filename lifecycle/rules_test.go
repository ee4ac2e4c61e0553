package lifecycle_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestOnlyApplyWritesStatus: the one statement that writes a sandbox's status is called from
// lifecycle/apply.go and nowhere else in the repository, tests included (their fixtures write
// rows with plain SQL, never through it).
func TestOnlyApplyWritesStatus(t *testing.T) {
	t.Parallel()
	var callers []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "UpdateSandboxStatus" {
				callers = append(callers, filepath.ToSlash(path))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range callers {
		if c != "../lifecycle/apply.go" {
			t.Errorf("%s uses UpdateSandboxStatus: status changes go through lifecycle's apply", c)
		}
	}
	if len(callers) == 0 {
		t.Fatal("no caller of UpdateSandboxStatus found: the check reads nothing")
	}
}
