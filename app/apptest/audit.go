package apptest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/internal/testkit"
)

// AuditDB counts, in pool's database once a scenario has settled, what no scenario may leave
// behind (RELIABILITY.md's columns):
//   - lost: deliveries of the provider's webhooks stored and never applied, with no job left to
//     apply them; sandboxes whose history is not one unbroken chain ending in the row's state
//     (a state change not recorded, or recorded from a state the row was not in);
//   - charged twice: builds whose net charge is neither one credit nor zero (refunded), and
//     debits that started no build;
//   - stuck: sandboxes left starting or resuming with no build or resume job left to carry them
//     on (a job waiting for a worker still will), and builds left unfinished whose sandbox is no
//     longer starting.
func AuditDB(t testing.TB, pool *pgxpool.Pool) *testkit.Counts {
	t.Helper()
	var a testkit.Counts
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM webhook_deliveries d WHERE d.processed_at IS NULL AND NOT EXISTS (
			SELECT 1 FROM river_job j WHERE j.kind = 'webhook' AND j.args->>'delivery_id' = d.id::text
				AND j.state IN ('available', 'pending', 'scheduled', 'running', 'retryable')))
		+ (SELECT count(*) FROM sandboxes s WHERE s.status <> coalesce(
				(SELECT e.to_status FROM sandbox_events e WHERE e.sandbox_id = s.id ORDER BY e.id DESC LIMIT 1), 'starting')
			OR EXISTS (SELECT 1 FROM (SELECT e.from_status, lag(e.to_status) OVER (ORDER BY e.id) AS before
				FROM sandbox_events e WHERE e.sandbox_id = s.id) chain WHERE chain.before <> chain.from_status)),
		(SELECT count(*) FROM (SELECT build_id FROM credit_ledger WHERE build_id IS NOT NULL
			GROUP BY build_id HAVING sum(delta) NOT IN (0, -1)) wrong)
		+ (SELECT count(*) FROM credit_ledger WHERE delta < 0 AND build_id IS NULL),
		(SELECT count(*) FROM sandboxes s WHERE s.status IN ('starting', 'resuming') AND NOT EXISTS (
			SELECT 1 FROM river_job j WHERE j.kind = CASE s.status WHEN 'starting' THEN 'build' ELSE 'resume' END
				AND j.args->>'sandbox_id' = s.id::text AND j.state IN ('available', 'pending', 'scheduled', 'running', 'retryable')))
		+ (SELECT count(*) FROM builds b JOIN sandboxes s ON s.build_id = b.id
			WHERE b.status IN ('queued', 'building') AND s.status <> 'starting')`).Scan(&a.Lost, &a.ChargedTwice, &a.Stuck)
	if err != nil {
		t.Fatal(err)
	}
	return &a
}
