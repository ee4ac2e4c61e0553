package sandboxd_test

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type listedSandbox struct {
	SandboxID string            `json:"sandboxID"`
	State     string            `json:"state"`
	StartedAt time.Time         `json:"startedAt"`
	Metadata  map[string]string `json:"metadata"`
}

// jsMetadataParam encodes a metadata filter exactly as the JS SDK does:
// encodeURIComponent per key and value, URLSearchParams, then the query
// serializer's own encoding.
func jsMetadataParam(md map[string]string) string {
	enc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	inner := url.Values{}
	for k, v := range md {
		inner.Set(enc(k), enc(v))
	}
	return url.QueryEscape(inner.Encode())
}

// listAll follows X-Next-Token through every page.
func (c *client) listAll(query string) (items []listedSandbox, pages int) {
	c.t.Helper()
	token := ""
	for {
		q := query
		if token != "" {
			q += "&nextToken=" + url.QueryEscape(token)
		}
		var page []listedSandbox
		hdr := c.must(200, "GET", "/v2/sandboxes?"+q, nil, &page)
		items = append(items, page...)
		pages++
		token = hdr.Get("X-Next-Token")
		if token == "" {
			return items, pages
		}
		if pages > 100 {
			c.t.Fatal("pagination does not end")
		}
	}
}

func TestListPaginationAndFilters(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	const n = 25
	var ids []string
	for i := range n {
		md := map[string]string{"owner": "o" + strconv.Itoa(i%2), "app": "a&b=c d/é+"}
		ids = append(ids, c.create(map[string]any{"metadata": md}).SandboxID)
	}
	var pausedIDs []string
	for _, id := range ids[:5] {
		c.must(204, "POST", "/sandboxes/"+id+"/pause", nil, nil)
		pausedIDs = append(pausedIDs, id)
	}

	items, pages := c.listAll("limit=10")
	if len(items) != n || pages != 3 {
		t.Fatalf("got %d items in %d pages, want %d in 3", len(items), pages, n)
	}
	seen := map[string]bool{}
	for i, it := range items {
		if seen[it.SandboxID] {
			t.Fatalf("%s listed twice", it.SandboxID)
		}
		seen[it.SandboxID] = true
		if i > 0 {
			prev := items[i-1]
			if prev.StartedAt.Before(it.StartedAt) || (prev.StartedAt.Equal(it.StartedAt) && prev.SandboxID > it.SandboxID) {
				t.Fatalf("desc order broken at %d: %v/%s then %v/%s", i, prev.StartedAt, prev.SandboxID, it.StartedAt, it.SandboxID)
			}
		}
	}

	asc, _ := c.listAll("limit=7&order=asc")
	for i := 1; i < len(asc); i++ {
		if asc[i-1].StartedAt.After(asc[i].StartedAt) {
			t.Fatalf("asc order broken at %d", i)
		}
	}
	if len(asc) != n {
		t.Fatalf("asc: %d items", len(asc))
	}

	tests := []struct {
		name, query string
		want        int
		running     string
	}{
		{"running only", "state=running", 20, "20"},
		{"paused only", "state=paused", 5, ""},
		{"both as csv", "state=running,paused", 25, "20"},
		{"both repeated", "state=running&state=paused", 25, "20"},
		{"metadata as the JS SDK sends it", "metadata=" + jsMetadataParam(map[string]string{"owner": "o1", "app": "a&b=c d/é+"}), 12, "10"},
		{"metadata AND", "metadata=" + jsMetadataParam(map[string]string{"owner": "o1", "app": "other"}), 0, "0"},
		{"metadata plain", "metadata=" + url.QueryEscape("owner=o0"), 13, "10"},
		{"unknown template", "template=other", 0, "0"},
		{"our template", "template=base", 25, "20"},
		{"started after everything", "startedAfter=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), 0, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var page []listedSandbox
			hdr := c.must(200, "GET", "/v2/sandboxes?"+tt.query, nil, &page)
			if len(page) != tt.want || hdr.Get("X-Total-Running") != tt.running {
				t.Fatalf("got %d items, X-Total-Running %q; want %d, %q", len(page), hdr.Get("X-Total-Running"), tt.want, tt.running)
			}
			if hdr.Get("X-Next-Token") != "" {
				t.Fatal("X-Next-Token on the only page")
			}
		})
	}

	var paused []listedSandbox
	c.must(200, "GET", "/v2/sandboxes?state=paused", nil, &paused)
	for _, p := range paused {
		if !slices.Contains(pausedIDs, p.SandboxID) || p.State != "paused" {
			t.Fatalf("unexpected paused item %+v", p)
		}
	}

	var v1 []listedSandbox
	c.must(200, "GET", "/sandboxes?metadata="+url.QueryEscape("owner=o0"), nil, &v1)
	if len(v1) != 10 {
		t.Fatalf("v1 list: %d running with owner=o0, want 10", len(v1))
	}

	for _, bad := range []string{"state=gone", "order=sideways", "limit=0", "limit=101", "limit=x",
		"nextToken=%25%25", "nextToken=" + url.QueryEscape("bm90IGEgdG9rZW4="), "startedAfter=yesterday",
		"template=base:v1", "metadata=novalue"} {
		t.Run("rejects "+bad, func(t *testing.T) {
			c.must(400, "GET", "/v2/sandboxes?"+bad, nil, nil)
		})
	}
}

func TestListPageSurvivesRemovals(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	for range 6 {
		c.create(nil)
	}
	for _, order := range []string{"desc", "asc"} {
		var page []listedSandbox
		hdr := c.must(200, "GET", "/v2/sandboxes?limit=2&order="+order, nil, &page)
		// The cursor is a position, not an item: deleting the last item of the
		// page must not break or repeat the next page.
		c.must(204, "DELETE", "/sandboxes/"+page[1].SandboxID, nil, nil)
		var next []listedSandbox
		c.must(200, "GET", "/v2/sandboxes?limit=2&order="+order+"&nextToken="+url.QueryEscape(hdr.Get("X-Next-Token")), nil, &next)
		if len(next) != 2 {
			t.Fatalf("%s: next page: %d items", order, len(next))
		}
		for _, it := range next {
			for _, p := range page {
				if it.SandboxID == p.SandboxID {
					t.Fatalf("%s: %s on both pages", order, it.SandboxID)
				}
			}
		}
	}
}

// The list keeps its running count between pages of a walk (docs/sandboxd.md, "The list"): any
// change to a sandbox must show in the next count.
func TestListRunningCountFollowsEveryChange(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	var ids []string
	for range 3 {
		ids = append(ids, c.create(nil).SandboxID)
	}
	count := func(want string) {
		t.Helper()
		for _, q := range []string{"limit=1", "limit=1&order=asc"} {
			hdr := c.must(200, "GET", "/v2/sandboxes?"+q, nil, nil)
			if got := hdr.Get("X-Total-Running"); got != want {
				t.Fatalf("%s: X-Total-Running %q, want %q", q, got, want)
			}
		}
	}
	count("3")
	c.must(204, "POST", "/sandboxes/"+ids[0]+"/pause", nil, nil)
	count("2")
	c.must(204, "DELETE", "/sandboxes/"+ids[1], nil, nil)
	count("1")
	c.create(nil)
	count("2")
	c.must(201, "POST", "/sandboxes/"+ids[0]+"/connect", map[string]any{"timeout": 60}, nil)
	count("3")
}
