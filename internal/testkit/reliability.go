package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// Scenario is one row of RELIABILITY.md: a fault or an abuse, how it was injected and how many
// times, and what came of it, as the test that ran it measured. Counts are what it counted of
// lost, charged twice and stuck; Result says the rest in a few words (a bound it checked, say
// "heap peak ≤ 64 MiB", never a figure that varies from run to run).
type Scenario struct {
	ID       string // stable, unique: the row's key
	Injected string
	Times    int
	// Counts are nil for a scenario that counts none of them: its row shows "—" in those
	// columns, never a zero nobody counted.
	Counts *Counts
	Result string
}

// Counts are what a scenario left behind once it settled: RELIABILITY.md's "lost", "charged
// twice" and "stuck" (apptest.AuditDB counts them in an instance's database).
type Counts struct{ Lost, ChargedTwice, Stuck int }

// UpdateReliabilityEnv, set to 1, makes Record write its row into RELIABILITY.md instead of
// checking it: `SANDMAN_UPDATE_RELIABILITY=1 go test ./...`, then review the diff.
const UpdateReliabilityEnv = "SANDMAN_UPDATE_RELIABILITY"

const (
	reliabilityFile  = "RELIABILITY.md"
	scenariosBegin   = "<!-- scenarios: begin (rows written by the tests: SANDMAN_UPDATE_RELIABILITY=1 go test ./...) -->"
	scenariosEnd     = "<!-- scenarios: end -->"
	scenariosHeading = "| scenario | injected | times | lost | charged twice | stuck | result | test |\n|---|---|---|---|---|---|---|---|"
)

// Record checks what the calling test measured against its row in RELIABILITY.md and fails the
// test when they differ (or the row is missing), so the document cannot drift from the tests.
// Call it once the scenario's outcome is established and asserted.
func Record(t testing.TB, s Scenario) {
	t.Helper()
	if t.Failed() {
		return // a failed scenario has no row to check
	}
	path, err := repoFile(reliabilityFile)
	if err != nil {
		t.Fatal(err)
	}
	row := s.row(testName(t))
	if os.Getenv(UpdateReliabilityEnv) == "1" {
		if err := updateRow(path, s.ID, row); err != nil {
			t.Fatal(err)
		}
		return
	}
	rows, err := ReliabilityRows(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := rows[s.ID]
	switch {
	case !ok:
		t.Fatalf("%s has no row for scenario %q; add it with %s=1 go test, and review it:\n%s", reliabilityFile, s.ID, UpdateReliabilityEnv, row)
	case got != row:
		t.Fatalf("%s says of scenario %q\n  %s\nbut the test measured\n  %s\n(%s=1 go test rewrites the row)", reliabilityFile, s.ID, got, row, UpdateReliabilityEnv)
	}
}

// row is the scenario's line of the table; test names the package and top-level test.
func (s Scenario) row(test string) string {
	cell := func(v string) string { return strings.ReplaceAll(strings.ReplaceAll(v, "|", `\|`), "\n", " ") }
	counts := "— | — | —"
	if s.Counts != nil {
		counts = fmt.Sprintf("%d | %d | %d", s.Counts.Lost, s.Counts.ChargedTwice, s.Counts.Stuck)
	}
	return fmt.Sprintf("| `%s` | %s | %d | %s | %s | `%s` |", s.ID, cell(s.Injected), s.Times, counts, cell(s.Result), test)
}

// testName is "dir.TestName": the test package's directory in the repository and the test's
// top level (subtests share their test's name).
func testName(t testing.TB) string {
	dir, _ := os.Getwd()
	root, _ := repoFile("")
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		rel = filepath.Base(dir)
	}
	top, _, _ := strings.Cut(t.Name(), "/")
	return filepath.ToSlash(rel) + "." + top
}

var rowID = regexp.MustCompile("^\\| `([^`]+)` \\|")

// ReliabilityRows reads the scenario rows of the document at path, by id.
func ReliabilityRows(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, table, ok := strings.Cut(string(b), scenariosBegin)
	table, _, ok2 := strings.Cut(table, scenariosEnd)
	if !ok || !ok2 {
		return nil, fmt.Errorf("%s: no scenarios table between %q and %q", path, scenariosBegin, scenariosEnd)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(table, "\n") {
		if m := rowID.FindStringSubmatch(line); m != nil {
			if _, dup := rows[m[1]]; dup {
				return nil, fmt.Errorf("%s: scenario %q has two rows", path, m[1])
			}
			rows[m[1]] = line
		}
	}
	return rows, nil
}

// updateRow replaces the scenario's row (or adds it at the end of the table), holding a lock on
// the file: the packages' test binaries run at once.
func updateRow(path, id, row string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	head, rest, ok := strings.Cut(string(b), scenariosBegin)
	table, tail, ok2 := strings.Cut(rest, scenariosEnd)
	if !ok || !ok2 {
		return fmt.Errorf("%s: no scenarios table between %q and %q", path, scenariosBegin, scenariosEnd)
	}
	var lines []string
	replaced := false
	for _, line := range strings.Split(strings.Trim(table, "\n"), "\n") {
		if m := rowID.FindStringSubmatch(line); m != nil && m[1] == id {
			line, replaced = row, true
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		lines = strings.Split(scenariosHeading, "\n")
	}
	if !replaced {
		lines = append(lines, row)
	}
	out := head + scenariosBegin + "\n" + strings.Join(lines, "\n") + "\n" + scenariosEnd + tail
	return os.WriteFile(path, []byte(out), 0o644)
}

// repoFile finds name in the repository's root: the nearest directory above the test's that
// holds go.mod.
func repoFile(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, name), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// ReliabilityPath is RELIABILITY.md's path, for the test that checks every row has its test.
func ReliabilityPath() (string, error) { return repoFile(reliabilityFile) }
