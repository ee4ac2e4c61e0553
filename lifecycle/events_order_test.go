package lifecycle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/e2b"
	"sandman/lifecycle"
	"sandman/projects"
	"sandman/sandbox"
)

// orderEvent is one provider event of the scenario with the state it implies (empty for
// updated, which only moves the end time).
type orderEvent struct {
	ev    lifecycle.ProviderEvent
	state sandbox.Status
}

// scenario is a realistic life of one sandbox as the provider reports it: created, a timeout
// change, an idle pause, a resume (connect extends the lifetime again), another pause, the end.
func scenario(providerID string, base time.Time, killReason string) []orderEvent {
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	endA, endB := at(3600), at(7200)
	var gone sandbox.Status
	switch killReason {
	case "timeout":
		gone = sandbox.Expired
	default: // request (Sandman did not ask: KillRequested is false), admin, orphaned…
		gone = sandbox.Killed
	}
	mk := func(i int, typ string, state sandbox.Status) orderEvent {
		return orderEvent{state: state, ev: lifecycle.ProviderEvent{ID: providerID + "-" + strconv.Itoa(i), Type: typ,
			SandboxID: providerID, Timestamp: at(i)}}
	}
	evs := []orderEvent{
		mk(1, lifecycle.EventCreated, sandbox.Running),
		mk(2, lifecycle.EventUpdated, ""),
		mk(3, lifecycle.EventPaused, sandbox.Paused),
		mk(4, lifecycle.EventResumed, sandbox.Running),
		mk(5, lifecycle.EventUpdated, ""),
		mk(6, lifecycle.EventPaused, sandbox.Paused),
		mk(7, lifecycle.EventKilled, gone),
	}
	evs[1].ev.SetTimeout = &endA
	evs[4].ev.SetTimeout = &endB
	evs[6].ev.KillReason = &killReason
	return evs
}

