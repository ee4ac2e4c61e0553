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
	"github.com/prometheus/client_golang/prometheus"

	"sandman/apperr"
	"sandman/applog"
	"sandman/lifecycle"
	"sandman/versions"
)

// Body limits (docs/api.md, "Conventions"). Every request body is bounded: a form's at 64 KiB, a
// JSON body's at 1 MiB, and the few routes registered withBody at their own limit.
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
	// large bodies are read only once the request is authenticated, and under the instance's
	// bound on large bodies read at once: until then, the small default of their Content-Type
	// (smallRule) bounds what anything may read of them. Such a route names largeBody among its
	// middleware, after its authentication.
	large bool
}

// The routes whose bodies differ from a form's or a JSON body's declare their rule where they are
// registered (routes.go, withBody).
var (
	uploadRule = bodyRule{max: maxUploadBody, streamed: true, readTime: uploadReadTime, large: true,
		tooLarge: fmt.Sprintf("The upload is larger than %d MiB, the limit for one upload. Remove large files (build output, node_modules) and try again.", maxUploadBody>>20)}
	uploadVersionRule = bodyRule{max: maxUploadBody, streamed: true, readTime: uploadReadTime, large: true,
		tooLarge: fmt.Sprintf("The upload is larger than %d MiB, the limit for one version. Remove large files (build output, node_modules) and try again.", maxUploadBody>>20)}
	apiVersionRule = bodyRule{max: maxVersionBody, readTime: uploadReadTime, large: true,
		tooLarge: fmt.Sprintf("The version is larger than %d MiB as sent, the limit for one version (%d MiB of files, in base64 or a zip). "+
			"Remove large files (build output, node_modules) and try again.", maxVersionBody>>20, versions.MaxTotalBytes>>20)}
	// A browser's report of an error in a preview's page (applog.ParseReport).
	reportRule  = bodyRule{max: applog.MaxReportBytes, tooLarge: reportTooLarge}
	webhookRule = bodyRule{max: lifecycle.MaxWebhookBody, tooLarge: "Webhook bodies are limited to 1 MiB."}
)

// router is where a route is registered: the server or one of its groups.
type router interface {
	POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route
}

// withBody registers a POST route, with its own middleware m, that takes its body by its own
// rule, not by its Content-Type's default: a large body's route reads it last in its chain
// (largeBody), once its group has authenticated the request.
func (h *Handlers) withBody(g router, path string, handler echo.HandlerFunc, rule bodyRule, m ...echo.MiddlewareFunc) {
	if rule.large {
		m = append(m, h.largeBody)
	}
	r := g.POST(path, handler, m...)
	if h.bodyRules == nil {
		h.bodyRules = map[string]bodyRule{}
	}
	h.bodyRules[r.Method+" "+r.Path] = rule
}

// ruleFor is the body rule of the request's route.
func (h *Handlers) ruleFor(c echo.Context) bodyRule {
	r := c.Request()
	if rule, ok := h.bodyRules[r.Method+" "+c.Path()]; ok {
		return rule
	}
	return smallRule(r)
}

// smallRule is the default rule of a body of the request's Content-Type: a JSON body's, else a
// form's.
func smallRule(r *http.Request) bodyRule {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		return bodyRule{max: maxJSONBody, tooLarge: "JSON bodies are limited to 1 MiB."}
	}
	return bodyRule{max: maxFormBody, tooLarge: "The form is larger than 64 KiB, the limit for a form. Shorten what you typed and try again."}
}

// limitBody bounds every request's body by its route's rule before anything reads it. A body
// that is not streamed is read here, whole and within its limit, so no handler or middleware can
// read past it and a multipart form can never spill to disk: it fits in memory by construction.
// An overrun is a 413 naming the limit; nothing behind it ran. A large body (bodyRule.large) is
// left unread: until largeBody lifts it, after the request's authentication, only the small
// default of its Content-Type may be read of it, so an anonymous sender costs no more than any
// other anonymous request.
func (h *Handlers) limitBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r, rule := c.Request(), h.ruleFor(c)
		if r.ContentLength > rule.max {
			return tooLarge(rule)
		}
		if rule.streamed {
			if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "multipart/form-data" {
				return echo.NewHTTPError(http.StatusUnsupportedMediaType, "Send the upload as multipart/form-data, as the page's form does.")
			}
			stateOf(c).streamed = true
		}
		if rule.large {
			gate := &gatedBody{body: r.Body, limit: smallRule(r).max}
			r.Body = http.MaxBytesReader(c.Response(), gate, rule.max)
			stateOf(c).largeBody = &largeBodyState{rule: rule, gate: gate}
			return next(c)
		}
		if err := setReadTime(c, rule); err != nil {
			return err
		}
		r.Body = http.MaxBytesReader(c.Response(), r.Body, rule.max)
		if rule.streamed {
			return next(c)
		}
		return readWhole(c, rule, next)
	}
}

