// Package handlers is Sandman's HTTP surface: pages, htmx actions, the JSON API, health and
// metrics. Handlers parse a request, call one domain function and render; rules live elsewhere.
package handlers

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/accounts"
	"sandman/applog"
	"sandman/credits"
	"sandman/envvars"
	"sandman/feed"
	"sandman/lifecycle"
	"sandman/live"
	"sandman/ops"
	"sandman/outbox"
	"sandman/overview"
	"sandman/projects"
	"sandman/shares"
	"sandman/versions"
)

// Deps are everything the handlers call.
type Deps struct {
	Pool     *pgxpool.Pool
	Sessions *scs.SessionManager
	Accounts *accounts.Service
	Projects *projects.Service
	Shares   *shares.Service
	Versions *versions.Service
	// Env is the projects' environment variables.
	Env *envvars.Store
	// AppLog is the apps' output and problems (and the log streams' feed).
	AppLog *applog.Service
	// Outbox is the founders' outgoing webhooks and event feed.
	Outbox    *outbox.Service
	Lifecycle *lifecycle.Service
	// Credits reads the founders' balances.
	Credits *credits.Ledger
	// Overview reads what projects, sandboxes and share pages look like now.
	Overview *overview.Reader
	Live     *live.Hub
	// Feed publishes to Live and answers its streams' snapshots.
	Feed *feed.Feed
	// Ops is the operator's console; Operators says who may open it.
	Ops       *ops.Service
	Operators *ops.Operators
	Logger    *slog.Logger
	// Registry receives the request metrics; nil: the default Prometheus registry.
	Registry *prometheus.Registry
	// Metrics serves GET /metrics on this server (MetricsHandler); nil: no such route.
	Metrics http.Handler
	// TrustProxy takes the client address from X-Forwarded-For (only behind a proxy that sets it).
	TrustProxy bool
	// HSTS sends Strict-Transport-Security with every answer: Sandman is served over HTTPS (its
	// cookies are Secure).
	HSTS bool
	// FrameOrigins may be shown in the preview iframe (the provider's preview hosts).
	FrameOrigins []string
	// LargeBodies is how many bodies past the small default (uploads, versions) this instance
	// reads at once, and LargeBodyWait how long one more waits for its turn before a 503;
	// zero: DefaultLargeBodies, DefaultLargeBodyWait.
	LargeBodies   int
	LargeBodyWait time.Duration
}

// Handlers holds the dependencies of every route.
type Handlers struct {
	Deps
	requests    *prometheus.HistogramVec
	rateLimited *prometheus.CounterVec
	shareViews  *prometheus.CounterVec
	// requestsByAuth counts requests by how they were authenticated; tokenFailures the API
	// tokens refused, by why.
	requestsByAuth, tokenFailures *prometheus.CounterVec
	// largeBodies holds a token per large body being read (largeBody); largeBodiesReading
	// counts them, largeBodiesBusy the requests refused for want of a turn.
	largeBodies        chan struct{}
	largeBodiesReading prometheus.Gauge
	largeBodiesBusy    prometheus.Counter
	// logStreams counts each founder's log streams here.
	logStreams logStreams
	// bodyRules are the body rules of the routes registered withBody, by "METHOD path"; written
	// only while the routes are registered.
	bodyRules map[string]bodyRule
}

// New builds the echo server with every route.
func New(d Deps) *echo.Echo {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	var reg prometheus.Registerer
	if d.Registry != nil {
		reg = d.Registry
	}
	h := &Handlers{Deps: d, requests: newRequestMetric(reg), rateLimited: newRateLimitedMetric(reg), shareViews: newShareViewsMetric(reg)}
	h.requestsByAuth, h.tokenFailures = newAuthMetrics(reg)
	if h.LargeBodies <= 0 {
		h.LargeBodies = DefaultLargeBodies
	}
	if h.LargeBodyWait <= 0 {
		h.LargeBodyWait = DefaultLargeBodyWait
	}
	h.largeBodies = make(chan struct{}, h.LargeBodies)
	h.largeBodiesReading, h.largeBodiesBusy = newLargeBodyMetrics(reg)
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = h.errorHandler
	if d.TrustProxy {
		e.IPExtractor = echo.ExtractIPFromXFFHeader()
	} else {
		// The default trusts X-Forwarded-For from anyone, which would let a client dodge the
		// per-address login limit.
		e.IPExtractor = echo.ExtractIPDirect()
	}
	h.routes(e)
	return e
}

func (h *Handlers) contentSecurityPolicy() string {
	frames := "'none'"
	if len(h.FrameOrigins) > 0 {
		frames = strings.Join(h.FrameOrigins, " ")
	}
	return "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; frame-src " + frames + "; frame-ancestors 'none'; form-action 'self'; " +
		"base-uri 'none'; object-src 'none'"
}

func isHTMX(c echo.Context) bool { return c.Request().Header.Get("HX-Request") == "true" }

// redirect sends a browser elsewhere; htmx requests get HX-Redirect so the whole page changes.
func redirect(c echo.Context, to string) error {
	if isHTMX(c) {
		c.Response().Header().Set("HX-Redirect", to)
		return c.NoContent(http.StatusOK)
	}
	return c.Redirect(http.StatusSeeOther, to)
}
