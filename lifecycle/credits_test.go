package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"

	"sandman/accounts"
	"sandman/apperr"
	"sandman/db"
	"sandman/lifecycle"
	"sandman/projects"
	"sandman/sandbox"
)

// founder creates a founder with credits and one counter project.
func founder(t testing.TB, pool *pgxpool.Pool, credits int32) (db.User, db.Project) {
	t.Helper()
	ctx := context.Background()
	u, err := accounts.New(pool, accounts.Options{StartCredits: credits, BcryptCost: bcrypt.MinCost}).
		SignUp(ctx, accounts.Credentials{Email: uuid.NewString()[:8] + "@example.com", Password: "long enough"}, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := projects.New(pool).CreateFromStarter(ctx, u.ID, "", "counter")
	if err != nil {
		t.Fatal(err)
	}
	return u, p
}

func credits(t testing.TB, pool *pgxpool.Pool, id uuid.UUID) int32 {
	t.Helper()
	u, err := db.New(pool).GetUserByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return u.Credits
}

func TestConcurrentRebuildsWithOneKeyChargeOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := context.Background()
	u, p := founder(t, b.pool, 3)
	if _, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "first", false); err != nil {
		t.Fatal(err)
	}
	results := make([]lifecycle.BuildResult, 8)
	errs := make([]error, 8)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			results[i], errs[i] = b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "double-click", true)
		})
	}
	wg.Wait()
	fresh := 0
	for i := range 8 {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if results[i].Build.ID != results[0].Build.ID {
			t.Fatalf("request %d started build %s, request 0 build %s", i, results[i].Build.ID, results[0].Build.ID)
		}
		if !results[i].Replayed {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d requests were charged, want 1", fresh)
	}
	if got := credits(t, b.pool, u.ID); got != 1 {
		t.Fatalf("credits = %d, want 3 - build - rebuild = 1", got)
	}
	if !results[0].Sandbox.Recreated || results[0].Build.Kind != sandbox.BuildRebuild {
		t.Fatalf("rebuild result %+v", results[0])
	}
	// The first sandbox was replaced in the same transaction.
	sandboxes := b.sandboxesOf(t, p.ID)
	if len(sandboxes) != 2 || sandboxes[1].Status != sandbox.Terminated || killedReason(sandboxes[1]) != sandbox.ReasonReplaced {
		t.Fatalf("sandboxes after rebuild: %+v", sandboxes)
	}
}

func TestRebuildWithoutCreditsChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := context.Background()
	u, p := founder(t, b.pool, 1)
	first, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "first", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "rebuild", true)
	var ae *apperr.Error
	if !errors.As(err, &ae) || ae.Kind != apperr.KindNoCredits {
		t.Fatalf("rebuild with no credits: %v", err)
	}
	if got := credits(t, b.pool, u.ID); got != 0 {
		t.Fatalf("credits = %d", got)
	}
	sandboxes := b.sandboxesOf(t, p.ID)
	if len(sandboxes) != 1 || sandboxes[0].ID != first.Sandbox.ID || sandboxes[0].Status != sandbox.Starting {
		t.Fatalf("a refused rebuild changed sandboxes: %+v", sandboxes)
	}
	// The refused key was not consumed: with a credit it works.
	if _, err := b.pool.Exec(ctx, "UPDATE users SET credits = 1 WHERE id = $1", u.ID); err != nil {
		t.Fatal(err)
	}
	if res, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "rebuild", true); err != nil || res.Replayed {
		t.Fatalf("rebuild after top-up: %+v %v", res, err)
	}
}

func TestBuildRules(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := context.Background()
	u, p := founder(t, b.pool, 5)
	other, _ := founder(t, b.pool, 5)
	tests := []struct {
		name    string
		owner   uuid.UUID
		key     string
		rebuild bool
		kind    apperr.Kind
	}{
		{"rebuild before any build", u.ID, "k1", true, apperr.KindConflict},
		{"no key", u.ID, "", false, apperr.KindInvalid},
		{"another founder's project", other.ID, "k2", false, apperr.KindNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: tt.owner}, p.ID, tt.key, tt.rebuild)
			var ae *apperr.Error
			if !errors.As(err, &ae) || ae.Kind != tt.kind {
				t.Fatalf("got %v, want kind %d", err, tt.kind)
			}
		})
	}
	if got := credits(t, b.pool, u.ID); got != 5 {
		t.Fatalf("refused requests charged: credits = %d", got)
	}
	if _, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "k3", false); err != nil {
		t.Fatal(err)
	}
	_, err := b.svc.StartBuild(ctx, lifecycle.Actor{Founder: u.ID}, p.ID, "k4", false)
	if ae, ok := apperr.As(err); !ok || ae.Code != "already_built" {
		t.Fatalf("second first-build: %v", err)
	}
}
