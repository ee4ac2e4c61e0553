package apperr_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// declaredCode is a constant of type apperr.Code, where it is declared.
type declaredCode struct{ pkg, name, at string }

// codesInRepo reads every Go file of the module (tests aside) for its constants of type
// apperr.Code, and for the places that give a code as a literal instead of one of them.
func codesInRepo(t *testing.T, root string) (declared map[string][]declaredCode, literals []string) {
	t.Helper()
	declared = map[string][]declaredCode{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || hasGoMod(path)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		inApperr := f.Name.Name == "apperr"
		isCode := func(e ast.Expr) bool {
			switch e := e.(type) {
			case *ast.Ident:
				return inApperr && e.Name == "Code"
			case *ast.SelectorExpr:
				x, ok := e.X.(*ast.Ident)
				return ok && x.Name == "apperr" && e.Sel.Name == "Code"
			}
			return false
		}
		isApperr := func(e ast.Expr, name string) bool {
			switch e := e.(type) {
			case *ast.Ident:
				return inApperr && e.Name == name
			case *ast.SelectorExpr:
				x, ok := e.X.(*ast.Ident)
				return ok && x.Name == "apperr" && e.Sel.Name == name
			}
			return false
		}
		literal := func(e ast.Expr) bool { _, ok := e.(*ast.BasicLit); return ok }
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					if vs.Type == nil || !isCode(vs.Type) {
						continue
					}
					for i, name := range vs.Names {
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok {
							t.Errorf("%s: %s is not a string literal", fset.Position(name.Pos()), name.Name)
							continue
						}
						code, _ := strconv.Unquote(lit.Value)
						declared[code] = append(declared[code], declaredCode{pkg: f.Name.Name, name: name.Name, at: fset.Position(name.Pos()).String()})
					}
				}
			case *ast.CallExpr:
				if isApperr(n.Fun, "New") && len(n.Args) > 1 && literal(n.Args[1]) {
					literals = append(literals, fset.Position(n.Args[1].Pos()).String())
				}
			case *ast.CompositeLit:
				if n.Type == nil || !isApperr(n.Type, "Error") {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok && literal(kv.Value) {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
							literals = append(literals, fset.Position(kv.Value.Pos()).String())
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return declared, literals
}

func hasGoMod(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "go.mod"))
	return err == nil
}

// documentedCodes is docs/api.md's table of error codes: each code's package.
func documentedCodes(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Error codes\n")
	if !ok {
		t.Fatalf("%s has no \"## Error codes\" section", path)
	}
	section, _, _ = strings.Cut(section, "\n#")
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| [^|]+ \\| [^|]+ \\| ([a-z]+) \\|$")
	out := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if _, dup := out[m[1]]; dup {
			t.Errorf("%s lists %q twice", path, m[1])
		}
		out[m[1]] = m[2]
	}
	if len(out) == 0 {
		t.Fatalf("%s: no row in \"Error codes\"", path)
	}
	return out
}

// Every code the JSON API can answer is a constant of type apperr.Code, declared once, by the
// package docs/api.md names, and given nowhere as a literal; and every code the table lists is
// one of them.
func TestEveryCodeIsDocumented(t *testing.T) {
	declared, literals := codesInRepo(t, "..")
	documented := documentedCodes(t, "../docs/api.md")
	for _, at := range literals {
		t.Errorf("%s: a code given as a literal; use the constant of its package", at)
	}
	codes := map[string]bool{}
	for c := range declared {
		codes[c] = true
	}
	for c := range documented {
		codes[c] = true
	}
	for code := range codes {
		t.Run(code, func(t *testing.T) {
			decl, pkg := declared[code], documented[code]
			switch {
			case len(decl) == 0:
				t.Errorf("docs/api.md lists %q, which no package declares: remove its row", code)
			case len(decl) > 1:
				t.Errorf("%q is declared %d times (%v): declare it once, in apperr if several packages return it", code, len(decl), decl)
			case pkg == "":
				t.Errorf("%s (%s) is not in docs/api.md's \"Error codes\": add a row for %q", decl[0].name, decl[0].at, code)
			case pkg != decl[0].pkg:
				t.Errorf("docs/api.md says %q is package %s's, but %s declares it (%s)", code, pkg, decl[0].pkg, decl[0].at)
			}
		})
	}
}
