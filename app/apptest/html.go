package apptest

import (
	"strings"
	"testing"

	"golang.org/x/net/html"

	"sandman/internal/testkit"
)

// Element is one element of an answer's markup, found by its data-testid: its text and its
// attributes, so a test reads a page by what it says rather than by attribute order.
type Element struct {
	Text  string
	Attrs map[string]string
}

// ByTestID returns the one element of body (a page or a fragment) with the test id, failing the
// test when there is none or more than one.
func ByTestID(t testing.TB, body, testID string) Element {
	t.Helper()
	root, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	found := testkit.ByTestID(root, testID)
	if len(found) != 1 {
		t.Fatalf("%d elements with data-testid %q, want 1, in:\n%.2000s", len(found), testID, body)
	}
	e := Element{Text: testkit.Text(found[0]), Attrs: map[string]string{}}
	for _, a := range found[0].Attr {
		e.Attrs[a.Key] = a.Val
	}
	return e
}
