package views

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"sandman/internal/testkit"
)

// dom is rendered markup, read by data-testid as a person reads the page: by what each part
// says, never by attribute order.
type dom struct {
	t    *testing.T
	root *html.Node
	raw  string
}

func renderDOM(t *testing.T, cmp templ.Component) dom {
	t.Helper()
	var buf bytes.Buffer
	if err := cmp.Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	root, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatal(err)
	}
	return dom{t: t, root: root, raw: buf.String()}
}

// all returns the elements with the test id, in document order.
func (d dom) all(testID string) []*html.Node { return testkit.ByTestID(d.root, testID) }

// text is the text of the one element with the test id, or "" when there is none.
func (d dom) text(testID string) string {
	d.t.Helper()
	ns := d.all(testID)
	switch len(ns) {
	case 0:
		return ""
	case 1:
		return testkit.Text(ns[0])
	}
	d.t.Fatalf("%d elements with data-testid %q", len(ns), testID)
	return ""
}

// one returns the one element with the test id.
func (d dom) one(testID string) *html.Node {
	d.t.Helper()
	ns := d.all(testID)
	if len(ns) != 1 {
		d.t.Fatalf("%d elements with data-testid %q, want 1 in:\n%s", len(ns), testID, d.raw)
	}
	return ns[0]
}

func hasAttr(n *html.Node, name string) bool {
	for _, a := range n.Attr {
		if a.Key == name {
			return true
		}
	}
	return false
}

// ancestor returns the nearest ancestor of n with the tag, or nil.
func ancestor(n *html.Node, tag string) *html.Node {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.Data == tag {
			return p
		}
	}
	return nil
}
