package testkit

import (
	"strings"

	"golang.org/x/net/html"
)

// ByTestID returns the elements under root whose data-testid is id, in document order: tests
// read markup by what each part is, never by attribute order.
func ByTestID(root *html.Node, id string) []*html.Node {
	var out []*html.Node
	for n := range root.Descendants() {
		if n.Type == html.ElementNode && Attr(n, "data-testid") == id {
			out = append(out, n)
		}
	}
	return out
}

// Attr is the element's attribute name, or "" when it has none.
func Attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}

// Text is the element's text with its white space collapsed, as a browser shows it.
func Text(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}
