package watch

import (
	"bytes"
	"unicode/utf8"
)

// MaxLine is the longest line kept, in bytes, its cut mark included: a line beyond it is cut,
// and the rest of it, up to its line break, dropped.
const MaxLine = 16 << 10

// CutMark ends a line that was cut at MaxLine.
const CutMark = " … [line cut at 16 KiB]"

// splitter cuts one output stream into lines: what arrives in chunks of any size comes out one
// line at a time, without its line break (nor a carriage return before it), at most MaxLine
// bytes, valid UTF-8 or not as it came.
type splitter struct {
	buf []byte
	// cut: the line under way was already emitted, cut; the rest of it is dropped up to its
	// line break.
	cut bool
}

// write adds a chunk and calls emit for each line it completes.
func (s *splitter) write(chunk []byte, emit func(string)) {
	for len(chunk) > 0 {
		i := bytes.IndexByte(chunk, '\n')
		part := chunk
		if i >= 0 {
			part = chunk[:i]
		}
		if !s.cut {
			s.buf = append(s.buf, part...)
			if len(s.buf) > MaxLine {
				emit(cutLine(s.buf))
				s.buf, s.cut = s.buf[:0], true
			}
		}
		if i < 0 {
			return
		}
		if !s.cut {
			emit(string(bytes.TrimSuffix(s.buf, []byte("\r"))))
		}
		s.buf, s.cut = s.buf[:0], false
		chunk = chunk[i+1:]
	}
}

// flush emits the last line when the stream ended without a line break after it.
func (s *splitter) flush(emit func(string)) {
	if len(s.buf) > 0 && !s.cut {
		emit(string(bytes.TrimSuffix(s.buf, []byte("\r"))))
	}
	s.buf, s.cut = s.buf[:0], false
}

// cutLine is line's first bytes, ended on a whole UTF-8 character, with the cut mark: MaxLine
// bytes at most.
func cutLine(line []byte) string {
	n := MaxLine - len(CutMark)
	for n > 0 && n < len(line) && !utf8.RuneStart(line[n]) {
		n--
	}
	return string(line[:n]) + CutMark
}
