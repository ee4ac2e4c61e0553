package credits_test

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/credits"
	"sandman/db"
	"sandman/db/dbtest"
	"sandman/projects"
	"sandman/sandbox"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// founder makes a founder with n credits and a build of a project of theirs, for a debit to pay
// for and a refund to give back.
func founder(t testing.TB, pool *pgxpool.Pool, n int32) (owner, build uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	u, err := db.New(pool).InsertUser(ctx, db.InsertUserParams{Email: uuid.NewString()[:8] + "@example.com", PasswordHash: "x", Credits: n})
	if err != nil {
		t.Fatal(err)
	}
	p, err := projects.New(pool).CreateFromStarter(ctx, u.ID, "", "static")
	if err != nil {
		t.Fatal(err)
	}
	err = db.InTx(ctx, pool, func(tx db.Tx) error {
		cur, err := tx.GetCurrentVersion(ctx, p.ID)
		if err != nil {
			return err
		}
		b, err := tx.InsertBuild(ctx, db.InsertBuildParams{ProjectID: p.ID, Kind: sandbox.BuildInitial, FilesVersionID: cur.ID})
		build = b.ID
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return u.ID, build
}

// spend is a build's debit as the lifecycle makes it, in a transaction of its own: claim the key,
// take the credit, record the build it paid for. earlier is the entry of the claim that came
// first, when the key had been claimed.
func spend(ctx context.Context, pool *pgxpool.Pool, owner uuid.UUID, key string, build uuid.UUID) (earlier *db.CreditLedger, err error) {
	err = db.InTx(ctx, pool, func(tx db.Tx) error {
		var debit *credits.Debit
		debit, earlier, err = credits.Claim(ctx, tx, owner, key, db.LedgerReasonBuild)
		if err != nil || earlier != nil {
			return err
		}
		if err := debit.Take(ctx, tx); err != nil {
			return err
		}
		return debit.PaysFor(ctx, tx, build)
	})
	return earlier, err
}

func balance(t testing.TB, pool *pgxpool.Pool, owner uuid.UUID) int32 {
	t.Helper()
	n, err := credits.New(pool).Balance(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ledger(t testing.TB, pool *pgxpool.Pool, owner uuid.UUID) []db.CreditLedger {
	t.Helper()
	rows, err := db.New(pool).ListCreditLedger(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// One key sent many times at once (a double click, a client's retries) is charged once: every
// other request finds the first one's entry and the build it paid for.
func TestAKeySentManyTimesAtOnceIsChargedOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx := context.Background()
	owner, build := founder(t, pool, 10)
	const requests = 8
	earlier := make([]*db.CreditLedger, requests)
	errs := make([]error, requests)
	var wg sync.WaitGroup
	for i := range requests {
		wg.Go(func() { earlier[i], errs[i] = spend(ctx, pool, owner, "double-click", build) })
	}
	wg.Wait()
	charged := 0
	for i := range requests {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if earlier[i] == nil {
			charged++
		} else if earlier[i].BuildID == nil || *earlier[i].BuildID != build {
			t.Fatalf("request %d found the first claim's entry %+v, without the build it paid for (%s)", i, earlier[i], build)
		}
	}
	if charged != 1 {
		t.Fatalf("%d of %d requests with one key were charged, want 1", charged, requests)
	}
	if got := balance(t, pool, owner); got != 9 {
		t.Fatalf("balance %d, want 10 - 1", got)
	}
	if rows := ledger(t, pool, owner); len(rows) != 1 || rows[0].Delta != -1 {
		t.Fatalf("ledger %+v, want one debit", rows)
	}
}

// A key is the founder's own: another founder's request with the same key is charged for itself,
// never taken for a replay of the first founder's.
func TestAKeyIsTheFoundersOwn(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx := context.Background()
	alice, aliceBuild := founder(t, pool, 2)
	bob, bobBuild := founder(t, pool, 2)
	for _, f := range []struct {
		owner, build uuid.UUID
	}{{alice, aliceBuild}, {bob, bobBuild}} {
		earlier, err := spend(ctx, pool, f.owner, "build-1", f.build)
		if err != nil || earlier != nil {
			t.Fatalf("founder %s's first use of the key: earlier %+v, %v; want a charge of their own", f.owner, earlier, err)
		}
		if got := balance(t, pool, f.owner); got != 1 {
			t.Fatalf("founder %s's balance %d, want 2 - 1", f.owner, got)
		}
	}
}

// A debit with no credit left is refused (ErrNoCredit) and takes nothing; its transaction rolls
// back, so its key is free for the same request once there is a credit.
func TestADebitWithNoCreditLeftTakesNothingAndKeepsItsKeyFree(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx := context.Background()
	owner, build := founder(t, pool, 1)
	if _, err := spend(ctx, pool, owner, "first", build); err != nil {
		t.Fatal(err)
	}
	if _, err := spend(ctx, pool, owner, "second", build); !errors.Is(err, credits.ErrNoCredit) {
		t.Fatalf("a debit with no credit left: %v, want ErrNoCredit", err)
	}
	if got := balance(t, pool, owner); got != 0 {
		t.Fatalf("balance %d after a refused debit, want 0", got)
	}
	if rows := ledger(t, pool, owner); len(rows) != 1 {
		t.Fatalf("ledger %+v after a refused debit, want the first debit alone", rows)
	}
	err := db.InTx(ctx, pool, func(tx db.Tx) error { return credits.Refund(ctx, tx, owner, build, "test: a credit back") })
	if err != nil {
		t.Fatal(err)
	}
	if earlier, err := spend(ctx, pool, owner, "second", build); err != nil || earlier != nil {
		t.Fatalf("the refused request again, with a credit: earlier %+v, %v; want it charged", earlier, err)
	}
}

// A failed build's credit comes back once, however many times (and from however many places at
// once) it is refunded, with one ledger entry that says why.
func TestABuildIsRefundedOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewPool(t)
	ctx := context.Background()
	owner, build := founder(t, pool, 5)
	if _, err := spend(ctx, pool, owner, "build", build); err != nil {
		t.Fatal(err)
	}
	const refunds = 4
	errs := make([]error, refunds)
	var wg sync.WaitGroup
	for i := range refunds {
		wg.Go(func() {
			errs[i] = db.InTx(ctx, pool, func(tx db.Tx) error {
				return credits.Refund(ctx, tx, owner, build, "the provider failed after retries: 502")
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("refund %d: %v", i, err)
		}
	}
	if got := balance(t, pool, owner); got != 5 {
		t.Fatalf("balance %d after %d refunds of one build, want 5 (the debit given back once)", got, refunds)
	}
	var back []db.CreditLedger
	for _, r := range ledger(t, pool, owner) {
		if r.Delta > 0 {
			back = append(back, r)
		}
	}
	if len(back) != 1 || back[0].Reason != db.LedgerReasonRefund || back[0].BuildID == nil || *back[0].BuildID != build ||
		back[0].Detail != "the provider failed after retries: 502" {
		t.Fatalf("refunds in the ledger %+v, want one of this build saying why", back)
	}
}
