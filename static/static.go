// Package static embeds the browser assets: vendored htmx 2 and its SSE extension, the CSS and
// the little JavaScript Sandman needs.
package static

import "embed"

// Files are served under /static/.
//
//go:embed css js vendor favicon.svg
var Files embed.FS
