package testkit

import (
	"slices"
	"testing"
)

// TemplateLeftovers finds what templ wrote as text when it was meant as code (the operator's
// console once showed `@timeAgo(o.At, c.Now)` after every orphan), and nothing a page says on
// purpose: addresses, JSON examples, scripts.
func TestTemplateLeftoversFindsCodeShownAsText(t *testing.T) {
	for _, tt := range []struct {
		name, page string
		want       []string
	}{
		{"a call written inline after text", `<li><code>i123</code> · @timeAgo(o.At, c.Now)</li>`, []string{"@timeAgo("}},
		{"a dotted call", `<p>@views.Money(x)</p>`, []string{"@views.Money("}},
		{"an expression", `<p>Sandbox { o.ProviderID } killed</p>`, []string{"{ o.ProviderID }"}},
		{"a call in an expression", `<p>{ strconv.Itoa(n) } left</p>`, []string{"{ strconv.Itoa(n) }"}},
		{"a string expression", `<p>a{ " · " }b</p>`, []string{`{ " · " }`}},
		{"in an attribute", `<a href="/ops/{ it.SandboxID }">x</a>`, []string{"{ it.SandboxID }"}},
		{"an address", `<p>Signed in as founder@example.com (log out)</p>`, nil},
		{"a JSON example", `<pre>{ "idempotencyKey": "k-1" }</pre><pre>{"name":"x"}</pre>`, nil},
		{"a script and a style sheet", `<script>if (a) { b() } x.on("@y(")</script><style>@media (min-width: 1px) { a { b: c } }</style>`, nil},
		{"a page as rendered", `<li><code>i123</code> · <time datetime="2026-11-26T12:00:00Z">3 minutes ago</time></li>`, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := TemplateLeftovers(tt.page); !slices.Equal(got, tt.want) {
				t.Fatalf("TemplateLeftovers(%q) = %q, want %q", tt.page, got, tt.want)
			}
		})
	}
}
