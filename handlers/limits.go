package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/applog"
	"sandman/lifecycle"
	"sandman/versions"
)

// Body limits (docs/api.md, "Conventions"). Every request body is bounded: a form's at 64 KiB, a
// JSON body's at 1 MiB, and the few routes in bodyRules at their own limit.
const (
	maxFormBody = 64 << 10
	maxJSONBody = 1 << 20
	// maxUploadBody is the upload's size on the wire: the unpacked budget (projects.Budget)
	// and room for the form fields and multipart framing around the files.
	maxUploadBody = versions.MaxTotalBytes + 1<<20
	// uploadReadTime is how long an upload may take to arrive (about 70 KB/s for the largest),
	// in place of the server's ReadTimeout.
	uploadReadTime = 5 * time.Minute
	// maxVersionBody is a new version on the wire: its files' limit in base64 (4/3 of the
	// bytes), and room for the JSON around them.
	maxVersionBody = versions.MaxTotalBytes/3*4 + 2<<20
)

const reportTooLarge = "A report is at most 16 KiB: send a shorter message and stack."

// bodyRule is how one route takes its body.
type bodyRule struct {
	max      int64
	tooLarge string // the 413's sentence, naming the limit
	// streamed bodies are read by the handler as they arrive, never held whole; their form's
	// first field must be the CSRF token (csrf reads it before the handler).
	streamed bool
	// readTime replaces the server's ReadTimeout for this route when set.
	readTime time.Duration
}

// bodyRules are the routes whose bodies differ from a form's or a JSON body's, by "METHOD path"
// as registered in routes.
var bodyRules = map[string]bodyRule{
	"POST /projects/upload": {max: maxUploadBody, streamed: true, readTime: uploadReadTime,
		tooLarge: fmt.Sprintf("The upload is larger than %d MiB, the limit for one upload. Remove large files (build output, node_modules) and try again.", maxUploadBody>>20)},
	// A browser's report of an error in a preview's page (applog.ParseReport).
	"POST /api/sandboxes/:id/reports": {max: applog.MaxReportBytes, tooLarge: reportTooLarge},
	"POST /s/:token/reports":          {max: applog.MaxReportBytes, tooLarge: reportTooLarge},
	"POST /webhooks/e2b":              {max: lifecycle.MaxWebhookBody, tooLarge: "Webhook bodies are limited to 1 MiB."},
	"POST /projects/:id/versions": {max: maxUploadBody, streamed: true, readTime: uploadReadTime,
		tooLarge: fmt.Sprintf("The upload is larger than %d MiB, the limit for one version. Remove large files (build output, node_modules) and try again.", maxUploadBody>>20)},
	"POST /api/projects/:id/versions": {max: maxVersionBody, readTime: uploadReadTime,
		tooLarge: fmt.Sprintf("The version is larger than %d MiB as sent, the limit for one version (%d MiB of files, in base64 or a zip). "+
			"Remove large files (build output, node_modules) and try again.", maxVersionBody>>20, versions.MaxTotalBytes>>20)},
}

// ruleFor is the body rule of the request's route.
func ruleFor(c echo.Context) bodyRule {
	r := c.Request()
	if rule, ok := bodyRules[r.Method+" "+c.Path()]; ok {
		return rule
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		return bodyRule{max: maxJSONBody, tooLarge: "JSON bodies are limited to 1 MiB."}
	}
	return bodyRule{max: maxFormBody, tooLarge: "The form is larger than 64 KiB, the limit for a form. Shorten what you typed and try again."}
}

const ctxStreamedKey = "sandman.streamed"

// limitBody bounds every request's body by its route's rule before anything reads it. A body
// that is not streamed is read here, whole and within its limit, so no handler or middleware can
// read past it and a multipart form can never spill to disk: it fits in memory by construction.
// An overrun is a 413 naming the limit; nothing behind it ran.
func (h *Handlers) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, rule := c.Request(), ruleFor(c)
		if r.ContentLength > rule.max {
			return tooLarge(rule)
		}
		if rule.readTime > 0 {
			if err := http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(rule.readTime)); err != nil {
				return err
			}
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, rule.max)
		if rule.streamed {
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "multipart/form-data" {
				return echo.NewHTTPError(http.StatusUnsupportedMediaType, "Send the upload as multipart/form-data, as the page's form does.")
			}
			c.Set(ctxStreamedKey, true)
			return next(c)
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return bodyReadError(rule, err)
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		if err := wellFormed(r, body); err != nil {
			return err
		}
		return next(c)
	}
}

// wellFormed refuses a body that is not what its Content-Type says (400), so that no route,
// whether or not it reads its body, acts on a request whose body is broken. A form is parsed
// here (within its limit, in memory) for the handlers to read.
func wellFormed(r *http.Request, body []byte) error {
	if len(body) == 0 {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var err error
	switch mt {
	case "application/json":
		if !json.Valid(body) {
			return echo.NewHTTPError(http.StatusBadRequest, "The body is not valid JSON.")
		}
	case "application/x-www-form-urlencoded":
		if _, err = url.ParseQuery(string(body)); err == nil {
			err = r.ParseForm() // the form of a POST, PUT or PATCH, for FormValue
		}
	case "multipart/form-data":
		err = r.ParseMultipartForm(maxFormBody) // the whole body fits: nothing goes to disk
	}
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The form could not be read: it is malformed.")
	}
	return nil
}

func tooLarge(rule bodyRule) error {
	return &apperr.Error{Kind: apperr.KindTooLarge, Code: "too_large", Message: rule.tooLarge}
}

// bodyReadError is the answer to a body that could not be read: too large (413), too slow (408)
// or cut off (400).
func bodyReadError(rule bodyRule, err error) error {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.As(err, &mbe):
		return tooLarge(rule)
	case errors.As(err, &ne) && ne.Timeout():
		return echo.NewHTTPError(http.StatusRequestTimeout, "The request took too long to arrive. Try again on a faster connection.")
	}
	return echo.NewHTTPError(http.StatusBadRequest, "The request body could not be read; try again.")
}
