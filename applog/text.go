package applog

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxLineBytes is the longest line stored; a longer one is cut, with a mark saying so.
const MaxLineBytes = 16 << 10

// cleanLine makes a line of any bytes storable and bounded: valid UTF-8 with no NUL (PostgreSQL's
// text refuses both, and one bad line must not fail its whole batch), no trailing carriage
// return, and at most MaxLineBytes, cut at a character's start with a mark naming its length.
func cleanLine(s string) string {
	s = strings.TrimSuffix(s, "\r")
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= MaxLineBytes {
		return s
	}
	return cut(s, MaxLineBytes, fmt.Sprintf(" … [line cut: %d bytes]", len(s)))
}

// cut shortens s to at most max bytes ending with mark, at a character's start.
func cut(s string, max int, mark string) string {
	keep := max - len(mark)
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + mark
}

// errorLooking matches a line that tells of a failure, as the last lines of a dead process do
// (Node's "SyntaxError: …", npm's "ERR!", Go's "panic:").
var errorLooking = regexp.MustCompile(`(?i)(error|exception|fatal|panic|failed|cannot|unhandled|ERR!|not found)`)

// normalize is a message as it is compared: numbers, hexadecimal ids and quoted strings taken
// out and spaces folded, so "port 3000" and "port 3001", or one request's id and the next's,
// are the same problem.
var (
	hexID   = regexp.MustCompile(`\b[0-9a-fA-F]{8,}\b|\b[0-9a-fA-F-]{36}\b`)
	number  = regexp.MustCompile(`\d+`)
	spaces  = regexp.MustCompile(`\s+`)
	quoted  = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	urlLike = regexp.MustCompile(`https?://\S+`)
)

func normalize(message string) string {
	m := urlLike.ReplaceAllString(message, "URL")
	m = quoted.ReplaceAllString(m, `"…"`)
	m = hexID.ReplaceAllString(m, "ID")
	m = number.ReplaceAllString(m, "N")
	m = strings.TrimSpace(spaces.ReplaceAllString(m, " "))
	if len(m) > 500 {
		m = m[:500]
	}
	return m
}

// fingerprint names a problem: the same source, version and normalized message are one problem.
func fingerprint(source Source, version int32, message string) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s", source, version, normalize(message))
	return h.Sum(nil)
}

// MaxMessageBytes and MaxDetailBytes bound a problem's text.
const (
	MaxMessageBytes = 1 << 10
	MaxDetailBytes  = 64 << 10
)

// clip bounds a problem's field, keeping its start.
func clip(s string, max int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
	if len(s) <= max {
		return s
	}
	return cut(s, max, " …")
}
