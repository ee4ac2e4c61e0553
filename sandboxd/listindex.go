package sandboxd

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"sandman/sandboxd/store"
)

// sandboxIndex keeps the sandboxes in the list's ascending order (startedAt, then id
// descending; the descending order is its reverse). startedAt is the provider's: the start of
// the sandbox's current run, set at create and again at every resume, so a resume moves the
// sandbox to the newest end (update). Kept sorted, a page of the list is a binary search for the
// cursor and a walk to the page's last match, where sorting every sandbox for every page made
// walking 100,000 of them quadratic (docs/sandboxd.md, "The list"). It also counts the running
// sandboxes, for the running cap, and every change to any sandbox (gen), which the list's
// running count is kept against. Guarded by Server.mu.
type sandboxIndex struct {
	all     []*sandbox
	running int
	gen     uint64
	// total is the last X-Total-Running counted, for filter, while gen has not moved.
	total struct {
		counted bool
		gen     uint64
		filter  string
		n       int
	}
}

// positionOf is a record's place in the list (what a next token names).
func positionOf(r *store.Record) listCursor { return listCursor{startedAt: r.StartedAt, id: r.ID} }

// compareStart orders a and b as the list's ascending order does.
func compareStart(a, b listCursor) int {
	if c := a.startedAt.Compare(b.startedAt); c != 0 {
		return c
	}
	return strings.Compare(b.id, a.id)
}

// search finds where c is (found) or would be in the ascending order.
func (x *sandboxIndex) search(c listCursor) (int, bool) {
	return slices.BinarySearchFunc(x.all, c, func(sb *sandbox, c listCursor) int {
		return compareStart(positionOf(&sb.rec), c)
	})
}

// add puts a new (or recovered) sandbox in the order. A new one is the newest, so it joins the
// end. The caller puts it in Server.sandboxes too.
func (x *sandboxIndex) add(sb *sandbox) {
	i, _ := x.search(positionOf(&sb.rec))
	x.all = slices.Insert(x.all, i, sb)
	x.count(&sb.rec, 1)
}

// remove takes a sandbox out of the order (the caller deletes it from Server.sandboxes).
func (x *sandboxIndex) remove(sb *sandbox) {
	x.unlink(sb)
	x.count(&sb.rec, -1)
}

// update replaces a sandbox's record. A resume gives it a new startedAt, so it is taken out at
// its old place and put in at its new one: left where it was, the order is no longer sorted and
// every binary search on it may miss, so a killed sandbox stayed listed and pages skipped or
// repeated. Ordering by a key that never changes (createdAt) would keep the slot, but the list
// would no longer be the provider's, newest startedAt first, nor its token a startedAt.
func (x *sandboxIndex) update(sb *sandbox, rec store.Record) {
	x.count(&sb.rec, -1)
	if compareStart(positionOf(&sb.rec), positionOf(&rec)) != 0 {
		x.unlink(sb)
		sb.rec = rec
		i, _ := x.search(positionOf(&sb.rec))
		x.all = slices.Insert(x.all, i, sb)
	} else {
		sb.rec = rec
	}
	x.count(&sb.rec, 1)
}

// unlink takes sb out of the order, found at its record's place.
func (x *sandboxIndex) unlink(sb *sandbox) {
	if i, ok := x.search(positionOf(&sb.rec)); ok && x.all[i] == sb {
		x.all = slices.Delete(x.all, i, i+1)
	}
}

func (x *sandboxIndex) count(r *store.Record, delta int) {
	if r.State == store.StateRunning {
		x.running += delta
	}
	x.gen++
}

// matches reports whether a record passes the list's filters (state, metadata, startedAfter).
func (lq listQuery) matches(r *store.Record) bool {
	return slices.Contains(lq.states, r.State) && matchesMetadata(r.Metadata, lq.metadata) &&
		(lq.startedAfter.IsZero() || !r.StartedAt.Before(lq.startedAfter))
}

// runningLocked counts the running sandboxes that match lq's filters, before pagination (the
// X-Total-Running header). Every page of a walk asks the same question; the answer is kept
// until a sandbox changes, so a walk counts once, not once per page.
func (s *Server) runningLocked(lq listQuery) int {
	x := &s.byStart
	filter := lq.filterKey()
	if x.total.counted && x.total.gen == x.gen && x.total.filter == filter {
		return x.total.n
	}
	n := 0
	for _, sb := range x.all {
		if sb.rec.State == store.StateRunning && lq.matches(&sb.rec) {
			n++
		}
	}
	x.total.counted, x.total.gen, x.total.filter, x.total.n = true, x.gen, filter, n
	return n
}

// filterKey names the filters the running count depends on (the page and the order do not
// change it).
func (lq listQuery) filterKey() string {
	var b strings.Builder
	for _, st := range lq.states {
		b.WriteString(string(st) + ",")
	}
	for _, k := range slices.Sorted(maps.Keys(lq.metadata)) {
		b.WriteString(strconv.Quote(k) + "=" + strconv.Quote(lq.metadata[k]) + "&")
	}
	b.WriteString(lq.startedAfter.Format(time.RFC3339Nano))
	return b.String()
}