// runningSandbox inserts a sandbox row as a finished build leaves it: running, with the
// provider id the events name, changed well before the first of them (webhooks arrive late).
func runningSandbox(t *testing.T, b *testBundle, owner, project uuid.UUID, providerID string, changedAt time.Time) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	q := db.New(b.pool)
	v, err := q.GetCurrentVersion(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	build, err := q.InsertBuild(ctx, db.InsertBuildParams{ProjectID: project, Kind: sandbox.BuildInitial, FilesVersionID: v.ID})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := q.InsertSandbox(ctx, db.InsertSandboxParams{OwnerID: owner, ProjectID: project, BuildID: build.ID, Vcpus: 2, MemoryMib: 512, LifetimeSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	// Fixture only: the build worker would set these through Apply.
	if _, err := b.pool.Exec(ctx, `UPDATE sandboxes SET provider_id = $2, status = 'running', state_changed_at = $3
		WHERE id = $1`, sb.ID, providerID, changedAt); err != nil {
		t.Fatal(err)
	}
	return sb.ID
}

// TestProviderEventsInAnyOrderEndInTheNewestState delivers a sandbox's events (some twice, as
// webhook retries and the events API do) in many random orders: whatever the order, the row
// ends in the state of the newest event, and no older event is ever applied after a newer one.
func TestProviderEventsInAnyOrderEndInTheNewestState(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := context.Background()
	u, p := founder(t, b.pool, 1)
	q := db.New(b.pool)

	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SANDMAN_ORDER_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, seed>>1))
	defer func() {
		if t.Failed() {
			t.Logf("seed %d (rerun with SANDMAN_ORDER_SEED=%d)", seed, seed)
		}
	}()

	reasons := []string{"request", "timeout", "admin"}
	const orders = 200
	for n := range orders {
		// Hours old: far more than any skew allowance, as for a webhook retried after an outage.
		base := time.Now().Add(-2 * time.Hour).Truncate(time.Microsecond)
		providerID := fmt.Sprintf("order-%d-%s", n, uuid.NewString()[:8])
		all := scenario(providerID, base, reasons[rng.IntN(len(reasons))])
		// Every state-bearing event may be the newest one the provider has sent so far.
		var ends []int
		for i, e := range all {
			if e.state != "" {
				ends = append(ends, i)
			}
		}
		evs := all[:ends[rng.IntN(len(ends))]+1]
		newest := evs[len(evs)-1]

		var deliveries []orderEvent
		for _, e := range evs {
			deliveries = append(deliveries, e)
			if rng.IntN(3) == 0 {
				deliveries = append(deliveries, e)
			}
		}
		rng.Shuffle(len(deliveries), func(i, j int) { deliveries[i], deliveries[j] = deliveries[j], deliveries[i] })

		id := runningSandbox(t, b, u.ID, p.ID, providerID, base.Add(-time.Minute))
		endAtTime := map[int64]time.Time{} // end time (µs) → timestamp of the event that set it
		for _, e := range evs {
			if e.ev.SetTimeout != nil {
				endAtTime[e.ev.SetTimeout.UnixMicro()] = e.ev.Timestamp
			}
		}
		var lastEndSource time.Time
		order := make([]string, 0, len(deliveries))
		for _, d := range deliveries {
			order = append(order, d.ev.ID[len(providerID)+1:])
			if _, err := b.svc.ApplyProviderEvent(ctx, d.ev, sandbox.SourceWebhook); err != nil {
				t.Fatalf("order %d %v: apply %s: %v", n, order, d.ev.Type, err)
			}
			sb, err := q.GetSandbox(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if sb.EndAt != nil {
				src, ok := endAtTime[sb.EndAt.UnixMicro()]
				if !ok {
					t.Fatalf("order %d %v: end time %s was set by no event", n, order, sb.EndAt)
				}
				if src.Before(lastEndSource) {
					t.Fatalf("order %d %v: an older update (%s) overwrote the end time of a newer one (%s)", n, order, src, lastEndSource)
				}
				lastEndSource = src
			}
		}

		sb, err := q.GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if sb.Status != newest.state {
			t.Fatalf("order %d (events 1..%d, applied %v): status %s, want %s from the newest event %s",
				n, len(evs), order, sb.Status, newest.state, newest.ev.Type)
		}
		if newest.ev.Type == lifecycle.EventKilled && providerKillReason(sb) != *newest.ev.KillReason {
			t.Fatalf("order %d %v: killed reason %q (%q), want the provider's %q", n, order, killedReason(sb), sb.KilledDetail, *newest.ev.KillReason)
		}
		events, err := q.ListSandboxEvents(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var prev time.Time
		seen := map[string]bool{}
		for _, e := range events {
			if e.ProviderTimestamp == nil {
				continue
			}
			if !e.ProviderTimestamp.After(prev) {
				t.Fatalf("order %d %v: event %s (%s) applied after a newer one (%s)", n, order, *e.ProviderEventID, e.ProviderTimestamp, prev)
			}
			if seen[*e.ProviderEventID] {
				t.Fatalf("order %d %v: event %s applied twice", n, order, *e.ProviderEventID)
			}
			seen[*e.ProviderEventID] = true
			prev = *e.ProviderTimestamp
		}
	}
}

// A group of deliveries that arrived together (the webhook receiver's group commit) applies,
// per sandbox, only its newest event, whatever their order in the group: the older ones are
// ignored as they are when the newest arrives first. Each event is stored once, a repeat in the
// same group or of an earlier group is a duplicate, and every stored delivery gets its outcome.
func TestWebhookGroupAppliesEachSandboxsNewestEvent(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	ctx := context.Background()
	u, p := founder(t, b.pool, 1)
	base := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	providerID := "group-" + uuid.NewString()[:8]
	id := runningSandbox(t, b, u.ID, p.ID, providerID, base.Add(-time.Minute))
	ev := func(name, typ string, at int) e2b.Event {
		return e2b.Event{ID: providerID + "-" + name, Type: typ, SandboxID: providerID, Timestamp: base.Add(time.Duration(at) * time.Second)}
	}
	group := []e2b.Event{
		ev("resumed-2", lifecycle.EventResumed, 2),
		ev("paused-3", lifecycle.EventPaused, 3), // the newest
		ev("paused-1", lifecycle.EventPaused, 1),
		ev("resumed-2", lifecycle.EventResumed, 2), // again in the same group
		ev("checkpointed", "sandbox.lifecycle.checkpointed", 4),
	}
	dups, err := b.svc.StoreWebhookGroup(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, false, false, true, false}; fmt.Sprint(dups) != fmt.Sprint(want) {
		t.Fatalf("duplicates %v, want %v", dups, want)
	}
	outcomes := map[string]string{}
	rows, err := b.pool.Query(ctx, "SELECT event_id, outcome FROM webhook_deliveries WHERE event_id LIKE $1 || '%' AND processed_at IS NOT NULL", providerID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e, o string
		if err := rows.Scan(&e, &o); err != nil {
			t.Fatal(err)
		}
		outcomes[strings.TrimPrefix(e, providerID+"-")] = o
	}
	want := map[string]string{"resumed-2": "ignored", "paused-3": "applied", "paused-1": "ignored", "checkpointed": "unknown_type"}
	if fmt.Sprint(outcomes) != fmt.Sprint(want) {
		t.Fatalf("outcomes %v, want %v", outcomes, want)
	}
	var status string
	var applied int
	if err := b.pool.QueryRow(ctx, `SELECT s.status, (SELECT count(*) FROM sandbox_events e WHERE e.sandbox_id = s.id AND e.provider_event_id IS NOT NULL)
		FROM sandboxes s WHERE s.id = $1`, id).Scan(&status, &applied); err != nil {
		t.Fatal(err)
	}
	if status != string(sandbox.Paused) || applied != 1 {
		t.Fatalf("sandbox %s with %d provider events applied, want paused by the newest event alone", status, applied)
	}
	// The same events in a later group: duplicates all, nothing applied again.
	dups, err = b.svc.StoreWebhookGroup(ctx, group[:3])
	if err != nil || fmt.Sprint(dups) != "[true true true]" {
		t.Fatalf("a later group of the same events: duplicates %v (%v), want all", dups, err)
	}
	// The newest events of their sandboxes that change nothing (a pause of a paused sandbox, an
	// unknown sandbox's event) are stored ignored, not applied.
	later := []e2b.Event{ev("paused-5", lifecycle.EventPaused, 5),
		{ID: providerID + "-nobodys", Type: lifecycle.EventResumed, SandboxID: "nobody-" + providerID, Timestamp: base}}
	if _, err := b.svc.StoreWebhookGroup(ctx, later); err != nil {
		t.Fatal(err)
	}
	for _, e := range later {
		var o string
		if err := b.pool.QueryRow(ctx, "SELECT outcome FROM webhook_deliveries WHERE event_id = $1", e.ID).Scan(&o); err != nil {
			t.Fatal(err)
		}
		if o != "ignored" {
			t.Errorf("%s, which changed nothing, stored with outcome %q, want ignored", strings.TrimPrefix(e.ID, providerID+"-"), o)
		}
	}
}

// providerKillReason is the provider's own kill_reason as the row keeps it: a code for the
// reasons Sandman knows, the raw text in killed_detail for the others.
func providerKillReason(sb db.Sandbox) string {
	switch killedReason(sb) {
	case sandbox.ReasonProviderTimeout:
		return "timeout"
	case sandbox.ReasonProviderRequest:
		return "request"
	case sandbox.ReasonProviderOther:
		return sb.KilledDetail
	}
	return "(not the provider's: " + string(killedReason(sb)) + ")"
}

// A pause the provider reports keeps the snapshot its project's pause kind asks for, since the
// provider does not say which: a files-only project's preview must be started again when it
// wakes, a memory snapshot's must not.
func TestAProviderPauseRecordsItsProjectsSnapshotKind(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	ctx := context.Background()
	u, _ := founder(t, b.pool, 1)
	for _, kind := range []sandbox.PauseKind{sandbox.PauseMemory, sandbox.PauseFilesystem} {
		p, err := projects.New(b.pool).CreateFromStarter(ctx, u.ID, "", "counter")
		if err != nil {
			t.Fatal(err)
		}
		// Fixture only: a project's pause kind is chosen when it is made.
		if _, err := b.pool.Exec(ctx, `UPDATE projects SET pause_kind = $2 WHERE id = $1`, p.ID, kind); err != nil {
			t.Fatal(err)
		}
		providerID := "kind-" + uuid.NewString()[:8]
		id := runningSandbox(t, b, u.ID, p.ID, providerID, time.Now().Add(-time.Minute))
		ev := lifecycle.ProviderEvent{ID: providerID + "-paused", Type: lifecycle.EventPaused, SandboxID: providerID, Timestamp: time.Now()}
		changed, err := b.svc.ApplyProviderEvent(ctx, ev, sandbox.SourceWebhook)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := db.New(b.pool).GetSandbox(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		got := sandbox.PauseKind("none")
		if sb.SnapshotKind != nil {
			got = *sb.SnapshotKind
		}
		if !changed || sb.Status != sandbox.Paused || got != kind {
			t.Errorf("a %s project's sandbox paused by the provider: %s (changed %v) with a %s snapshot, want paused with a %s one",
				kind, sb.Status, changed, got, kind)
		}
	}
}
