package applog_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"sandman/applog"
)

// Only a report is taken: one JSON object of the known fields, a known kind, a message.
func TestOnlyAReportIsTaken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       error
	}{
		{"an error", `{"kind":"error","message":"TypeError: x is undefined","stack":"at f (app.js:1:2)","url":"http://p/"}`, nil},
		{"a rejection, no stack", `{"kind":"unhandledrejection","message":"nope"}`, nil},
		{"console.error", `{"kind":"console.error","message":"failed to load"}`, nil},
		{"empty", ``, applog.ErrNotAReport},
		{"not JSON", `kind=error&message=x`, applog.ErrNotAReport},
		{"an array", `[{"kind":"error","message":"x"}]`, applog.ErrNotAReport},
		{"two objects", `{"kind":"error","message":"x"}{"kind":"error","message":"y"}`, applog.ErrNotAReport},
		{"an unknown field", `{"kind":"error","message":"x","html":"<b>"}`, applog.ErrNotAReport},
		{"an unknown kind", `{"kind":"warning","message":"x"}`, applog.ErrNotAReport},
		{"no message", `{"kind":"error","message":"  "}`, applog.ErrNotAReport},
		{"a number for a message", `{"kind":"error","message":3}`, applog.ErrNotAReport},
		{"past 16 KiB", `{"kind":"error","message":"` + strings.Repeat("a", 16<<10) + `"}`, applog.ErrReportTooLarge},
	}
	for _, tt := range tests {
		_, err := applog.ParseReport([]byte(tt.body))
		if !errors.Is(err, tt.want) && !(err == nil && tt.want == nil) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
}

// Whatever a page sends, a report taken has a known kind, a message, storable text (valid UTF-8,
// no NUL) and came from at most 16 KiB; and it reads back the same from its own JSON.
func FuzzParseReport(f *testing.F) {
	f.Add([]byte(`{"kind":"error","message":"TypeError: x","stack":"at f","url":"http://p/"}`))
	f.Add([]byte(`{"kind":"console.error","message":"a\u0000b"}`))
	f.Add([]byte(`{"kind":"unhandledrejection","message":"\ud800"}`))
	f.Add([]byte(`{"kind":"error","message":"x"} `))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := applog.ParseReport(body)
		if err != nil {
			return
		}
		if len(body) > applog.MaxReportBytes {
			t.Fatalf("took a report of %d bytes", len(body))
		}
		switch r.Kind {
		case applog.KindError, applog.KindUnhandledRejection, applog.KindConsoleError:
		default:
			t.Fatalf("took kind %q", r.Kind)
		}
		if strings.TrimSpace(r.Message) == "" {
			t.Fatal("took a report with no message")
		}
		for _, s := range []string{r.Message, r.Stack, r.URL} {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				t.Fatalf("took text PostgreSQL cannot store: %q", s)
			}
		}
		again, _ := json.Marshal(r)
		r2, err := applog.ParseReport(again)
		if err != nil && len(again) <= applog.MaxReportBytes || err == nil && r2 != r {
			t.Fatalf("%q read back as %+v, %v; want %+v", again, r2, err, r)
		}
	})
}
