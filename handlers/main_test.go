package handlers_test

import (
	"context"
	"os"
	"testing"

	"sandman/app"
	"sandman/app/apptest"
	"sandman/db/dbtest"
)

func TestMain(m *testing.M) {
	code := dbtest.Main(m)
	apptest.CloseBrowsers()
	os.Exit(code)
}

// stack is one Sandman instance as production assembles it (package app), in front of a real
// sandboxd; the methods below are what these tests add to it.
type stack struct{ *apptest.Instance }

// start runs an instance for the test.
func start(t testing.TB, opts apptest.Options) *stack {
	t.Helper()
	return &stack{apptest.Start(t, opts)}
}

// webOnly is an instance that serves pages and the API but runs no jobs (sandman serve
// --role=web): enough for what does not need a sandbox to change.
func webOnly(t testing.TB) *stack {
	t.Helper()
	return start(t, apptest.Options{Role: app.RoleWeb})
}

// count runs a counting query on the instance's database.
func (s *stack) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
