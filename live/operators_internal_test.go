package live

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
)

// A founder's operator check can read "operator" just before their removal is announced and
// heard: the stream it opens after carries no console. Another operator's stream, or one whose
// check came after the removal (a grant again), keeps it.
func TestAStreamCheckedBeforeAnOperatorsRemovalCarriesNoConsole(t *testing.T) {
	t.Parallel()
	h := New(Options{Registerer: prometheus.NewRegistry(),
		Snapshot: func(context.Context, uuid.UUID) ([]Fragments, error) { return nil, nil }})
	removed, other := uuid.New(), uuid.New()
	open := func(owner uuid.UUID, seen uint64) *conn {
		t.Helper()
		c := &conn{id: newID(), owner: owner, operator: true, hub: h, sent: map[string]sentState{}}
		c.ctx, c.cancel = context.WithCancel(context.Background())
		t.Cleanup(func() { c.cancel(); h.remove(c) })
		if err := h.add(c, seen); err != nil {
			t.Fatal(err)
		}
		return c
	}
	before := h.OperatorEnds() // the check reads "operator" here…
	h.EndOperator(removed)     // …and the removal is heard before the stream is added
	if open(removed, before).operator {
		t.Fatal("a stream whose check came before its founder's removal carries the console")
	}
	if !open(other, before).operator {
		t.Fatal("another operator's stream lost the console to a removal that was not theirs")
	}
	if !open(removed, h.OperatorEnds()).operator {
		t.Fatal("a check made after the removal (the founder made an operator again) gives no console")
	}
}
