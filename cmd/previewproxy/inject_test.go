package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

const fuzzTag = `<script src="/__sandman/report.js?v=fuzz"></script>`

var injectionSeeds = []string{
	"<!doctype html><html><head><title>t</title></head><body></body></html>",
	"<!DOCTYPE html>\n<html lang=\"en\">\n  <head>\n    <meta charset=\"UTF-8\" />\n    <script type=\"module\" src=\"/@vite/client\"></script>\n  </head>\n  <body><div id=\"app\"></div></body>\n</html>\n",
	"\xef\xbb\xbf<!doctype html><head></head>",
	"<!-- a comment --><!doctype html><html><head></head></html>",
	"<!doctype html><!-- <head> --><title>x</title>",
	"<!--><!doctype html><head>",
	"<!---><html><head>",
	"<!-- --!><head>",
	"<html><body><p>no head</p></body></html>",
	"<header><h1>not a head</h1></header>",
	"<head data-x=\"a>b\" data-y='c>d' z=e>",
	"<head a=\"unclosed",
	"<?xml version=\"1.0\"?><html><head></head></html>",
	"text first <head></head>",
	"</head><head>",
	"<!doctype html>",
	"",
	"   ",
	"<html",
	"<3 <head>",
	"<HTML><HEAD></HEAD></HTML>",
	"<html/><head/>",
	"<!doctypehtml><head>",
	"<frameset></frameset>",
	"<!doctype html><html><head>" + strings.Repeat("<!-- x -->", 10),
}

// FuzzInjectionPoint holds the finder to the HTML parser: the document with the tag parses as
// the document without it plus one script in the head, before any of the page's own scripts,
// with the same doctype; and the point found on any prefix that says it is sure is the point
// found on the whole document (the proxy streams the rest unseen).
func FuzzInjectionPoint(f *testing.F) {
	for _, s := range injectionSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		if len(doc) > 4<<10 { // the finder reads the start; the prefix check is quadratic
			return
		}
		b := []byte(doc)
		pos, ok := injectionPoint(b, true)
		if !ok || pos < 0 || pos > len(b) {
			t.Fatalf("injectionPoint(%q, atEOF) = %d, %v: want a point within the document", doc, pos, ok)
		}
		for k := 0; k <= len(b); k++ {
			if p, ok := injectionPoint(b[:k], false); ok && p != pos {
				t.Fatalf("the first %d bytes of %q say %d, the whole document %d", k, doc, p, pos)
			}
		}
		checkParse(t, doc, pos)
	})
}

// checkParse compares the parse of the document with the tag to the parse without it.
func checkParse(t *testing.T, doc string, pos int) {
	t.Helper()
	injected, rest := doc[:pos]+fuzzTag+doc[pos:], doc[pos:]
	// A browser takes a byte-order mark for the encoding's; the parser here would take it for
	// text.
	doc, injected = strings.TrimPrefix(doc, "\ufeff"), strings.TrimPrefix(injected, "\ufeff")
	before, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Skip() // the parser refuses it: nothing to compare
	}
	after, err := html.Parse(strings.NewReader(injected))
	if err != nil {
		t.Fatalf("the document parses without the tag but not with it: %v\n%q", err, injected)
	}
	var ours []*html.Node
	firstScript := (*html.Node)(nil)
	for n := range after.Descendants() {
		if n.Type == html.ElementNode && n.Data == "script" {
			if firstScript == nil {
				firstScript = n
			}
			for _, a := range n.Attr {
				if a.Key == "src" && a.Val == "/__sandman/report.js?v=fuzz" {
					ours = append(ours, n)
				}
			}
		}
	}
	// A page may already hold a tag with our src (the fuzzer can write one): count only what
	// the tag added.
	had := strings.Count(doc, fuzzTag)
	if len(ours) != had+1 {
		t.Fatalf("%d scripts of ours in the parse of %q, want %d", len(ours), injected, had+1)
	}
	if had == 0 {
		s := ours[0]
		if s.Parent == nil || s.Parent.Data != "head" {
			t.Fatalf("our script is in <%s>, not in the head: %q", parentName(s), injected)
		}
		if firstScript != s {
			t.Fatalf("a script of the page comes before ours: %q", injected)
		}
		s.Parent.RemoveChild(s)
	}
	// A comment may move (into the head, when the tag goes before a comment the document ends
	// in), and so may whitespace that is no content (kept in the head, dropped before it): only
	// the elements, text and doctype must parse as they did. A doctype the document ends in,
	// unclosed, makes the page quirky with or without the tag.
	dropIdle(before)
	dropIdle(after)
	unclosed := (strings.HasPrefix(rest, "<!") || strings.HasPrefix(rest, "<?")) && !strings.Contains(rest, ">")
	if got, want := render(after), render(before); had == 0 && got != want && !unclosed {
		t.Fatalf("the tag changed the rest of the document:\nwithout it: %s\nwith it (ours removed): %s\n%q", want, got, injected)
	}
}

func dropIdle(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		blank := c.Type == html.TextNode && strings.Trim(c.Data, " \t\n\r\f") == "" &&
			(n.Data == "head" || n.Data == "html")
		if c.Type == html.CommentNode || blank {
			n.RemoveChild(c)
		} else {
			dropIdle(c)
		}
		c = next
	}
}

func parentName(n *html.Node) string {
	if n.Parent == nil {
		return "nothing"
	}
	return n.Parent.Data
}

func render(n *html.Node) string {
	var b bytes.Buffer
	_ = html.Render(&b, n)
	return b.String()
}

func TestInjectorStreamsTheRestUnseen(t *testing.T) {
	for _, doc := range injectionSeeds {
		pos, _ := injectionPoint([]byte(doc), true)
		want := doc[:pos] + fuzzTag + doc[pos:]
		// One byte a read: the finder sees the document grow a byte at a time.
		got, err := io.ReadAll(newInjector(io.NopCloser(&oneByte{r: strings.NewReader(doc)}), []byte(fuzzTag)))
		if err != nil || string(got) != want {
			t.Errorf("read a byte at a time, %q became %q (%v), want %q", doc, got, err, want)
		}
	}
}

type oneByte struct{ r io.Reader }

func (o *oneByte) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:1]
	}
	return o.r.Read(p)
}
