package sandboxd_test

import (
	"net/url"
	"slices"
	"strconv"
	"testing"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// permutations returns every order of xs.
func permutations(xs []int) [][]int {
	if len(xs) <= 1 {
		return [][]int{slices.Clone(xs)}
	}
	var out [][]int
	for i := range xs {
		rest := slices.Concat(xs[:i], xs[i+1:])
		for _, p := range permutations(rest) {
			out = append(out, append([]int{xs[i]}, p...))
		}
	}
	return out
}

// A sandbox's startedAt is its current run's start, so a resume moves it to the newest end of the
// list (docs/sandboxd.md, "The list"). Whatever the order of the resumes, among other sandboxes
// created, resumed and killed before and after, a walk of every page at any page size and in
// either order finds each live sandbox exactly once and no killed one, in startedAt order, with
// the running count of the filters on every page.
func TestEveryLiveSandboxIsListedOnceWhateverItsResumes(t *testing.T) {
	t.Parallel()
	// The list does not depend on the isolation; unisolated sandboxes cost no process.
	c := newClient(t, sandboxdtest.WithConfig(func(cfg *sandboxd.Config) {
		cfg.Isolation = sandboxd.IsolationNone
		cfg.MaxSandboxes, cfg.MaxStored = -1, -1
	}))
	type group struct {
		filter        string
		live, running map[string]bool
		killed        []string
	}
	var groups []group
	allLive, allRunning := map[string]bool{}, map[string]bool{}
	// Each group: S0-S3 resumed in one of the 24 orders (the first resumed twice), S4 killed
	// without a resume, S5 left paused, S6 running untouched; then the second resumed is killed.
	for g, perm := range permutations([]int{0, 1, 2, 3}) {
		md := map[string]string{"walk": "g" + strconv.Itoa(g)}
		var ids []string
		for range 7 {
			ids = append(ids, c.create(map[string]any{"metadata": md}).SandboxID)
		}
		resume := func(id string) {
			c.must(204, "POST", "/sandboxes/"+id+"/pause", nil, nil)
			c.must(201, "POST", "/sandboxes/"+id+"/connect", map[string]any{"timeout": 600}, nil)
		}
		for _, i := range perm {
			resume(ids[i])
		}
		resume(ids[perm[0]])
		c.must(204, "POST", "/sandboxes/"+ids[5]+"/pause", nil, nil)
		killed := []string{ids[perm[1]], ids[4]}
		for _, id := range killed {
			c.must(204, "DELETE", "/sandboxes/"+id, nil, nil)
		}
		gr := group{filter: "metadata=" + jsMetadataParam(md), live: map[string]bool{}, running: map[string]bool{}, killed: killed}
		for _, id := range ids {
			if !slices.Contains(killed, id) {
				gr.live[id], allLive[id] = true, true
				if id != ids[5] {
					gr.running[id], allRunning[id] = true, true
				}
			}
		}
		groups = append(groups, gr)
	}
	groups = append(groups, group{filter: "", live: allLive, running: allRunning})

	// walk follows X-Next-Token through every page, checking each page's running count; a walk
	// that does not end within one page per live sandbox (and the empty last one) fails.
	walk := func(t *testing.T, query string, live int, running string) []listedSandbox {
		var items []listedSandbox
		token := ""
		for pages := 1; ; pages++ {
			if pages > live+2 {
				t.Fatalf("%s: the walk does not end after %d pages (%d items)", query, pages-1, len(items))
			}
			q := query
			if token != "" {
				q += "&nextToken=" + url.QueryEscape(token)
			}
			var page []listedSandbox
			hdr := c.forTest(t).must(200, "GET", "/v2/sandboxes?"+q, nil, &page)
			if got := hdr.Get("X-Total-Running"); got != running {
				t.Fatalf("%s: page %d: X-Total-Running %q, want %q", q, pages, got, running)
			}
			items = append(items, page...)
			if token = hdr.Get("X-Next-Token"); token == "" {
				return items
			}
		}
	}
	for gi, gr := range groups {
		for _, limit := range []int{1, 2, 3, 100} {
			for _, order := range []string{"desc", "asc"} {
				name := "group " + strconv.Itoa(gi) + " limit=" + strconv.Itoa(limit) + " " + order
				t.Run(name, func(t *testing.T) {
					query := "limit=" + strconv.Itoa(limit) + "&order=" + order
					if gr.filter != "" {
						query += "&" + gr.filter
					}
					items := walk(t, query, len(gr.live), strconv.Itoa(len(gr.running)))
					seen := map[string]bool{}
					for i, it := range items {
						if !gr.live[it.SandboxID] {
							t.Fatalf("%s listed: not a live sandbox of the group (killed: %v)", it.SandboxID, slices.Contains(gr.killed, it.SandboxID))
						}
						if seen[it.SandboxID] {
							t.Fatalf("%s listed twice", it.SandboxID)
						}
						seen[it.SandboxID] = true
						if i > 0 {
							a, b := items[i-1], it
							if order == "asc" {
								a, b = b, a
							}
							if a.StartedAt.Before(b.StartedAt) {
								t.Fatalf("%s order broken at %d: %v then %v", order, i, items[i-1].StartedAt, it.StartedAt)
							}
						}
					}
					if len(seen) != len(gr.live) {
						t.Fatalf("%d of the %d live sandboxes listed", len(seen), len(gr.live))
					}
				})
			}
		}
		// The deprecated list: the running ones, each once.
		var v1 []listedSandbox
		c.must(200, "GET", "/sandboxes?"+gr.filter, nil, &v1)
		got := map[string]bool{}
		for _, it := range v1 {
			got[it.SandboxID] = true
		}
		if len(v1) != len(gr.running) || len(got) != len(gr.running) {
			t.Fatalf("group %d: GET /sandboxes lists %d (%d distinct), want the %d running", gi, len(v1), len(got), len(gr.running))
		}
		for id := range got {
			if !gr.running[id] {
				t.Fatalf("group %d: GET /sandboxes lists %s, not a running sandbox of the group", gi, id)
			}
		}
	}
}
