package lifecycle_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"sandman/e2b"
	"sandman/lifecycle"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// TestReconcileOverManyPagesWithResumedSandboxes: the reconcile walks the provider's list 100 at a
// time, and a resume moves a sandbox in that list (its startedAt is the current run's start). With
// more than a page of sandboxes, some resumed (the oldest, one in the middle, the newest, one
// twice) and two of the resumed ones killed since, one pass verifies every live row, marks none
// unknown, and finds no ghost of a killed sandbox to kill as an orphan.
func TestReconcileOverManyPagesWithResumedSandboxes(t *testing.T) {
	t.Parallel()
	host := sandboxdtest.Start(t, sandboxdtest.WithConfig(func(c *sandboxd.Config) {
		c.Isolation = sandboxd.IsolationNone // the list does not depend on it; no process per sandbox
		c.MaxSandboxes, c.MaxStored = -1, -1
	}))
	cfg := fastConfig()
	cfg.ReconcileEvery, cfg.SweepEvery = 0, 0
	cfg.OrphanAge = time.Millisecond // a ghost of a killed sandbox is old enough to be killed again
	b := setupWith(t, host, cfg, false)
	reg := b.Registry()
	provider := providerFor(t, host) // the test's own calls, apart from the instance's
	u, p := founder(t, b.pool, 1)
	ctx := context.Background()

	const n = e2b.MaxListLimit + 5
	ids := make([]string, n)
	for i := range ids {
		sb, err := provider.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 3600,
			Metadata: map[string]string{lifecycle.MetaApp: "sandman"}})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = sb.ID
	}
	if _, err := b.pool.Exec(ctx, `
		WITH b AS (
			INSERT INTO builds (project_id, version, kind, status, files_version_id)
			SELECT $1, g, 'initial', 'ready', (SELECT id FROM versions WHERE project_id = $1 AND number = 1)
			FROM generate_series(1, $3::int) g RETURNING id, version, files_version_id)
		INSERT INTO sandboxes (provider_id, owner_id, project_id, build_id, status, end_at, deployed_version_id)
		SELECT ids.id, $2, $1, b.id, 'running', now() + interval '1 hour', b.files_version_id
		FROM unnest($4::text[]) WITH ORDINALITY AS ids(id, n) JOIN b ON b.version = ids.n`,
		p.ID, u.ID, n, ids); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, 0, 2, n / 2, n - 1, 1} {
		if paused, err := provider.Pause(ctx, ids[i], true); err != nil || !paused {
			t.Fatalf("pause %s: %v %v", ids[i], paused, err)
		}
		if _, resumed, err := provider.Connect(ctx, ids[i], 3600); err != nil || !resumed {
			t.Fatalf("resume %s: %v %v", ids[i], resumed, err)
		}
	}
	killed := []string{ids[0], ids[n/2]}
	for _, id := range killed {
		if err := provider.Kill(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.pool.Exec(ctx, "UPDATE sandboxes SET status = 'killed', killed_at = now() WHERE provider_id = ANY($1)", killed); err != nil {
		t.Fatal(err)
	}

	kills := providerCalls(t, reg, "kill")
	pass := time.Now()
	if err := b.svc.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	var verified, unknown, orphans int
	if err := b.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'running' AND last_verified_at >= $1),
		count(*) FILTER (WHERE status = 'unknown') FROM sandboxes`, pass).Scan(&verified, &unknown); err != nil {
		t.Fatal(err)
	}
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM orphan_kills").Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if verified != n-len(killed) || unknown != 0 {
		t.Fatalf("one pass verified %d of the %d live rows running and marked %d unknown, want all and none", verified, n-len(killed), unknown)
	}
	if k := providerCalls(t, reg, "kill") - kills; k != 0 || orphans != 0 {
		t.Fatalf("the pass sent %v kills and recorded %d orphan kills: a killed sandbox was still listed", k, orphans)
	}
	// What the provider lists, walked as the reconcile walks it: every live sandbox, once.
	listed, err := provider.ListAllSandboxes(ctx, e2b.ListParams{Metadata: map[string]string{lifecycle.MetaApp: "sandman"}, Limit: e2b.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != n-len(killed) {
		t.Fatalf("the list walk found %d sandboxes, want %d", len(listed), n-len(killed))
	}
	for _, sb := range listed {
		if slices.Contains(killed, sb.ID) {
			t.Fatalf("the killed sandbox %s is listed", sb.ID)
		}
	}
}
