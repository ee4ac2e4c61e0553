package apptest_test

import (
	"context"
	"os"
	"testing"

	"sandman/app/apptest"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
)

func TestMain(m *testing.M) {
	code := dbtest.Main(m)
	apptest.CloseBrowsers()
	os.Exit(code)
}

// AuditDB counts each thing a scenario may leave behind in its column, so a RELIABILITY.md row
// that says 0 is one it would have counted: a settled database counts nothing, and each damage
// below counts one in its own column.
func TestAuditDBCountsWhatWasLeftBehind(t *testing.T) {
	t.Parallel()
	// A founder with a project, a ready build charged once, and its sandbox running with an
	// unbroken history: starting → running.
	const settled = `
		INSERT INTO users (id, email, password_hash, credits) VALUES ('00000000-0000-0000-0000-00000000000a', 'a@example.com', 'x', 4);
		INSERT INTO projects (id, owner_id, name, start_command, port) VALUES ('00000000-0000-0000-0000-00000000000b', '00000000-0000-0000-0000-00000000000a', 'p', 'node index.js', 3000);
		INSERT INTO versions (id, project_id, number, source, file_count, total_bytes) VALUES ('00000000-0000-0000-0000-00000000000e', '00000000-0000-0000-0000-00000000000b', 1, 'created', 0, 0);
		INSERT INTO builds (id, project_id, version, kind, status, files_version_id) VALUES ('00000000-0000-0000-0000-00000000000c', '00000000-0000-0000-0000-00000000000b', 1, 'initial', 'ready', '00000000-0000-0000-0000-00000000000e');
		INSERT INTO credit_ledger (user_id, delta, reason, build_id) VALUES ('00000000-0000-0000-0000-00000000000a', -1, 'build', '00000000-0000-0000-0000-00000000000c');
		INSERT INTO sandboxes (id, provider_id, owner_id, project_id, build_id, status, deployed_version_id) VALUES ('00000000-0000-0000-0000-00000000000d', 'i1',
			'00000000-0000-0000-0000-00000000000a', '00000000-0000-0000-0000-00000000000b', '00000000-0000-0000-0000-00000000000c', 'running',
			'00000000-0000-0000-0000-00000000000e');
		INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) VALUES ('00000000-0000-0000-0000-00000000000d', 'starting', 'running', 'build', 'ready');
		INSERT INTO webhook_deliveries (event_id, headers, body, outcome, processed_at) VALUES ('e1', '{}', '{}', 'applied', now());`
	for _, tt := range []struct {
		name, damage string
		want         testkit.Counts
	}{
		{name: "settled", want: testkit.Counts{}},
		{name: "a delivery never applied, no job left", want: testkit.Counts{Lost: 1},
			damage: `INSERT INTO webhook_deliveries (event_id, headers, body) VALUES ('e2', '{}', '{}')`},
		{name: "a change not recorded", want: testkit.Counts{Lost: 1},
			damage: `UPDATE sandboxes SET status = 'paused'`},
		{name: "a change recorded from a state the row was not in", want: testkit.Counts{Lost: 1},
			damage: `INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) VALUES ('00000000-0000-0000-0000-00000000000d', 'paused', 'running', 'user', 'resumed')`},
		{name: "a build charged twice", want: testkit.Counts{ChargedTwice: 1},
			damage: `INSERT INTO credit_ledger (user_id, delta, reason, build_id) VALUES ('00000000-0000-0000-0000-00000000000a', -1, 'build', '00000000-0000-0000-0000-00000000000c')`},
		{name: "a debit that started nothing", want: testkit.Counts{ChargedTwice: 1},
			damage: `INSERT INTO credit_ledger (user_id, delta, reason) VALUES ('00000000-0000-0000-0000-00000000000a', -1, 'build')`},
		{name: "a build unfinished whose sandbox is not starting", want: testkit.Counts{Stuck: 1},
			damage: `UPDATE builds SET status = 'building'`},
		{name: "a sandbox resuming with no resume job", want: testkit.Counts{Stuck: 1},
			damage: `INSERT INTO sandbox_events (sandbox_id, from_status, to_status, source, reason) VALUES ('00000000-0000-0000-0000-00000000000d', 'running', 'resuming', 'user', 'resume');
				UPDATE sandboxes SET status = 'resuming'`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := dbtest.NewPool(t)
			if _, err := pool.Exec(context.Background(), settled+tt.damage); err != nil {
				t.Fatal(err)
			}
			if got := *apptest.AuditDB(t, pool); got != tt.want {
				t.Fatalf("audit %+v, want %+v", got, tt.want)
			}
		})
	}
}
