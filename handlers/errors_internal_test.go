package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"sandman/apperr"
)

func TestEveryErrorKindHasAStatus(t *testing.T) {
	t.Parallel()
	for _, k := range apperr.Kinds() {
		if _, ok := kindStatus[k]; !ok {
			t.Errorf("apperr kind %d has no HTTP status in kindStatus", k)
		}
	}
	if got := httpStatus(apperr.Kind(1000)); got != http.StatusInternalServerError {
		t.Fatalf("an unmapped kind answers %d, want 500", got)
	}
}

// A form's return address is a path of this site, or the page's own.
func TestSafeReturn(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"/":                             "/",
		"/projects/abc":                 "/projects/abc",
		"/projects/abc?x=1#y":           "/projects/abc?x=1#y",
		"":                              "fallback",
		"projects/abc":                  "fallback",
		"//evil.example/":               "fallback",
		"/\\evil.example/":              "fallback",
		"https://evil.example/":         "fallback",
		"javascript:alert(1)":           "fallback",
		"/ok\r\nSet-Cookie: a=b":        "fallback",
		"/%2F%2Fevil.example":           "/%2F%2Fevil.example",
		"/\tevil":                       "fallback",
		" /x":                           "fallback",
		"/" + strings.Repeat("a", 2000): "fallback",
	} {
		if got := safeReturn(raw, "fallback"); got != want {
			t.Errorf("safeReturn(%q) = %q, want %q", raw, got, want)
		}
	}
}

// Whatever the return field holds, the redirect stays on this site.
func FuzzSafeReturn(f *testing.F) {
	for _, s := range []string{"/", "/projects/x", "//a", "/\\a", "https://a/", "/a?b=//c", "/%2f%2fa", "\x00/"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://sandman.example/projects/1")
	f.Fuzz(func(t *testing.T, raw string) {
		got := safeReturn(raw, "/")
		u, err := url.Parse(got)
		if err != nil {
			t.Fatalf("safeReturn(%q) = %q, which does not parse", raw, got)
		}
		if r := base.ResolveReference(u); r.Host != base.Host || r.Scheme != base.Scheme {
			t.Fatalf("safeReturn(%q) = %q leads to %s", raw, got, r)
		}
		if strings.ContainsAny(got, "\\\r\n") || strings.HasPrefix(got, "//") {
			t.Fatalf("safeReturn(%q) = %q", raw, got)
		}
	})
}
