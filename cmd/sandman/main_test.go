package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"sandman/db"
	"sandman/db/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

// `sandman operator add|remove EMAIL` marks an existing founder's account, idempotently, prints
// what it did, and logs who did it; an unknown account or a wrong usage is an error that says so.
func TestOperatorCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	ctx := context.Background()
	pool, err := db.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `INSERT INTO users (email, password_hash, credits) VALUES ('ops@example.com', 'x', 1)`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": url, "USER": "alice"}
	sandman := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, args, func(k string) string { return env[k] }, &out)
		return strings.TrimSpace(out.String()), err
	}
	for _, step := range []struct {
		args []string
		want string
	}{
		{[]string{"operator", "add", "ops@example.com"}, "ops@example.com is now an operator"},
		{[]string{"operator", "add", "OPS@example.com"}, "ops@example.com already is an operator"},
		{[]string{"operator", "remove", "ops@example.com"}, "ops@example.com is no longer an operator"},
		{[]string{"operator", "remove", "ops@example.com"}, "ops@example.com was not an operator"},
	} {
		got, err := sandman(step.args...)
		if err != nil || got != step.want {
			t.Fatalf("sandman %s: %q, %v; want %q", strings.Join(step.args, " "), got, err, step.want)
		}
	}
	var actor string
	if err := pool.QueryRow(ctx, `SELECT actor FROM operator_log WHERE action = 'grant'`).Scan(&actor); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(actor, "command line (alice@") {
		t.Fatalf("the grant was logged as made by %q", actor)
	}
	for args, want := range map[string]string{
		"operator add nobody@example.com": "must sign up first",
		"operator grant ops@example.com":  "usage: sandman operator add EMAIL",
		"operator add":                    "usage: sandman operator add EMAIL",
	} {
		if _, err := sandman(strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("sandman %s: %v, want an error saying %q", args, err, want)
		}
	}
}
