package testkit

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var rowTest = regexp.MustCompile("\\| `([^`]+)\\.(Test\\w+)` \\|$")

// Every row of RELIABILITY.md names a test that exists and records that very scenario, so the
// document cannot keep a row no test measures any more. (Record fails a test whose scenario has
// no row, the other way round.)
func TestEveryReliabilityRowHasItsTest(t *testing.T) {
	t.Parallel()
	path, err := ReliabilityPath()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ReliabilityRows(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatal("RELIABILITY.md has no scenario rows")
	}
	root := filepath.Dir(path)
	sources := map[string]string{} // package dir → its test files, concatenated
	for id, row := range rows {
		m := rowTest.FindStringSubmatch(row)
		if m == nil {
			t.Errorf("scenario %q: no test named at the end of its row: %s", id, row)
			continue
		}
		dir, test := m[1], m[2]
		src, ok := sources[dir]
		if !ok {
			files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(dir), "*_test.go"))
			var b strings.Builder
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				b.Write(data)
			}
			src = b.String()
			sources[dir] = src
		}
		switch {
		case !strings.Contains(src, "func "+test+"("):
			t.Errorf("scenario %q: its test %s is not in %s", id, test, dir)
		case !strings.Contains(src, `"`+id+`"`):
			t.Errorf("scenario %q: no test in %s records it (the id must appear there as a string)", id, dir)
		}
	}
}

// A row counts what its test counted and shows "—" for what it did not: a scenario without
// Counts can never read as zero lost, charged twice and stuck.
func TestRowShowsADashForWhatItDidNotCount(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		counts *Counts
		want   string
	}{
		{nil, "| — | — | — |"},
		{&Counts{}, "| 0 | 0 | 0 |"},
		{&Counts{Lost: 3, ChargedTwice: 1, Stuck: 2}, "| 3 | 1 | 2 |"},
	} {
		row := Scenario{ID: "x", Injected: "i", Times: 7, Counts: tt.counts, Result: "r"}.row("pkg.TestX")
		if want := "| `x` | i | 7 " + tt.want + " r | `pkg.TestX` |"; row != want {
			t.Errorf("row %q, want %q", row, want)
		}
	}
}
