package testkit

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// SelectorUses reads every Go file under root (tests and generated code included) and returns,
// by file (its path with forward slashes), each use of one of names as a selector (x.Name):
// what a source check such as "only apply writes a sandbox's status" looks at.
func SelectorUses(t testing.TB, root string, names ...string) map[string][]string {
	t.Helper()
	uses := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && slices.Contains(names, sel.Sel.Name) {
				p := filepath.ToSlash(path)
				uses[p] = append(uses[p], sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return uses
}
