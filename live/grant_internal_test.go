package live

import (
	"context"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A right can be checked (an operator's, say) just before its revocation is announced and heard:
// the stream opened after follows none of the topics it granted. Another right's stream, or one
// whose check came after the revocation (a grant again), keeps them.
func TestAStreamGrantedBeforeItsRevocationFollowsNoneOfItsTopics(t *testing.T) {
	t.Parallel()
	h := New(Options{Registerer: prometheus.NewRegistry()})
	grant := func(right string, seen uint64) *Grant {
		return &Grant{Revoke: right, Topics: []string{"console", right}, Seen: seen}
	}
	follows := func(g *Grant) bool {
		t.Helper()
		c := &conn{id: newID(), hub: h, sent: map[string]sentState{}}
		c.ctx, c.cancel = context.WithCancel(context.Background())
		t.Cleanup(func() { c.cancel(); h.remove(c) })
		if err := h.add(c, Stream{Topics: []string{"own"}, Grant: g}); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(c.topics, "console") && h.byTopic["console"][c.id] == c
	}
	before := h.Ends()        // the check reads "granted" here…
	h.End("operator:removed") // …and the revocation is heard before the stream is added
	if follows(grant("operator:removed", before)) {
		t.Fatal("a stream whose grant was checked before its revocation follows the granted topics")
	}
	if !follows(grant("operator:other", before)) {
		t.Fatal("another right's stream lost its topics to a revocation that was not its own")
	}
	if !follows(grant("operator:removed", h.Ends())) {
		t.Fatal("a grant checked after the revocation (granted again) follows nothing")
	}
}
