package handlers

import (
	"context"
	"crypto/subtle"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func (h *Handlers) healthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok")
}

// readyz answers 200 only while the database answers, so a load balancer stops sending
// traffic to an instance that lost it.
func (h *Handlers) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := h.Pool.Ping(ctx); err != nil {
		h.Logger.Warn("readiness: database unreachable", "err", err)
		return c.String(http.StatusServiceUnavailable, "database unreachable")
	}
	return c.String(http.StatusOK, "ready")
}

// MetricsHandler serves g's metrics in Prometheus' format. With a token, a request must carry it
// as "Authorization: Bearer <token>" (401 otherwise).
func MetricsHandler(g prometheus.Gatherer, token string) http.Handler {
	serve := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	if token == "" {
		return serve
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sandman metrics"`)
			http.Error(w, "Metrics need the bearer token of SANDMAN_METRICS_TOKEN.", http.StatusUnauthorized)
			return
		}
		serve.ServeHTTP(w, r)
	})
}

func staticHandler(files fs.FS) http.Handler {
	fsrv := http.FileServerFS(files)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Vendored files carry their version in the name, so they can be cached for good.
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	})
}

// newRequestMetric is the request histogram, labelled by route pattern (not path: ids would
// make a series per project).
func newRequestMetric(reg prometheus.Registerer) *prometheus.HistogramVec {
	m := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "sandman_http_request_duration_seconds", Help: "HTTP requests by route, method and status.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"method", "route", "status"})
	if reg != nil {
		reg.MustRegister(m)
	}
	return m
}

// newRateLimitedMetric counts the requests refused for being over a limit (429), by route.
func newRateLimitedMetric(reg prometheus.Registerer) *prometheus.CounterVec {
	m := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandman_rate_limited_total",
		Help: "Requests refused with 429 for being over a limit (log-ins, sign-ups, streams, share links' wakes and activity), by route."},
		[]string{"method", "route"})
	if reg != nil {
		reg.MustRegister(m)
	}
	return m
}

// requestLog writes one structured line per request and observes its duration.
func (h *Handlers) requestLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		// A stream's duration is its lifetime, not a latency.
		if !strings.HasSuffix(c.Path(), "/events") && !strings.HasSuffix(c.Path(), "/logs/stream") {
			h.requests.WithLabelValues(c.Request().Method, c.Path(), strconv.Itoa(c.Response().Status)).
				Observe(time.Since(start).Seconds())
		}
		if c.Response().Status == http.StatusTooManyRequests {
			h.rateLimited.WithLabelValues(c.Request().Method, c.Path()).Inc()
		}
		h.requestsByAuth.WithLabelValues(authKind(c)).Inc()
		lvl := slog.LevelInfo
		if c.Request().URL.Path == "/healthz" || c.Request().URL.Path == "/metrics" {
			lvl = slog.LevelDebug
		}
		attrs := []any{"method", c.Request().Method, "path", logPath(c.Request()),
			"status", c.Response().Status, "duration_ms", time.Since(start).Milliseconds(), "ip", c.RealIP()}
		if id := loggedToken(c); id != "" {
			attrs = append(attrs, "token", id)
		}
		h.Logger.Log(c.Request().Context(), lvl, "request", attrs...)
		return nil
	}
}
