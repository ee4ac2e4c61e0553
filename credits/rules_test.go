package credits_test

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

// TestOnlyCreditsWritesTheLedger: the statements that move a balance or claim a key are called
// from package credits and nowhere else in the repository, so a debit or a refund cannot skip
// its rules (its key, its floor of zero, its once per build). Tests read the ledger
// (ListCreditLedger) or write rows with plain SQL; the generated code in db declares them.
func TestOnlyCreditsWritesTheLedger(t *testing.T) {
	t.Parallel()
	writers := []string{"InsertCreditDebit", "GetCreditLedgerByKey", "SetCreditLedgerBuild", "DebitUserCredit",
		"InsertCreditRefund", "CreditUser"}
	var found int
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !slices.Contains(writers, sel.Sel.Name) {
				return true
			}
			switch dir := filepath.ToSlash(filepath.Dir(path)); dir {
			case "../credits":
				found++
			case "../db":
			default:
				t.Errorf("%s uses %s: the ledger is written through package credits", filepath.ToSlash(path), sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found < len(writers) {
		t.Fatalf("package credits calls %d of the ledger's %d writers: the check reads nothing", found, len(writers))
	}
}
