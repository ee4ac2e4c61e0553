package versions

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"
)

// patch applies a diff's lines to old's lines (each ending in a newline).
func patch(t *testing.T, old []string, diff []DiffLine) []string {
	t.Helper()
	var out []string
	cur := 0
	for _, l := range diff {
		switch l.Kind {
		case "hunk":
			from, _, _ := strings.Cut(strings.TrimPrefix(l.Text, "@@ -"), " ")
			start, _, _ := strings.Cut(from, ",")
			n, err := strconv.Atoi(start)
			if err != nil {
				t.Fatalf("a hunk's heading %q", l.Text)
			}
			if strings.HasSuffix(from, ",0") {
				n++ // an empty range names the line before it
			}
			out = append(out, old[cur:n-1]...)
			cur = n - 1
		case "ctx", "del":
			if old[cur] != l.Text[1:] {
				t.Fatalf("line %d is %q, the diff says %q", cur+1, old[cur], l.Text)
			}
			if l.Kind == "ctx" {
				out = append(out, old[cur])
			}
			cur++
		case "add":
			out = append(out, l.Text[1:])
		}
	}
	return append(out, old[cur:]...)
}

// A file's diff turns its old text into its new one, whether its changed middle is searched
// for a shortest edit or shown whole.
func TestADiffTurnsTheOldTextIntoTheNew(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewSource(27))
	text := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = string(rune('a' + r.Intn(4)))
		}
		return out
	}
	join := func(ls []string) []byte {
		if len(ls) == 0 {
			return nil
		}
		return []byte(strings.Join(ls, "\n") + "\n")
	}
	for round := range 300 {
		old := text(r.Intn(40))
		new := append([]string(nil), old...)
		for range r.Intn(6) {
			i := r.Intn(len(new) + 1)
			switch r.Intn(3) {
			case 0:
				new = append(new[:i], append(text(1+r.Intn(3)), new[i:]...)...)
			case 1:
				if i < len(new) {
					new = append(new[:i], new[min(len(new), i+1+r.Intn(3)):]...)
				}
			default:
				if i < len(new) {
					new[i] = "changed " + new[i]
				}
			}
		}
		diff, folded := diffText(join(old), join(new), newDiffBudget())
		if folded {
			t.Fatalf("round %d: a small diff was folded", round)
		}
		if got := patch(t, old, diff); strings.Join(got, "\n") != strings.Join(new, "\n") {
			t.Fatalf("round %d: the diff of %q to %q gives %q:\n%v", round, old, new, got, diff)
		}
	}
	// A middle past MaxDiffWork: removed and added whole, the context around it kept.
	var a, b strings.Builder
	for i := range MaxDiffWork {
		fmt.Fprintf(&a, "old %d\n", i)
		fmt.Fprintf(&b, "new %d\n", i)
	}
	old := "same 1\nsame 2\n" + a.String() + "end\n"
	new := "same 1\nsame 2\n" + b.String() + "one more\nend\n"
	diff, folded := diffText([]byte(old), []byte(new), &diffBudget{lines: 1 << 30, bytes: 1 << 30})
	if folded || len(diff) != 1+2+2*MaxDiffWork+1+1 || diff[0].Text != fmt.Sprintf("@@ -1,%d +1,%d @@", MaxDiffWork+3, MaxDiffWork+4) {
		t.Fatalf("a large middle: %d lines (folded %v), first %v", len(diff), folded, diff[:min(3, len(diff))])
	}
	if got := patch(t, strings.Split(strings.TrimSuffix(old, "\n"), "\n"), diff); strings.Join(got, "\n")+"\n" != new {
		t.Fatal("the large middle's diff does not give the new text")
	}
}

// A missing newline at the end is shown as diff -u shows it.
func TestADiffShowsAMissingNewline(t *testing.T) {
	t.Parallel()
	diff, _ := diffText([]byte("a\nb"), []byte("a\nb\n"), newDiffBudget())
	var got []string
	for _, l := range diff {
		got = append(got, l.Text)
	}
	want := []string{"@@ -1,2 +1,2 @@", " a", "-b", `\ No newline at end of file`, "+b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// A page's diffs stop at its budget, the rest folded.
func TestADiffStopsAtThePagesBudget(t *testing.T) {
	t.Parallel()
	b := newDiffBudget()
	old, new := strings.Repeat("a\n", 131071), strings.Repeat("b\n", 131071)
	diff, folded := diffText([]byte(old), []byte(new), b)
	if !folded || len(diff) != MaxPageLines || !b.empty() {
		t.Fatalf("%d lines, folded %v; want the page's %d, folded", len(diff), folded, MaxPageLines)
	}
	if diff, folded := diffText([]byte("x\n"), []byte("y\n"), b); len(diff) != 0 || !folded {
		t.Fatalf("after the budget: %d lines, folded %v; want none, folded", len(diff), folded)
	}
}
