package applog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxReportBytes is the largest browser report taken, as sent.
const MaxReportBytes = 16 << 10

// ReportKind is what the preview's page saw.
type ReportKind string

const (
	KindError              ReportKind = "error"              // an uncaught error
	KindUnhandledRejection ReportKind = "unhandledrejection" // a promise rejected with no handler
	KindConsoleError       ReportKind = "console.error"      // the page called console.error
)

// Report is one error a viewer's browser saw in the preview's page.
type Report struct {
	Kind    ReportKind `json:"kind"`
	Message string     `json:"message"`
	Stack   string     `json:"stack"`
	URL     string     `json:"url"`
}

// ErrNotAReport is a body that is not one report: not one JSON object of the four fields, an
// unknown kind, or no message.
var ErrNotAReport = errors.New(`a report is one JSON object {"kind": "error" | "unhandledrejection" | "console.error", "message", "stack"?, "url"?}`)

// ErrReportTooLarge is a body past MaxReportBytes.
var ErrReportTooLarge = errors.New("a report is at most 16 KiB")

// ParseReport reads one report. It takes outside input (a page's script, anyone's browser): it
// checks everything and keeps nothing it did not check.
func ParseReport(body []byte) (Report, error) {
	if len(body) > MaxReportBytes {
		return Report{}, ErrReportTooLarge
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	var r Report
	if err := d.Decode(&r); err != nil {
		return Report{}, ErrNotAReport
	}
	if _, err := d.Token(); err != io.EOF {
		return Report{}, ErrNotAReport
	}
	switch r.Kind {
	case KindError, KindUnhandledRejection, KindConsoleError:
	default:
		return Report{}, ErrNotAReport
	}
	if strings.TrimSpace(r.Message) == "" {
		return Report{}, ErrNotAReport
	}
	// encoding/json already made every string valid UTF-8; a NUL is valid JSON but not storable.
	for _, s := range []*string{&r.Message, &r.Stack, &r.URL} {
		*s = strings.ReplaceAll(*s, "\x00", "\uFFFD")
	}
	return r, nil
}

// problemMessage is the report as a problem's message: its first line, saying what kind of
// report it was where that is not plain.
func (r Report) problemMessage() string {
	m, _, _ := strings.Cut(strings.TrimSpace(r.Message), "\n")
	switch r.Kind {
	case KindUnhandledRejection:
		m = "Unhandled promise rejection: " + m
	case KindConsoleError:
		m = "console.error: " + m
	}
	return m
}

// problemDetail is the report's whole message, stack and page.
func (r Report) problemDetail() string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(r.Message))
	if s := strings.TrimSpace(r.Stack); s != "" && s != strings.TrimSpace(r.Message) {
		b.WriteString("\n")
		b.WriteString(s)
	}
	if r.URL != "" {
		b.WriteString("\nPage: ")
		b.WriteString(r.URL)
	}
	if !utf8.ValidString(b.String()) {
		return strings.ToValidUTF8(b.String(), "\uFFFD")
	}
	return b.String()
}
