package versions

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/aymanbagabas/go-udiff/lcs"
)

// A version's changes page is bounded whatever the versions hold (docs/architecture.md,
// "Versions"): what it reads, what it diffs and what it shows. A change past a bound is folded:
// the page says it is too large to show there and links to the version's archive.
const (
	// MaxDiffBytes is the largest file the page shows line by line.
	MaxDiffBytes = 256 << 10
	// MaxPageFiles is how many changed files the page lists; past it they are counted.
	MaxPageFiles = 50
	// MaxPageReadBytes is how much content (both sides) the page reads to diff, in all.
	MaxPageReadBytes = 1 << 20
	// MaxPageLines and MaxPageTextBytes bound the diff lines the page shows, in all: about
	// 1.5 MiB of HTML at most once escaped (a quote is 5 bytes), with 50 files' headings.
	MaxPageLines     = 5000
	MaxPageTextBytes = 192 << 10
	// MaxDiffWork is the most lines (old and new) of a file's changed middle, once the lines
	// both sides share at their start and end are set aside, that are searched for a shortest
	// edit; a larger middle is shown as removed and added whole, in time linear in its size.
	MaxDiffWork = 4000
	// diffContext is the unchanged lines shown around a change.
	diffContext = 3
)

// DiffLine is one line of a unified diff: Kind is add, del, ctx or hunk (a hunk's heading, and
// "\ No newline at end of file").
type DiffLine struct {
	Kind, Text string
}

// diffBudget is what a page has left to show.
type diffBudget struct {
	lines, bytes int
}

func newDiffBudget() *diffBudget { return &diffBudget{lines: MaxPageLines, bytes: MaxPageTextBytes} }

func (b *diffBudget) empty() bool { return b.lines <= 0 || b.bytes <= 0 }

// lineIndex is a text's lines: line i is s[off[i]:off[i+1]], its newline included.
type lineIndex struct {
	s   []byte
	off []int
}

func indexLines(s []byte) lineIndex {
	off := make([]int, 1, bytes.Count(s, []byte{'\n'})+2)
	for i, c := range s {
		if c == '\n' {
			off = append(off, i+1)
		}
	}
	if off[len(off)-1] != len(s) {
		off = append(off, len(s)) // a last line without its newline
	}
	return lineIndex{s: s, off: off}
}

func (x lineIndex) n() int            { return len(x.off) - 1 }
func (x lineIndex) line(i int) []byte { return x.s[x.off[i]:x.off[i+1]] }
func (x lineIndex) strings(from, to int) []string {
	out := make([]string, to-from)
	for i := range out {
		out[i] = string(x.line(from + i))
	}
	return out
}

// edit replaces lines [a0, a1) of the old text by lines [b0, b1) of the new.
type edit struct{ a0, a1, b0, b1 int }

// diffText is the unified diff of old and new, line by line, within what b has left (which it
// spends); folded reports lines left out for want of it. Its work is linear in the texts' size
// plus a bounded search (MaxDiffWork).
func diffText(old, new []byte, b *diffBudget) (out []DiffLine, folded bool) {
	a, c := indexLines(old), indexLines(new)
	na, nc := a.n(), c.n()
	p := 0
	for p < na && p < nc && bytes.Equal(a.line(p), c.line(p)) {
		p++
	}
	s := 0
	for s < na-p && s < nc-p && bytes.Equal(a.line(na-1-s), c.line(nc-1-s)) {
		s++
	}
	ma, mc := na-p-s, nc-p-s
	if ma == 0 && mc == 0 {
		return nil, false
	}
	var edits []edit
	if ma+mc <= MaxDiffWork {
		for _, d := range lcs.DiffLines(a.strings(p, p+ma), c.strings(p, p+mc)) {
			edits = append(edits, edit{p + d.Start, p + d.End, p + d.ReplStart, p + d.ReplEnd})
		}
	} else {
		edits = []edit{{p, p + ma, p, p + mc}}
	}
	var emit func(kind string, prefix string, x lineIndex, i int) bool
	emit = func(kind string, prefix string, x lineIndex, i int) bool {
		var text string
		if x.s == nil {
			text = prefix
		} else {
			text = prefix + string(bytes.TrimSuffix(x.line(i), []byte{'\n'}))
		}
		if b.lines < 1 || b.bytes < len(text) {
			b.lines, folded = 0, true
			return false
		}
		b.lines--
		b.bytes -= len(text)
		out = append(out, DiffLine{Kind: kind, Text: text})
		if x.s != nil && i == x.n()-1 && x.s[len(x.s)-1] != '\n' {
			return emit("hunk", `\ No newline at end of file`, lineIndex{}, 0)
		}
		return true
	}
	for i := 0; i < len(edits); {
		j := i
		for j+1 < len(edits) && edits[j+1].a0-edits[j].a1 <= 2*diffContext {
			j++
		}
		first, last := edits[i], edits[j]
		a0 := max(0, first.a0-diffContext)
		b0 := first.b0 - (first.a0 - a0)
		a1 := min(na, last.a1+diffContext)
		b1 := last.b1 + (a1 - last.a1)
		if !emit("hunk", "@@ -"+hunkRange(a0, a1-a0)+" +"+hunkRange(b0, b1-b0)+" @@", lineIndex{}, 0) {
			return out, folded
		}
		cur := a0
		for _, e := range edits[i : j+1] {
			for ; cur < e.a0; cur++ {
				if !emit("ctx", " ", a, cur) {
					return out, folded
				}
			}
			for k := e.a0; k < e.a1; k++ {
				if !emit("del", "-", a, k) {
					return out, folded
				}
			}
			for k := e.b0; k < e.b1; k++ {
				if !emit("add", "+", c, k) {
					return out, folded
				}
			}
			cur = e.a1
		}
		for ; cur < a1; cur++ {
			if !emit("ctx", " ", a, cur) {
				return out, folded
			}
		}
		i = j + 1
	}
	return out, folded
}

// hunkRange is a hunk's range of lines as a unified diff writes it: from (0-based), count.
func hunkRange(from, count int) string {
	switch count {
	case 0:
		return strconv.Itoa(from) + ",0"
	case 1:
		return strconv.Itoa(from + 1)
	}
	return fmt.Sprintf("%d,%d", from+1, count)
}
