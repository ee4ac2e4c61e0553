package lifecycle_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/db"
	"sandman/e2b"
	"sandman/lifecycle"
	"sandman/sandboxd/sandboxdtest"
)

// Helpers shared by the expiry, fault, crash and instance tests.

// eventually polls cond until it holds, failing the test with what() after d. Conditions, not
// sleeps: the machine is shared and slow at times.
func eventually(t testing.TB, d time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// buildRunning starts the project's first build and waits for its sandbox to run.
func (b *testBundle) buildRunning(t testing.TB, owner, project uuid.UUID) db.Sandbox {
	t.Helper()
	res, err := b.svc.StartBuild(context.Background(), owner, project, "first-"+uuid.NewString(), false)
	if err != nil {
		t.Fatal(err)
	}
	return b.waitStatus(t, res.Sandbox.ID, lifecycle.Running, time.Minute)
}

// get reads the sandbox row.
func (b *testBundle) get(t testing.TB, id uuid.UUID) db.Sandbox {
	t.Helper()
	sb, err := db.New(b.pool).GetSandbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

// eventsOf lists the sandbox's event rows, oldest first.
func (b *testBundle) eventsOf(t testing.TB, id uuid.UUID) []db.SandboxEvent {
	t.Helper()
	evs, err := db.New(b.pool).ListSandboxEvents(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// transitionsTo returns the events that moved the sandbox into to.
func transitionsTo(evs []db.SandboxEvent, to db.SandboxStatus) []db.SandboxEvent {
	var out []db.SandboxEvent
	for _, e := range evs {
		if e.ToStatus == to && e.FromStatus != to {
			out = append(out, e)
		}
	}
	return out
}

// history renders event rows for failure messages.
func history(evs []db.SandboxEvent) string {
	s := ""
	for _, e := range evs {
		s += string(e.FromStatus) + "→" + string(e.ToStatus) + " (" + string(e.Source) + ": " + e.Reason + "); "
	}
	return s
}

// activeFault is one entry of sandboxd's fault list.
type activeFault struct {
	ID        string `json:"id"`
	Route     string `json:"route"`
	SandboxID string `json:"sandboxID"`
	Remaining int    `json:"remaining"`
}

// faultsLeft lists the faults sandboxd still holds: a fault with a count disappears once every
// use was consumed, so this tells how many calls actually reached the provider.
func faultsLeft(t testing.TB, h *sandboxdtest.Host) []activeFault {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, h.APIURL+"/_sandboxd/faults", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", h.APIKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []activeFault
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// remainingUses is what is left of the faults on route (0 when none is left).
func remainingUses(t testing.TB, h *sandboxdtest.Host, route string) int {
	t.Helper()
	n := 0
	for _, f := range faultsLeft(t, h) {
		if f.Route == route {
			n += f.Remaining
		}
	}
	return n
}

// instance runs one more Sandman instance on the database behind pool, with its own
// connection pool as a separate process would have. stop ends its workers but leaves it able to
// insert jobs, as a web-only instance (idempotent; the test's end calls it too).
func instance(t testing.TB, pool *pgxpool.Pool, provider *e2b.Client, cfg lifecycle.Config, work bool) (b *testBundle, stop func()) {
	t.Helper()
	ctx := context.Background()
	own, err := db.Open(ctx, pool.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	if os.Getenv("SANDMAN_TEST_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	}
	svc, err := lifecycle.New(lifecycle.Options{Pool: own, Provider: provider, Config: cfg, Work: work, Logger: logger})
	if err != nil {
		own.Close()
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	if err := svc.Start(runCtx); err != nil {
		cancel()
		own.Close()
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			_ = svc.Stop(context.Background())
		})
	}
	t.Cleanup(func() {
		stop()
		own.Close()
	})
	return &testBundle{pool: own, svc: svc}, stop
}
