package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/accounts"
	"sandman/apperr"
)

// hasBearer reports whether the request carries an Authorization header of the Bearer scheme:
// it is an API client's request, by its token, however well formed. Another scheme (a proxy's
// Basic authentication in front of Sandman, say) is not Sandman's, and is left alone.
func hasBearer(c echo.Context) bool {
	for _, v := range c.Request().Header.Values("Authorization") {
		if scheme, _, _ := strings.Cut(v, " "); strings.EqualFold(scheme, "Bearer") {
			return true
		}
	}
	return false
}

// sessionOrToken authenticates a request of the JSON API: with a Bearer Authorization header by
// its API token, which loads no session, reads and sets no cookie and needs no CSRF token (a
// browser never sends the header on another site's behalf); otherwise by the browser's session
// and its CSRF token.
func (h *Handlers) sessionOrToken(next echo.HandlerFunc) echo.HandlerFunc {
	withToken, withSession := h.bearer(next), h.session(h.csrf(next))
	return func(c echo.Context) error {
		if hasBearer(c) {
			return withToken(c)
		}
		return withSession(c)
	}
}

// errSessionOnly refuses an API token on the routes a browser session alone may call.
var errSessionOnly = apperr.New(apperr.KindForbidden, codeSessionOnly,
	"API tokens cannot be used here: tokens are made and revoked, and sessions opened and closed, by a founder logged in with a browser.")

// sessionOnly refuses a request with a Bearer Authorization header (an API token) before its
// session is loaded: the routes that make and revoke tokens, so a leaked token cannot mint more, and
// those that open and close sessions.
func sessionOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if hasBearer(c) {
			return errSessionOnly
		}
		return next(c)
	}
}

// errMalformedAuthorization is a 400: a Bearer header that is not one header with one token.
var errMalformedAuthorization = echo.NewHTTPError(http.StatusBadRequest,
	`Send the API token as one header, "Authorization: Bearer sm_…", and nothing else in it.`)

// bearerToken is the token of an "Authorization: Bearer <token>" header (RFC 6750: the scheme
// in any case, one space, a token68).
func bearerToken(r *http.Request) (string, bool) {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || !isToken68(token) {
		return "", false
	}
	return token, true
}

// isToken68 reports whether s is RFC 7235's token68: what a bearer token may be on the wire.
func isToken68(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		switch b := body[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9', strings.IndexByte("-._~+/", b) >= 0:
		default:
			return false
		}
	}
	return true
}

// bearer authenticates a request by its API token and puts its founder, and the token, in the
// context as its principal. A header that is not a bearer token is a 400; a token that is
// wrong, revoked or expired a 401 with the same body whatever the reason (RFC 6750's
// WWW-Authenticate on both); an address or a token over its limit a 429. The token itself is
// never logged nor counted: only why it was refused.
func (h *Handlers) bearer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		secret, ok := bearerToken(c.Request())
		if !ok {
			h.tokenFailures.WithLabelValues("malformed_header").Inc()
			c.Response().Header().Set("WWW-Authenticate", `Bearer error="invalid_request"`)
			return errMalformedAuthorization
		}
		p, err := h.Accounts.Authenticate(c.Request().Context(), secret, c.RealIP())
		var refusal *accounts.TokenRefusal
		if errors.As(err, &refusal) {
			h.tokenFailures.WithLabelValues(refusal.Reason).Inc()
			stateOf(c).refusedToken = refusal.TokenID
			if errors.Is(err, accounts.ErrInvalidToken) {
				c.Response().Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			}
		}
		if err != nil {
			return err
		}
		stateOf(c).principal = &p
		return next(c)
	}
}

// loggedToken is the id of the API token the request came with, for the request log: its
// principal's, or the one refused when it was found (revoked, expired, over its limit); "" for
// none. The token itself is a secret.
func loggedToken(c echo.Context) string {
	if p := principal(c); p != nil && p.ViaToken() {
		return p.TokenID.String()
	}
	if id := stateOf(c).refusedToken; id != uuid.Nil {
		return id.String()
	}
	return ""
}

// authKind is how a request was authenticated, for the metrics: "token", "session" or "none".
func authKind(c echo.Context) string {
	switch p := principal(c); {
	case p == nil:
		return "none"
	case p.ViaToken():
		return "token"
	}
	return "session"
}

// newAuthMetrics are the requests by how they were authenticated, and the API tokens refused,
// by why (never by which).
func newAuthMetrics(reg prometheus.Registerer) (requests, failures *prometheus.CounterVec) {
	requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandman_requests_by_auth_total",
		Help: "Requests by how they were authenticated: token (an API token), session (a browser's) or none."}, []string{"auth"})
	failures = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandman_api_token_failures_total",
		Help: "Bearer requests refused, by reason: malformed_header, malformed (not a token, or its checksum fails), unknown, revoked, expired, address_limited, token_limited."},
		[]string{"reason"})
	if reg != nil {
		reg.MustRegister(requests, failures)
	}
	return requests, failures
}
