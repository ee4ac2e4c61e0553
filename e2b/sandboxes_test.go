package e2b

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

func TestCreateParamsBody(t *testing.T) {
	t.Parallel()
	f := false
	tests := []struct {
		name    string
		p       CreateParams
		want    string
		wantErr bool
	}{
		{"minimal: SDK default timeout, the provider's lifecycle defaults sent explicitly", CreateParams{Template: "base"},
			`{"templateID":"base","timeout":300,"autoPause":false,"autoResume":{"enabled":false},"secure":false}`, false},
		{"kill on timeout", CreateParams{Template: "base", TimeoutSec: 60, OnTimeout: OnTimeoutKill},
			`{"templateID":"base","timeout":60,"autoPause":false,"autoResume":{"enabled":false},"secure":false}`, false},
		{"pause keeps memory by default", CreateParams{Template: "base", OnTimeout: OnTimeoutPause, Secure: true},
			`{"templateID":"base","timeout":300,"autoPause":true,"autoPauseMemory":true,"autoResume":{"enabled":false},"secure":true}`, false},
		{"filesystem-only auto-pause", CreateParams{Template: "base", OnTimeout: OnTimeoutPause, FilesystemOnlyPause: true},
			`{"templateID":"base","timeout":300,"autoPause":true,"autoPauseMemory":false,"autoResume":{"enabled":false},"secure":false}`, false},
		{"auto-resume", CreateParams{Template: "base", OnTimeout: OnTimeoutPause, AutoResume: true},
			`{"templateID":"base","timeout":300,"autoPause":true,"autoPauseMemory":true,"autoResume":{"enabled":true},"secure":false}`, false},
		{"everything else", CreateParams{Template: "t", EnvVars: map[string]string{"A": "1"}, AllowInternetAccess: &f,
			Metadata: map[string]string{"k": "v"}, IdempotencyKey: "key"},
			`{"templateID":"t","timeout":300,"autoPause":false,"autoResume":{"enabled":false},"secure":false,"allow_internet_access":false,"metadata":{"k":"v","sandman_create_key":"key"},"envVars":{"A":"1"}}`, false},
		{"no template", CreateParams{}, "", true},
		{"negative timeout", CreateParams{Template: "base", TimeoutSec: -1}, "", true},
		{"unknown action", CreateParams{Template: "base", OnTimeout: "snooze"}, "", true},
		{"filesystem-only without pause", CreateParams{Template: "base", FilesystemOnlyPause: true}, "", true},
		{"filesystem-only with auto-resume", CreateParams{Template: "base", OnTimeout: OnTimeoutPause, FilesystemOnlyPause: true, AutoResume: true}, "", true},
		{"auto-resume with kill", CreateParams{Template: "base", OnTimeout: OnTimeoutKill, AutoResume: true}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, err := tt.p.body()
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(body)
			if string(got) != tt.want {
				t.Errorf("body\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// serverDecodeMetadata is what the provider does with the metadata query value
// (docs/provider.md, "Sandboxes"): unescape the whole, split on & and =, unescape each part.
func serverDecodeMetadata(t *testing.T, rawQuery string) map[string]string {
	t.Helper()
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		t.Fatal(err)
	}
	whole, err := url.QueryUnescape(q.Get("metadata"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, pair := range strings.Split(whole, "&") {
		k, v, _ := strings.Cut(pair, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad pair %q", pair)
		}
		out[k] = v
	}
	return out
}

func TestMetadataFilterSurvivesServerDecoding(t *testing.T) {
	t.Parallel()
	for _, md := range []map[string]string{
		{"project": "p1"},
		{"a": "1", "b": "2"},
		{"owner": "ann@example.com", "path": "/x?y#z"},
		{"tricky&key=": "value&with=separators", "space": "a b+c%20d", "unicode": "héllo ✓"},
	} {
		q := url.Values{}
		q.Set("metadata", encodeMetadataFilter(md))
		got := serverDecodeMetadata(t, q.Encode())
		if fmt.Sprint(got) != fmt.Sprint(md) {
			t.Errorf("round trip of %v gave %v", md, got)
		}
	}
}

func TestEncodeURIComponent(t *testing.T) {
	t.Parallel()
	// Expected values are JavaScript's encodeURIComponent.
	for in, want := range map[string]string{
		"abc-_.!~*'()": "abc-_.!~*'()",
		"a b":          "a%20b",
		"&=+/?#%":      "%26%3D%2B%2F%3F%23%25",
		"é":            "%C3%A9",
	} {
		if got := encodeURIComponent(in); got != want {
			t.Errorf("encodeURIComponent(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestListAllSandboxesWalksPages(t *testing.T) {
	t.Parallel()
	// Sandman's reconcile sweep: 10,000 sandboxes must take at most 101 calls.
	const total = 10_000
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		q := r.URL.Query()
		if q.Get("state") != "running,paused" || q.Get("limit") != "100" {
			t.Errorf("query = %s", r.URL.RawQuery)
		}
		start := 0
		if tok := q.Get("nextToken"); tok != "" {
			start, _ = strconv.Atoi(strings.TrimPrefix(tok, "t"))
		}
		end := min(start+100, total)
		var items []string
		for i := start; i < end; i++ {
			items = append(items, fmt.Sprintf(`{"sandboxID":"i%d","templateID":"base","state":"running","startedAt":"2026-08-01T00:00:00Z","endAt":"2026-08-01T01:00:00Z","metadata":{"n":"%d"}}`, i, i))
		}
		if end < total {
			w.Header().Set("X-Next-Token", fmt.Sprintf("t%d", end))
		}
		w.Header().Set("X-Total-Running", strconv.Itoa(total))
		_, _ = w.Write([]byte("[" + strings.Join(items, ",") + "]"))
	})
	c, _ := newFakeClient(t, h)
	all, err := c.ListAllSandboxes(t.Context(), ListParams{States: []State{StateRunning, StatePaused}})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != total || calls.Load() != 100 {
		t.Errorf("got %d sandboxes in %d calls, want %d in 100", len(all), calls.Load(), total)
	}
	if last := all[total-1]; last.ID != "i9999" || last.Metadata["n"] != "9999" || last.EndAt.IsZero() {
		t.Errorf("last = %+v", last)
	}
}

func TestListAllSandboxesStopsOnRepeatedToken(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Next-Token", "same")
		_, _ = w.Write([]byte(`[]`))
	})
	c, _ := newFakeClient(t, h)
	if _, err := c.ListAllSandboxes(t.Context(), ListParams{}); err == nil {
		t.Fatal("a provider repeating its next token must not loop forever")
	}
}

func TestParseListHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		h         http.Header
		wantToken string
		wantTotal int
	}{
		{http.Header{}, "", -1},
		{http.Header{"X-Next-Token": {"abc=="}, "X-Total-Running": {"12"}}, "abc==", 12},
		{http.Header{"X-Next-Token": {"  "}, "X-Total-Running": {"-3"}}, "", -1},
		{http.Header{"X-Total-Running": {"many"}}, "", -1},
	}
	for _, tt := range tests {
		tok, total := parseListHeaders(tt.h)
		if tok != tt.wantToken || total != tt.wantTotal {
			t.Errorf("parseListHeaders(%v) = %q, %d", tt.h, tok, total)
		}
	}
}

func TestPauseConflictIsSuccess(t *testing.T) {
	t.Parallel()
	s := &script{statuses: []int{409}}
	c, _ := newFakeClient(t, s)
	paused, err := c.Pause(t.Context(), "iabc", true)
	if err != nil || paused {
		t.Fatalf("Pause on 409 = %v, %v; want false, nil", paused, err)
	}
	s = &script{statuses: []int{404}}
	c, _ = newFakeClient(t, s)
	if _, err := c.Pause(t.Context(), "iabc", true); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Pause on 404 = %v, want ErrNotFound", err)
	}
}

func TestConnectRunningIsNotResumed(t *testing.T) {
	t.Parallel()
	c, _ := newFakeClient(t, &script{statuses: []int{200}, body: sandboxJSON})
	_, resumed, err := c.Connect(t.Context(), "iabc", 60)
	if err != nil || resumed {
		t.Fatalf("Connect on 200 = %v, %v", resumed, err)
	}
	if _, _, err := c.Connect(t.Context(), "iabc", 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("a zero connect timeout must be refused: %v", err)
	}
}

func TestBadIDsNeverReachTheNetwork(t *testing.T) {
	t.Parallel()
	s := &script{statuses: []int{200}, body: `[]`}
	c, _ := newFakeClient(t, s)
	for _, id := range []string{"", "a/b", "x?y"} {
		if _, err := c.GetSandbox(t.Context(), id); !errors.Is(err, ErrInvalid) {
			t.Errorf("GetSandbox(%q) = %v, want ErrInvalid", id, err)
		}
		if err := c.Kill(t.Context(), id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Kill(%q) = %v, want ErrInvalid", id, err)
		}
	}
	if n := s.calls.Load(); n != 0 {
		t.Errorf("%d requests sent for invalid IDs", n)
	}
}

func TestPreviewURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		domain string
		want   string
	}{
		{"e2b.app", "https://3000-iabc.e2b.app"},
		{"localhost:41235", "http://3000-iabc.localhost:41235"},
		{"localhost", "http://3000-iabc.localhost"},
		{"sandbox.localhost:80", "http://3000-iabc.sandbox.localhost:80"},
		{"127.0.0.1:9000", "http://3000-iabc.127.0.0.1:9000"},
		{"e2b.dev:443", "https://3000-iabc.e2b.dev:443"},
	}
	for _, tt := range tests {
		if got := PreviewURL("iabc", tt.domain, 3000); got != tt.want {
			t.Errorf("PreviewURL(%q) = %q, want %q", tt.domain, got, tt.want)
		}
	}
	c, err := New(Config{APIKey: testKey, Domain: "e2b.app"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PreviewURL(Sandbox{ID: "iabc"}, 3000); got != "https://3000-iabc.e2b.app" {
		t.Errorf("configured domain: %q", got)
	}
	if got := c.PreviewHost(Sandbox{ID: "iabc", Domain: "eu.e2b.app"}, 5173); got != "5173-iabc.eu.e2b.app" {
		t.Errorf("the provider's domain must win: %q", got)
	}
	if got := c.envdURL(Sandbox{ID: "iabc"}); got != "https://49983-iabc.e2b.app" {
		t.Errorf("envd URL = %q", got)
	}
}
