package lifecycle_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sentence is a string that reads as words for a person: a capitalised word, then more words.
var sentence = regexp.MustCompile(`^[A-Z][a-z'-]+[ ,:]+\S`)

// TestLifecycleHoldsNoSentenceOfTheUI: lifecycle records facts (codes, counts, times, output) and
// views writes every sentence a founder reads from them (docs/architecture.md, "Codes, not
// copy"). No string in lifecycle's code reads as a sentence, but for an error's message where
// the error is made (apperr's), a log line's, an error's own text, and a metric's help.
func TestLifecycleHoldsNoSentenceOfTheUI(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		read++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				return !notCopy(n.Fun)
			case *ast.CompositeLit:
				return !notCopy(n.Type)
			case *ast.KeyValueExpr:
				if k, ok := n.Key.(*ast.Ident); ok && k.Name == "Help" {
					return false // a metric's help, for whoever reads /metrics
				}
			case *ast.BasicLit:
				if s, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil && sentence.MatchString(s) {
					t.Errorf("%s: %q reads as a sentence of the UI: record its facts, and let views write it", fset.Position(n.Pos()), s)
				}
			}
			return true
		})
	}
	if read == 0 {
		t.Fatal("no file of lifecycle read: the check reads nothing")
	}
}

// notCopy reports whether strings under this call or literal are no founder's copy: apperr's
// errors (their message is said where the error is made), log lines, errors' own text.
func notCopy(e ast.Expr) bool {
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = u.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	if pkg, ok := sel.X.(*ast.Ident); ok && (pkg.Name == "apperr" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf" || pkg.Name == "errors") {
		return true
	}
	switch sel.Sel.Name {
	case "Debug", "Info", "Warn", "Error", "Log", "DebugContext", "InfoContext", "WarnContext", "ErrorContext":
		return true
	}
	return false
}
