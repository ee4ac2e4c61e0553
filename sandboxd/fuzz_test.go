package sandboxd

import (
	"maps"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"sandman/sandboxd/machine"
)

func FuzzRouteRequest(f *testing.F) {
	f.Add("3000-iabc123.localhost:8080", "", "")
	f.Add("localhost:8080", "iabc123", "49983")
	f.Add("127.0.0.1", "iabc-6532622b", "1")
	f.Add("[::1]:9", "iabc", "65536")
	f.Add("sandbox.e2b.app", "i1", "49983")
	f.Add("49983-i1-x.e2b.dev.", "", "")
	f.Add("-.localhost", "", "")
	f.Fuzz(func(t *testing.T, host, id, port string) {
		h := http.Header{}
		h.Set("E2b-Sandbox-Id", id)
		h.Set("E2b-Sandbox-Port", port)
		gotID, gotPort, err := routeRequest(host, h)
		if err != nil {
			return
		}
		if !sandboxIDPattern.MatchString(gotID) || gotPort < 1 || gotPort > 65535 {
			t.Fatalf("routeRequest(%q) = %q, %d", host, gotID, gotPort)
		}
	})
}

func TestRouteRequest(t *testing.T) {
	tests := []struct {
		host, id, port string
		wantID         string
		wantPort       int
	}{
		{"3000-iabc.localhost:8080", "", "", "iabc", 3000},
		{"3000-IABC.LOCALHOST", "", "", "iabc", 3000},
		{"49983-iabc-6532622b.e2b.app", "", "", "iabc", 49983},
		{"localhost:1", "iabc", "49983", "iabc", 49983},
		{"sandbox.e2b.app", "iabc", "80", "iabc", 80},
		{"3000-iabc.localhost", "ignored", "1", "iabc", 3000},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set("E2b-Sandbox-Id", tt.id)
		h.Set("E2b-Sandbox-Port", tt.port)
		id, port, err := routeRequest(tt.host, h)
		if err != nil || id != tt.wantID || port != tt.wantPort {
			t.Errorf("routeRequest(%q, %q, %q) = %q, %d, %v", tt.host, tt.id, tt.port, id, port, err)
		}
	}
	for _, bad := range []string{"localhost", "x.localhost", "0-iabc.localhost", "70000-iabc.localhost", "3000-.localhost", "3000-i_x.localhost"} {
		if _, _, err := routeRequest(bad, http.Header{}); err == nil {
			t.Errorf("routeRequest(%q) accepted", bad)
		}
	}
}

// jsEncodeMetadata is the JS SDK's encoding, after the query layer.
func jsEncodeMetadata(md map[string]string) string {
	enc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	v := url.Values{}
	for k, val := range md {
		v.Set(enc(k), enc(val))
	}
	return v.Encode()
}

func FuzzParseMetadataFilter(f *testing.F) {
	f.Add("user%3Dabc%26app%3Dprod", "k", "v")
	f.Add("a=b&c=d", "spaced key", "a&b=c d/é+%")
	f.Add("%zz", "", "")
	f.Add("novalue", "=", "&")
	f.Fuzz(func(t *testing.T, raw, k, v string) {
		_, _ = parseMetadataFilter(raw)
		if k == "" {
			return
		}
		want := map[string]string{k: v}
		got, err := parseMetadataFilter(jsEncodeMetadata(want))
		if err != nil || !maps.Equal(got, want) {
			t.Fatalf("round trip of %q: %v %v", want, got, err)
		}
	})
}

func FuzzDecodeNextToken(f *testing.F) {
	f.Add(encodeNextToken(listCursor{startedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), id: "iabc"}))
	f.Add(encodeNextToken(listCursor{startedAt: time.Unix(0, 0).UTC(), id: "i0", asc: true}))
	f.Add("bm90IGEgdG9rZW4=")
	f.Add("")
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := decodeNextToken(tok)
		if err != nil {
			return
		}
		again, err := decodeNextToken(encodeNextToken(c))
		if err != nil || !again.startedAt.Equal(c.startedAt) || again.id != c.id || again.asc != c.asc {
			t.Fatalf("token %q: %+v then %+v, %v", tok, c, again, err)
		}
	})
}

func FuzzParseSandboxID(f *testing.F) {
	for _, s := range []string{"iabc", "iabc-6532622b", "", "-", "I", "a/b", strings.Repeat("a", 65)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, ok := parseSandboxID(raw)
		if ok && (!sandboxIDPattern.MatchString(id) || !strings.HasPrefix(raw, id)) {
			t.Fatalf("parseSandboxID(%q) = %q", raw, id)
		}
	})
}

func FuzzParseListQuery(f *testing.F) {
	f.Add("state=running,paused&limit=10&order=asc")
	f.Add("metadata=a%3Db&startedAfter=2026-01-02T03:04:05Z&template=base")
	f.Add("limit=-1&nextToken=%%")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		lq, err := parseListQuery(q)
		if err == nil && (lq.limit < 1 || lq.limit > 100 || len(lq.states) == 0) {
			t.Fatalf("%q parsed to %+v", raw, lq)
		}
	})
}

func FuzzParseEventQuery(f *testing.F) {
	f.Add("offset=5&limit=100&orderAsc=true&types=sandbox.lifecycle.killed")
	f.Add("types=sandbox.lifecycle.created,sandbox.lifecycle.paused&types=x")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		eq, err := parseEventQuery(q)
		if err == nil && (eq.limit < 1 || eq.limit > 100 || eq.offset < 0) {
			t.Fatalf("%q parsed to %+v", raw, eq)
		}
	})
}

func FuzzSandboxPath(f *testing.F) {
	for _, s := range []string{"", "~", "~/a", "a/../../etc", "/home/user/../../etc/passwd", "/tmp/../tmp/x", "/home/userx", "./.."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		clean := machine.CleanSandboxPath(p)
		if !path.IsAbs(clean) || path.Clean(clean) != clean {
			t.Fatalf("cleanSandboxPath(%q) = %q", p, clean)
		}
		rel, under, ok := machine.SplitSandboxPath(p)
		if !ok {
			return
		}
		if rel != "." && (path.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") || path.Join(under, rel) != clean) {
			t.Fatalf("splitSandboxPath(%q) = %q, %q", p, rel, under)
		}
	})
}
