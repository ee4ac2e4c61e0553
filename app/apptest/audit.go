package apptest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Audit is what no scenario may leave behind, counted in an instance's database once the
// scenario has settled (RELIABILITY.md's "charged twice" and "stuck").
type Audit struct {
	// ChargedTwice counts builds whose net charge is neither one credit nor zero (refunded),
	// and debits that started no build.
	ChargedTwice int
	// Stuck counts what nothing will move any more: sandboxes left starting or resuming with no
	// build or resume job left to carry them on (a job waiting for a worker still will), and
	// builds left unfinished whose sandbox is no longer starting.
	Stuck int
}

// AuditDB counts what the scenario left behind in pool's database.
func AuditDB(t testing.TB, pool *pgxpool.Pool) Audit {
	t.Helper()
	var a Audit
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM (SELECT build_id FROM credit_ledger WHERE build_id IS NOT NULL
			GROUP BY build_id HAVING sum(delta) NOT IN (0, -1)) wrong)
		+ (SELECT count(*) FROM credit_ledger WHERE delta < 0 AND build_id IS NULL),
		(SELECT count(*) FROM sandboxes s WHERE s.status IN ('starting', 'resuming') AND NOT EXISTS (
			SELECT 1 FROM river_job j WHERE j.kind = CASE s.status WHEN 'starting' THEN 'build' ELSE 'resume' END
				AND j.args->>'sandbox_id' = s.id::text AND j.state IN ('available', 'pending', 'scheduled', 'running', 'retryable')))
		+ (SELECT count(*) FROM builds b JOIN sandboxes s ON s.build_id = b.id
			WHERE b.status IN ('queued', 'building') AND s.status <> 'starting')`).Scan(&a.ChargedTwice, &a.Stuck)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
