package main

import (
	"bytes"
	"io"
)

// maxScan bounds what an HTML answer's reader holds back while it looks for the injection
// point: past it, the tag goes at the best point seen so far. A page that opens with 64 KiB of
// comments is the only one that reaches it.
const maxScan = 64 << 10

// injectionPoint finds where the script tag goes in the start of an HTML document: right after
// the `<head>` start tag, so the reporter runs before any of the page's own scripts and sees
// their errors; with no `<head>` tag, before the first content (an element, text or an end
// tag), past the byte-order mark, whitespace, comments, the doctype and the `<html>` start tag,
// where the parser puts it in the head it implies. So nothing is ever put before a doctype (the
// page would render in quirks mode), inside a tag or inside a comment, and the rest of the
// document parses as it did.
//
// b is the start of the document; atEOF says no more follows. ok is false when the point
// cannot be told yet and more of the document is needed. The answer for a prefix that says ok
// is the answer for the whole document: the proxy streams the rest without looking at it.
func injectionPoint(b []byte, atEOF bool) (pos int, ok bool) {
	i := 0
	if bytes.HasPrefix(b, []byte("\xef\xbb\xbf")) {
		i = 3
	} else if len(b) < 3 && !atEOF && bytes.HasPrefix([]byte("\xef\xbb\xbf"), b) {
		return 0, false
	}
	for {
		for i < len(b) && isSpace(b[i]) {
			i++
		}
		// Whatever comes next, the tag goes here unless it is one of the things skipped below:
		// a construct cut off by the end of b is one only if more of it may come.
		at := i
		more := func() (int, bool) {
			if atEOF {
				return at, true
			}
			return 0, false
		}
		if i >= len(b) {
			return more()
		}
		if b[i] != '<' {
			return i, true
		}
		rest := b[i:]
		if len(rest) < 2 {
			return more()
		}
		switch c := rest[1]; {
		case c == '!':
			if len(rest) < 4 && bytes.HasPrefix([]byte("<!--"), rest) {
				return more()
			}
			if bytes.HasPrefix(rest, []byte("<!--")) {
				end := commentEnd(rest)
				if end < 0 {
					return more()
				}
				i += end
				continue
			}
			// A doctype, or a bogus comment ("<!x…>").
			end := bytes.IndexByte(rest, '>')
			if end < 0 {
				return more()
			}
			i += end + 1
		case c == '?': // a bogus comment ("<?xml …?>")
			end := bytes.IndexByte(rest, '>')
			if end < 0 {
				return more()
			}
			i += end + 1
		case isLetter(c):
			name, end := startTag(rest)
			if end < 0 {
				return more()
			}
			switch {
			case bytes.EqualFold(name, []byte("html")):
				i += end
			case bytes.EqualFold(name, []byte("head")):
				return i + end, true
			default:
				return i, true
			}
		default: // an end tag, or a '<' that starts no tag (text)
			return i, true
		}
	}
}

// commentEnd is the length of the comment at the start of b ("<!--" already there), or -1 when
// it does not end within b. As in the HTML tokenizer, "<!-->" and "<!--->" are whole comments.
func commentEnd(b []byte) int {
	switch {
	case len(b) >= 5 && b[4] == '>':
		return 5
	case len(b) >= 6 && b[4] == '-' && b[5] == '>':
		return 6
	}
	for j := 4; j+2 < len(b); j++ {
		if b[j] == '-' && b[j+1] == '-' {
			if b[j+2] == '>' {
				return j + 3
			}
			if b[j+2] == '!' && j+3 < len(b) && b[j+3] == '>' {
				return j + 4
			}
		}
	}
	return -1
}

// startTag reads the start tag at the start of b: its name and its length through its '>', or
// -1 when its end is not in b. Attribute values in quotes may hold '>'; a quote only opens a
// value right after '=', as in the HTML tokenizer.
func startTag(b []byte) (name []byte, end int) {
	j := 1
	for j < len(b) && !isSpace(b[j]) && b[j] != '/' && b[j] != '>' {
		j++
	}
	name = b[1:j]
	for j < len(b) {
		switch b[j] {
		case '>':
			return name, j + 1
		case '=':
			j++
			for j < len(b) && isSpace(b[j]) {
				j++
			}
			if j < len(b) && (b[j] == '"' || b[j] == '\'') {
				q := bytes.IndexByte(b[j+1:], b[j])
				if q < 0 {
					return name, -1
				}
				j += q + 2
				continue
			}
			continue
		}
		j++
	}
	return name, -1
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

// injector is an HTML answer's body with the tag added: it holds back the start of the
// document until it knows where the tag goes, then passes everything else through as it comes
// (a page streamed in parts keeps streaming).
type injector struct {
	src  io.ReadCloser
	tag  []byte
	out  []byte // what is ready to be read: the start with the tag, once found
	done bool   // the tag is in out (or was read)
	err  error  // the source's error, to give once out is empty
}

func newInjector(src io.ReadCloser, tag []byte) *injector {
	return &injector{src: src, tag: tag}
}

func (in *injector) Read(p []byte) (int, error) {
	if !in.done {
		in.scan()
	}
	if len(in.out) > 0 {
		n := copy(p, in.out)
		in.out = in.out[n:]
		return n, nil
	}
	if in.err != nil {
		return 0, in.err
	}
	return in.src.Read(p)
}

// scan reads the start of the document until the injection point is known, and lays out the
// start with the tag in out.
func (in *injector) scan() {
	var buf []byte
	chunk := make([]byte, 4096)
	for {
		atEOF := in.err != nil || len(buf) >= maxScan
		if pos, ok := injectionPoint(buf, atEOF); ok {
			out := make([]byte, 0, len(buf)+len(in.tag))
			out = append(out, buf[:pos]...)
			out = append(out, in.tag...)
			in.out = append(out, buf[pos:]...)
			in.done = true
			return
		}
		n, err := in.src.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if err != nil {
			in.err = err
		}
	}
}

func (in *injector) Close() error { return in.src.Close() }
