package handlers

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzBearerToken: no Authorization header makes the parser panic, and what it takes is the one
// header's token after "Bearer " (any case), a token68 with no space or control character in it.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer sm_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "bearer x", "Bearer", "Bearer ", "Bearer a b",
		"Basic dXNlcjpwYXNz", "Bearer abc==", "Bearer =", "Bearer \x00", "Bearer é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := &http.Request{Header: http.Header{"Authorization": {v}}}
		tok, ok := bearerToken(r)
		if !ok {
			return
		}
		scheme, rest, _ := strings.Cut(v, " ")
		if !strings.EqualFold(scheme, "Bearer") || rest != tok || tok == "" || strings.ContainsAny(tok, " \t\r\n\x00,\"") ||
			strings.TrimRight(tok, "=") == "" {
			t.Fatalf("bearerToken(%q) took %q", v, tok)
		}
	})
}

// Two Authorization headers are never one token.
func TestBearerTokenTakesOneHeader(t *testing.T) {
	t.Parallel()
	r := &http.Request{Header: http.Header{"Authorization": {"Bearer a", "Bearer b"}}}
	if tok, ok := bearerToken(r); ok {
		t.Fatalf("two headers gave the token %q", tok)
	}
}
