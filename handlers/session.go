package handlers

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"mime"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/db"
	"sandman/views"
)

const (
	sessionUserKey = "user_id"
	sessionCSRFKey = "csrf"
	ctxUserKey     = "sandman.user"
)

// csrfToken returns the session's CSRF token, creating it on first use.
func (h *Handlers) csrfToken(c echo.Context) string {
	ctx := c.Request().Context()
	tok := h.Sessions.GetString(ctx, sessionCSRFKey)
	if tok == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		tok = base64.RawURLEncoding.EncodeToString(b)
		h.Sessions.Put(ctx, sessionCSRFKey, tok)
	}
	return tok
}

// csrfExempt are the state-changing routes that cannot carry a session token: the JSON API's
// sign-up and log-in, which happen before a session exists. They accept only application/json,
// which a cross-site form cannot send without a CORS preflight that we never grant. (The
// provider's webhooks are signed and live outside the session routes.)
func csrfExempt(c echo.Context) bool {
	r := c.Request()
	if r.Method == http.MethodPost && (r.URL.Path == "/api/users" || r.URL.Path == "/api/session") {
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		return mt == "application/json"
	}
	return false
}

// csrf refuses state-changing requests whose X-CSRF-Token header or _csrf form field does not
// match the session's token.
func (h *Handlers) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		if csrfExempt(c) {
			return next(c)
		}
		want := h.Sessions.GetString(c.Request().Context(), sessionCSRFKey)
		got := c.Request().Header.Get("X-CSRF-Token")
		if got == "" {
			mt, _, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
			if mt == "multipart/form-data" {
				// Reading a form field would buffer the whole upload before the handler streams
				// it, so uploads carry the token in the query string.
				got = c.QueryParam("_csrf")
			} else {
				got = c.FormValue("_csrf")
			}
		}
		if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
			return &apperr.Error{Kind: apperr.KindInvalid, Code: "csrf",
				Message: "This form has expired or did not come from Sandman. Reload the page and try again."}
		}
		return next(c)
	}
}

// loadUser puts the logged-in founder, if any, in the context.
func (h *Handlers) loadUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		ctx := c.Request().Context()
		raw := h.Sessions.GetString(ctx, sessionUserKey)
		if raw == "" {
			return next(c)
		}
		id, err := uuid.Parse(raw)
		if err != nil {
			h.Sessions.Remove(ctx, sessionUserKey)
			return next(c)
		}
		u, err := h.Accounts.Get(ctx, id)
		if err != nil {
			if apperrIsNotFound(err) {
				// The account is gone: treat the session as logged out.
				h.Sessions.Remove(ctx, sessionUserKey)
				return next(c)
			}
			return err
		}
		c.Set(ctxUserKey, &u)
		return next(c)
	}
}

// requireUser sends anonymous visitors to the login page (or answers 401 to the API).
func (h *Handlers) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if currentUser(c) == nil {
			if isAPI(c) || c.Request().URL.Path == "/events" {
				return &apperr.Error{Kind: apperr.KindUnauthorized, Code: "unauthorized", Message: "Log in first."}
			}
			return redirect(c, "/login")
		}
		return next(c)
	}
}

func currentUser(c echo.Context) *db.User {
	u, _ := c.Get(ctxUserKey).(*db.User)
	return u
}

// logIn starts an authenticated session with a fresh token (no session fixation) and a fresh
// CSRF token, and returns the latter.
func (h *Handlers) logIn(c echo.Context, u db.User) (string, error) {
	ctx := c.Request().Context()
	if err := h.Sessions.RenewToken(ctx); err != nil {
		return "", err
	}
	h.Sessions.Put(ctx, sessionUserKey, u.ID.String())
	h.Sessions.Remove(ctx, sessionCSRFKey)
	return h.csrfToken(c), nil
}

func (h *Handlers) logOut(c echo.Context) error {
	ctx := c.Request().Context()
	if err := h.Sessions.RenewToken(ctx); err != nil {
		return err
	}
	return h.Sessions.Destroy(ctx)
}

// layout is the view model every full page starts from.
func (h *Handlers) layout(c echo.Context, title string) views.Layout {
	l := views.Layout{Title: title, CSRF: h.csrfToken(c), Now: time.Now()}
	if u := currentUser(c); u != nil {
		l.User = &views.User{ID: u.ID.String(), Email: u.Email, Credits: u.Credits}
	}
	return l
}
