package watch

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

// split feeds chunks to a splitter and returns the lines it made, the last flushed.
func split(chunks ...string) []string {
	var s splitter
	var out []string
	emit := func(l string) { out = append(out, l) }
	for _, c := range chunks {
		s.write([]byte(c), emit)
	}
	s.flush(emit)
	return out
}

// Output cut into chunks anywhere comes out as the same lines, none longer than MaxLine: a
// longer one cut with the mark and the rest of it dropped up to its line break.
func TestLinesAreSplitWhateverTheChunksAndNoneIsLongerThanMaxLine(t *testing.T) {
	long := strings.Repeat("x", MaxLine+100)
	wide := strings.Repeat("é", MaxLine) // two bytes each: the cut must not split one
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"one line", []string{"hello\n"}, []string{"hello"}},
		{"no final break", []string{"a\nb"}, []string{"a", "b"}},
		{"split mid-line", []string{"hel", "lo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"carriage returns", []string{"a\r\n", "b\r", "\n"}, []string{"a", "b"}},
		{"empty lines", []string{"\n\n"}, []string{"", ""}},
		{"exactly MaxLine", []string{long[:MaxLine] + "\n"}, []string{long[:MaxLine]}},
		{"too long", []string{long + "\nnext\n"}, []string{long[:MaxLine-len(CutMark)] + CutMark, "next"}},
		{"too long, in pieces", []string{long[:9000], long[9000:], "\nnext"}, []string{long[:MaxLine-len(CutMark)] + CutMark, "next"}},
		{"too long, no break", []string{long}, []string{long[:MaxLine-len(CutMark)] + CutMark}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := split(tc.chunks...)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Fatalf("lines %q, want %q", trim(got), trim(tc.want))
			}
		})
	}
	got := split(wide + "\n")
	if len(got) != 1 || len(got[0]) > MaxLine || !utf8.ValidString(got[0]) || !strings.HasSuffix(got[0], CutMark) {
		t.Fatalf("a long line of two-byte characters: %d bytes, valid %v", len(got[0]), utf8.ValidString(got[0]))
	}
}

func trim(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) > 40 {
			l = l[:20] + "…" + l[len(l)-20:]
		}
		out[i] = l
	}
	return out
}

// Whatever a process prints, in whatever chunks: no line is longer than MaxLine, none holds a
// line break, and the lines are the output's, in order (a cut line is its start and the mark).
func FuzzSplitter(f *testing.F) {
	f.Add([]byte("a\nb\r\nc"), uint16(1))
	f.Add(bytes.Repeat([]byte("y"), 3*MaxLine), uint16(7000))
	f.Fuzz(func(t *testing.T, out []byte, step uint16) {
		n := int(step)%(2*MaxLine) + 1
		var s splitter
		var got []string
		emit := func(l string) { got = append(got, l) }
		for i := 0; i < len(out); i += n {
			s.write(out[i:min(i+n, len(out))], emit)
		}
		s.flush(emit)
		var want []string
		lines := bytes.Split(out, []byte("\n"))
		if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		for _, l := range lines {
			l = bytes.TrimSuffix(l, []byte("\r"))
			if len(l) > MaxLine {
				want = append(want, cutLine(l))
				continue
			}
			want = append(want, string(l))
		}
		for _, l := range got {
			if len(l) > MaxLine || strings.Contains(l, "\n") {
				t.Fatalf("a line of %d bytes, or with a line break", len(l))
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || len(got) != len(want) {
			t.Fatalf("%d lines, want %d", len(got), len(want))
		}
	})
}
