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
	fset, files := lifecycleSources(t)
	for _, f := range files {
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

// lifecycle keeps the state machine's writers, the jobs, the provider adapter, deploy and the
// webhooks; reads are overview's, sentences views', credits the ledger's (docs/architecture.md,
// "Where things go"). Its exported functions and methods stay few enough to read at once: at
// most 20, not counting the Kind and InsertOpts that River asks of each job's arguments.
func TestLifecycleExportsAtMostTwentyFunctions(t *testing.T) {
	t.Parallel()
	fset, files := lifecycleSources(t)
	var exported []string
	for _, f := range files {
		path := fset.Position(f.Pos()).Filename
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() || fn.Recv != nil && (!receiverExported(fn.Recv) || fn.Name.Name == "Kind" || fn.Name.Name == "InsertOpts") {
				continue
			}
			exported = append(exported, path+": "+fn.Name.Name)
		}
	}
	if len(exported) > 20 {
		t.Fatalf("lifecycle exports %d functions and methods, want at most 20: %s", len(exported), strings.Join(exported, ", "))
	}
}

// receiverExported reports whether a method's receiver is an exported type: methods of the
// package's own unexported types (a worker's Work, an error's Error) are not its API.
func receiverExported(recv *ast.FieldList) bool {
	t := recv.List[0].Type
	if star, ok := t.(*ast.StarExpr); ok {
		t = star.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// lifecycleSources parses lifecycle's own Go files, its tests left out, failing t when there are
// none (a check that reads nothing).
func lifecycleSources(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatal("no file of lifecycle read: the check reads nothing")
	}
	return fset, files
}
