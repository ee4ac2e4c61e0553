package sandboxd

import (
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"sandman/sandboxd/wire"
)

// apiHandler is the one route table of the control-plane API.
func (s *Server) apiHandler() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, s.apiMiddleware(pattern, h))
	}
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "Health check successful")
	})

	handle("POST /sandboxes", s.handleCreate)
	// The JS SDK (2.x) creates and connects through the v2 paths.
	handle("POST /v2/sandboxes", s.handleCreate)
	handle("GET /sandboxes", s.handleListV1)
	handle("GET /v2/sandboxes", s.handleListV2)
	handle("GET /sandboxes/{sandboxID}", s.handleGet)
	handle("DELETE /sandboxes/{sandboxID}", s.handleKill)
	handle("POST /sandboxes/{sandboxID}/pause", s.handlePause)
	handle("POST /sandboxes/{sandboxID}/resume", s.handleResume)
	handle("POST /sandboxes/{sandboxID}/connect", s.handleConnect)
	handle("POST /v2/sandboxes/{sandboxID}/connect", s.handleConnect)
	handle("POST /sandboxes/{sandboxID}/timeout", s.handleSetTimeout)
	handle("POST /sandboxes/{sandboxID}/refreshes", s.handleRefresh)
	handle("GET /sandboxes/{sandboxID}/metrics", s.handleMetrics)
	// What the provider has and sandboxd lacks answers so, not 404: the SDKs read a 404
	// as "sandbox not found".
	handle("POST /sandboxes/{sandboxID}/fork", unserved("forking a sandbox"))
	handle("/sandboxes/{sandboxID}/snapshots", unserved("snapshots"))
	handle("/snapshots", unserved("snapshots"))
	handle("/snapshots/{snapshotID}", unserved("snapshots"))
	handle("PUT /sandboxes/{sandboxID}/network", unserved("network updates (a sandbox has no outbound network)"))
	handle("/volumes", unserved("volumes"))
	handle("/volumes/{volumeID}", unserved("volumes"))

	handle("GET /events/sandboxes", s.handleEvents)
	handle("GET /events/sandboxes/{sandboxID}", s.handleEvents)
	handle("POST /events/webhooks", s.handleWebhookCreate)
	handle("GET /events/webhooks", s.handleWebhookList)
	handle("GET /events/webhooks/{webhookID}", s.handleWebhookGet)
	handle("PATCH /events/webhooks/{webhookID}", s.handleWebhookUpdate)
	handle("DELETE /events/webhooks/{webhookID}", s.handleWebhookDelete)

	admin := func(pattern string, h http.HandlerFunc) {
		mux.Handle(pattern, s.authenticate(h))
	}
	// A production sandboxd has no way in for faults: these routes answer
	// its 404 like any unknown path.
	if s.faults != nil {
		admin("POST /_sandboxd/faults", s.handleFaultAdd)
		admin("GET /_sandboxd/faults", s.handleFaultList)
		admin("DELETE /_sandboxd/faults", s.handleFaultClear)
		admin("DELETE /_sandboxd/faults/{faultID}", s.handleFaultClear)
		admin("POST /_sandboxd/sandboxes/{sandboxID}/kill", s.handleDashboardKill)
		admin("POST /_sandboxd/sandboxes/{sandboxID}/lose", s.handleLose)
	}
	admin("GET /_sandboxd/isolation", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteJSON(w, http.StatusOK, s.IsolationReport())
	})

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, http.StatusNotFound, "Not found")
	})
	return s.logRequests(mux)
}

// apiMiddleware authenticates, then applies injected faults for pattern.
func (s *Server) apiMiddleware(pattern string, h http.HandlerFunc) http.Handler {
	return s.authenticate(func(w http.ResponseWriter, r *http.Request) {
		if f := s.faults.Route(pattern, r.PathValue("sandboxID")); f != nil {
			if f.LatencyMs > 0 {
				select {
				case <-time.After(time.Duration(f.LatencyMs) * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
			if f.Status != 0 {
				if f.RetryAfterSeconds > 0 {
					w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfterSeconds))
				}
				s.log.Info("fault injected", "route", pattern, "status", f.Status)
				wire.WriteError(w, f.Status, f.Message)
				return
			}
		}
		h(w, r)
	})
}

// authenticate checks X-API-Key like the provider: format first, then the key.
func (s *Server) authenticate(h http.HandlerFunc) http.Handler {
	want := []byte(s.cfg.APIKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("X-API-Key")
		switch {
		case key == "":
			wire.WriteError(w, http.StatusUnauthorized, "Missing API key, please provide it in the X-API-Key header")
		case !apiKeyPattern.MatchString(key):
			wire.WriteError(w, http.StatusUnauthorized, "Invalid API key format")
		case subtle.ConstantTimeCompare([]byte(key), want) != 1:
			wire.WriteError(w, http.StatusUnauthorized, "Cannot get the team for the given API key")
		default:
			h(w, r)
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

func (s *Server) logRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		// Reads that succeed are the bulk (reconcilers poll): debug only.
		level := slog.LevelInfo
		switch {
		case rec.status >= 500:
			level = slog.LevelWarn
		case r.Method == http.MethodGet && rec.status < 400:
			level = slog.LevelDebug
		}
		s.log.Log(r.Context(), level, "api request", "method", r.Method, "path", r.URL.Path,
			"status", rec.status, "duration_ms", time.Since(start).Milliseconds())
	})
}

// writeOpError writes a lifecycle error; anything that is not an *opError
// is a 500.
func writeOpError(w http.ResponseWriter, err error) {
	var oe *opError
	if errors.As(err, &oe) {
		wire.WriteError(w, oe.Status, oe.Message)
		return
	}
	wire.WriteError(w, http.StatusInternalServerError, err.Error())
}

// sandboxIDParam validates the {sandboxID} path value, answering 400 itself.
func sandboxIDParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id, ok := parseSandboxID(r.PathValue("sandboxID"))
	if !ok {
		wire.WriteError(w, http.StatusBadRequest, "Invalid sandbox ID")
	}
	return id, ok
}

// unserved answers a feature of the provider sandboxd does not have with 501, naming it.
func unserved(feature string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, http.StatusNotImplemented, "sandboxd does not serve "+feature+": use E2B for it.")
	}
}
