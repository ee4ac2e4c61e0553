package testkit

import (
	"regexp"
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

// templateCode is what a templ template writes out as text when templ took code for text: a
// component call (`@timeAgo(o.At, c.Now)`, written inline after text) or an expression
// (`{ o.ProviderID }`, `{ "text" }`). A JSON example (`{ "name": "x" }`) or an address
// (`a@example.com`) is not matched.
var templateCode = regexp.MustCompile(`@[A-Za-z_][\w.]*\(|\{ [A-Za-z_][\w.]*(\([^{}]*\))?[\w.]* \}|\{ "[^"]*" \}`)

// TemplateLeftovers returns the template code a rendered page (or fragment) shows: in its text,
// or in an attribute's value. Scripts and style sheets are code anyway and are not looked at.
func TemplateLeftovers(page string) []string {
	root, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return []string{"unparseable: " + err.Error()}
	}
	var found []string
	for n := range root.Descendants() {
		switch n.Type {
		case html.TextNode:
			if p := n.Parent; p != nil && (p.Data == "script" || p.Data == "style") {
				continue
			}
			found = append(found, templateCode.FindAllString(n.Data, -1)...)
		case html.ElementNode:
			for _, a := range n.Attr {
				found = append(found, templateCode.FindAllString(a.Val, -1)...)
			}
		}
	}
	return found
}
