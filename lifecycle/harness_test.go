package lifecycle_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/db"
	"sandman/internal/testkit"
	"sandman/lifecycle"
	"sandman/sandbox"
	"sandman/sandboxd/sandboxdtest"
)

// Helpers shared by the expiry, fault, crash and instance tests.

// buildRunning starts the project's first build and waits for its sandbox to run.
func (b *testBundle) buildRunning(t testing.TB, owner, project uuid.UUID) db.Sandbox {
	t.Helper()
	res, err := b.svc.StartBuild(context.Background(), lifecycle.Actor{Founder: owner}, project, "first-"+uuid.NewString(), false)
	if err != nil {
		t.Fatal(err)
	}
	return b.waitStatus(t, res.Sandbox.ID, sandbox.Running, time.Minute)
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
func transitionsTo(evs []db.SandboxEvent, to sandbox.Status) []db.SandboxEvent {
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
		s += string(e.FromStatus) + "→" + string(e.ToStatus) + " (" + string(e.Source) + ": " + string(e.Reason) + "); "
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

// providerCalls sums sandman_e2b_calls_total over every outcome of the calls named op (every
// call when op is empty).
func providerCalls(tb testing.TB, reg *prometheus.Registry, op string) float64 {
	tb.Helper()
	labels := map[string]string{}
	if op != "" {
		labels["op"] = op
	}
	return testkit.MetricValue(tb, reg, "sandman_e2b_calls_total", labels)
}

// killedReason is the code a gone sandbox was ended with ("" while it is not gone).
func killedReason(sb db.Sandbox) sandbox.Reason {
	if sb.KilledReason == nil {
		return ""
	}
	return *sb.KilledReason
}

// failureCause is why the sandbox's resume failed ("" for none).
func failureCause(sb db.Sandbox) sandbox.Cause {
	if sb.FailureCause == nil {
		return ""
	}
	return *sb.FailureCause
}
