package credits_test

import (
	"path/filepath"
	"testing"

	"sandman/internal/testkit"
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
	for path, names := range testkit.SelectorUses(t, "..", writers...) {
		switch filepath.Dir(path) {
		case "../credits":
			found += len(names)
		case "../db":
		default:
			for _, n := range names {
				t.Errorf("%s uses %s: the ledger is written through package credits", path, n)
			}
		}
	}
	if found < len(writers) {
		t.Fatalf("package credits calls %d of the ledger's %d writers: the check reads nothing", found, len(writers))
	}
}