// readWhole reads a body that is not streamed, whole, within its rule, and checks that it is
// what its Content-Type says before next runs.
func readWhole(c echo.Context, rule bodyRule, next echo.HandlerFunc) error {
	r := c.Request()
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

// setReadTime gives the rule's route its own time to read the request, in place of the server's.
func setReadTime(c echo.Context, rule bodyRule) error {
	if rule.readTime == 0 {
		return nil
	}
	return http.NewResponseController(c.Response()).SetReadDeadline(time.Now().Add(rule.readTime))
}

// largeBodyState is a large body held back by limitBody until largeBody lifts it.
type largeBodyState struct {
	rule bodyRule
	gate *gatedBody
}

// gatedBody lets limit bytes of a body be read, then refuses (as a body over that limit) until
// it is lifted. A read refused before the lift spoils the body for good (the MaxBytesReader
// around it keeps the error): whatever read it before authentication took more than a request
// of no one may send.
type gatedBody struct {
	body        io.ReadCloser
	limit, read int64
	lifted      bool
}

func (g *gatedBody) Read(p []byte) (int, error) {
	if g.lifted {
		return g.body.Read(p)
	}
	if g.read >= g.limit {
		return 0, &http.MaxBytesError{Limit: g.limit}
	}
	n, err := g.body.Read(p[:min(int64(len(p)), g.limit-g.read)])
	g.read += int64(n)
	return n, err
}

func (g *gatedBody) Close() error { return g.body.Close() }

// errLargeBodiesBusy answers a large body that found no room within largeBodies' wait.
var errLargeBodiesBusy = &apperr.Error{Kind: apperr.KindUnavailable, Code: codeBusy, RetryAfter: 5 * time.Second,
	Message: "Sandman is receiving as many large uploads as it takes at once. Nothing was stored: send it again in a few seconds."}

// DefaultLargeBodies is how many large bodies an instance reads at once unless configured
// (Deps.LargeBodies), and DefaultLargeBodyWait how long one waits for its turn.
const (
	DefaultLargeBodies   = 4
	DefaultLargeBodyWait = 2 * time.Second
)

// largeBody reads a large body (bodyRule.large) of an authenticated request: after its route's
// authentication, so that no anonymous sender gets past the small default, and one of at most
// Deps.LargeBodies at once on this instance, whoever sends them, so that memory stays bounded
// (each is held whole, or unpacked, by its handler). A body that declares it fits the small
// default takes no turn. A request that waits longer than Deps.LargeBodyWait for its turn is a
// 503 with Retry-After, its body unread.
func (h *Handlers) largeBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		st := stateOf(c).largeBody
		if st == nil {
			return next(c)
		}
		r := c.Request()
		if r.ContentLength < 0 || r.ContentLength > smallRule(r).max {
			release, err := h.largeTurn(c)
			if err != nil {
				return err
			}
			defer release()
		}
		if err := setReadTime(c, st.rule); err != nil {
			return err
		}
		st.gate.lifted = true
		if st.rule.streamed {
			return next(c)
		}
		return readWhole(c, st.rule, next)
	}
}

// largeTurn waits for one of the instance's turns to read a large body.
func (h *Handlers) largeTurn(c echo.Context) (release func(), err error) {
	release = func() {
		<-h.largeBodies
		h.largeBodiesReading.Dec()
	}
	select {
	case h.largeBodies <- struct{}{}:
		h.largeBodiesReading.Inc()
		return release, nil
	default:
	}
	wait := time.NewTimer(h.LargeBodyWait)
	defer wait.Stop()
	select {
	case h.largeBodies <- struct{}{}:
		h.largeBodiesReading.Inc()
		return release, nil
	case <-wait.C:
		h.largeBodiesBusy.Inc()
		return nil, errLargeBodiesBusy
	case <-c.Request().Context().Done():
		return nil, c.Request().Context().Err()
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
	return &apperr.Error{Kind: apperr.KindTooLarge, Code: codeTooLarge, Message: rule.tooLarge}
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

// newLargeBodyMetrics are the large bodies being read now, and those refused for want of a turn.
func newLargeBodyMetrics(reg prometheus.Registerer) (prometheus.Gauge, prometheus.Counter) {
	reading := prometheus.NewGauge(prometheus.GaugeOpts{Name: "sandman_large_bodies_reading",
		Help: "Large request bodies (uploads, versions) this instance is reading or holding now; at most its bound (SANDMAN_LARGE_BODIES)."})
	busy := prometheus.NewCounter(prometheus.CounterOpts{Name: "sandman_large_bodies_busy_total",
		Help: "Large request bodies refused with 503 because the instance was already reading as many as its bound."})
	if reg != nil {
		reg.MustRegister(reading, busy)
	}
	return reading, busy
}
