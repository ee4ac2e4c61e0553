package db_test

import (
	"context"
	"os"
	"testing"

	"sandman/db"
	"sandman/db/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

func TestMigrateEmptyDatabaseIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbtest.EmptyDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := range 2 {
		if err := db.Migrate(ctx, pool); err != nil {
			t.Fatalf("migrate run %d: %v", i+1, err)
		}
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM goose_db_version WHERE is_applied AND version_id > 0").Scan(&n); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir("migrations")
	if n != len(files) {
		t.Fatalf("applied %d migrations, have %d files", n, len(files))
	}
}

func TestConstraints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	q := db.New(pool)
	if _, err := q.InsertUser(ctx, db.InsertUserParams{Email: "a@example.com", PasswordHash: "x", Credits: 1}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		params db.InsertUserParams
		want   func(error) bool
	}{
		{"duplicate email", db.InsertUserParams{Email: "a@example.com", PasswordHash: "x", Credits: 1},
			func(err error) bool { return db.IsConstraint(err, "users_email_key") }},
		{"negative credits", db.InsertUserParams{Email: "b@example.com", PasswordHash: "x", Credits: -1},
			func(err error) bool { return db.IsConstraint(err, "users_credits_check") }},
		{"upper-case email", db.InsertUserParams{Email: "C@example.com", PasswordHash: "x", Credits: 1},
			func(err error) bool { return db.IsConstraint(err, "users_email_check") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := q.InsertUser(ctx, tt.params)
			if err == nil || !tt.want(err) {
				t.Fatalf("got %v", err)
			}
		})
	}
}
