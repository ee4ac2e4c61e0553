package handlers

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/accounts"
	"sandman/apperr"
	"sandman/db"
	"sandman/lifecycle"
	"sandman/views"
)

const (
	sessionUserKey = "user_id"
	sessionCSRFKey = "csrf"
)

// csrfToken returns the token the request's forms carry. A founder's session holds its own,
// made on first use. An anonymous visitor (the log-in and sign-up pages) gets one from a
// cookie instead (preLoginToken), so that reading those pages writes no session row: every
// crawler's visit would otherwise add one to the database.
func (h *Handlers) csrfToken(c echo.Context) string {
	ctx := c.Request().Context()
	tok := h.Sessions.GetString(ctx, sessionCSRFKey)
	if tok != "" {
		return tok
	}
	if h.Sessions.GetString(ctx, sessionUserKey) == "" {
		return h.preLoginToken(c)
	}
	tok = newCSRFToken()
	h.Sessions.Put(ctx, sessionCSRFKey, tok)
	return tok
}

func newCSRFToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// wantCSRF is the token a state-changing request must carry: its session's, or for a visitor
// with none the pre-login cookie's ("" when there is neither: every request is refused).
func (h *Handlers) wantCSRF(c echo.Context) string {
	ctx := c.Request().Context()
	if tok := h.Sessions.GetString(ctx, sessionCSRFKey); tok != "" {
		return tok
	}
	if h.Sessions.GetString(ctx, sessionUserKey) != "" {
		return "" // a founder's session without its token: reload the page
	}
	return h.preLoginCookieValue(c)
}

// preLoginCookieValue is the request's pre-login token, "" when it has none of the right length.
func (h *Handlers) preLoginCookieValue(c echo.Context) string {
	if ck, err := c.Cookie(h.preLoginCookie()); err == nil && len(ck.Value) >= 32 && len(ck.Value) <= 64 {
		return ck.Value
	}
	return ""
}

// preLoginToken is an anonymous visitor's CSRF token: a random value in a cookie of its own,
// which the form repeats (a double-submit token). A cross-site page can make the browser send
// the cookie but cannot read it to put it in the form; the __Host- prefix (with Secure
// cookies) keeps a sibling subdomain from setting it; and the browsers' cross-origin check in
// front of every route (routes.go) refuses such posts first. It guards only the log-in and
// sign-up forms: logging in replaces it with the session's own token (logIn).
func (h *Handlers) preLoginToken(c echo.Context) string {
	st := stateOf(c)
	if st.preLogin != "" {
		return st.preLogin
	}
	tok := h.preLoginCookieValue(c)
	if tok == "" {
		tok = newCSRFToken()
		c.SetCookie(&http.Cookie{Name: h.preLoginCookie(), Value: tok, Path: "/", HttpOnly: true,
			Secure: h.Sessions.Cookie.Secure, SameSite: http.SameSiteLaxMode})
	}
	st.preLogin = tok
	return tok
}

// preLoginCookie names the pre-login token's cookie: __Host- when cookies are Secure (a
// browser accepts that prefix only then).
func (h *Handlers) preLoginCookie() string {
	if h.Sessions.Cookie.Secure {
		return "__Host-sandman_csrf"
	}
	return "sandman_csrf"
}

// csrfUnlessJSON is the CSRF check of the routes that come before a session, and so cannot carry
// its token: the JSON API's sign-up and log-in. A JSON body passes, which a cross-site form cannot
// send without a CORS preflight that we never grant; any other body needs the token.
func (h *Handlers) csrfUnlessJSON(next echo.HandlerFunc) echo.HandlerFunc {
	checked := h.csrf(next)
	return func(c echo.Context) error {
		if mt, _, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type")); mt == "application/json" {
			return next(c)
		}
		return checked(c)
	}
}

// csrf refuses state-changing requests whose X-CSRF-Token header or _csrf form field does not
// match the session's token. A streamed form (an upload) carries the token as its first field,
// which is read here, before anything else of the body; the handler goes on from the next part
// (streamedForm).
func (h *Handlers) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		want := h.wantCSRF(c)
		got := c.Request().Header.Get("X-CSRF-Token")
		if got == "" {
			if stateOf(c).streamed {
				got = firstFormField(c, "_csrf")
			} else {
				got = c.FormValue("_csrf")
			}
		}
		if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
			return &apperr.Error{Kind: apperr.KindForbidden, Code: codeCSRF,
				Message: "This form has expired or did not come from Sandman. Reload the page and try again."}
		}
		return next(c)
	}
}

// firstFormField reads a streamed multipart form's first part and returns its value if it is the
// field name (else ""). The rest of the form is left to the handler (streamedForm).
func firstFormField(c echo.Context, name string) string {
	mr, err := c.Request().MultipartReader()
	if err != nil {
		return ""
	}
	stateOf(c).form = mr
	part, err := mr.NextPart()
	if err != nil || part.FormName() != name {
		return ""
	}
	v, _ := io.ReadAll(io.LimitReader(part, 256))
	return string(v)
}

// streamedForm is the multipart reader of a streamed form, after the parts the middleware read.
func streamedForm(c echo.Context) (*multipart.Reader, error) {
	if mr := stateOf(c).form; mr != nil {
		return mr, nil
	}
	return c.Request().MultipartReader()
}

// session loads the browser's session and, in the context, its logged-in founder if any.
func (h *Handlers) session(next echo.HandlerFunc) echo.HandlerFunc {
	return echo.WrapMiddleware(h.Sessions.LoadAndSave)(h.loadUser(next))
}

// loadUser puts the logged-in founder, if any, in the context as the request's principal. It
// runs right after the session is loaded, and marks that it was (hasSession). The founder comes
// from memory in the common case (accounts.Service.Founder), as the session does (its store): a
// JSON request costs no round trip for either. A page shows the founder's credits, which change
// with every build, so a page's request reads them fresh (pageCredits), here or, for a page that
// reads them with its own read (ownBalance: the dashboard), there.
func (h *Handlers) loadUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		st := stateOf(c)
		st.session = true
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
		f, err := h.Accounts.Founder(ctx, id)
		if err == nil && st.answers == answerPage && !st.ownBalance {
			var credits int32
			if credits, err = h.Credits.Balance(ctx, id); err == nil {
				setPageCredits(c, credits)
			}
		}
		if err != nil {
			if apperrIsNotFound(err) {
				// The account is gone: treat the session as logged out.
				h.Sessions.Remove(ctx, sessionUserKey)
				return next(c)
			}
			return err
		}
		st.principal = &accounts.Principal{Founder: f}
		return next(c)
	}
}

// ownBalance marks a page that reads the founder's credits with its own read (the dashboard,
// routes.go), which the session then does not read first.
func ownBalance(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		stateOf(c).ownBalance = true
		return next(c)
	}
}

// pageCredits are the logged-in founder's credits, read for this page's request (loadUser, or
// the page itself: ownBalance).
func pageCredits(c echo.Context) int32 { return stateOf(c).credits }

// setPageCredits keeps the founder's credits read for this page's request.
func setPageCredits(c echo.Context, credits int32) {
	st := stateOf(c)
	st.credits, st.creditsRead = credits, true
}

// requireUser sends anonymous visitors of pages to the log-in page.
func requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if principal(c) == nil {
			return redirect(c, "/login")
		}
		return next(c)
	}
}

// requirePrincipal refuses an anonymous request with a 401: the JSON API's, the event stream's.
func requirePrincipal(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if principal(c) == nil {
			return &apperr.Error{Kind: apperr.KindUnauthorized, Code: codeUnauthorized, Message: "Log in first, or send an API token."}
		}
		return next(c)
	}
}

// principal is who the request acts for (its founder, and whether they came with their session
// or an API token), or nil for an anonymous request. Handlers read the founder only here.
func principal(c echo.Context) *accounts.Principal {
	return stateOf(c).principal
}

// actor is the request's principal as the lifecycle records it.
func actor(c echo.Context) lifecycle.Actor {
	p := principal(c)
	return lifecycle.Actor{Founder: p.Founder.ID, Token: p.TokenName}
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
	if _, err := c.Cookie(h.preLoginCookie()); err == nil {
		// Spent: from now on the session's own token guards the founder's forms.
		c.SetCookie(&http.Cookie{Name: h.preLoginCookie(), Path: "/", MaxAge: -1, HttpOnly: true,
			Secure: h.Sessions.Cookie.Secure, SameSite: http.SameSiteLaxMode})
	}
	return h.csrfToken(c), nil
}

// logOut ends the session and, on every instance, its copy in memory and the event streams it
// opened (the store announces it: accounts.SessionStore).
func (h *Handlers) logOut(c echo.Context) error {
	return h.Sessions.Destroy(c.Request().Context())
}

// sessionKey names the request's session for its streams without revealing its token.
func (h *Handlers) sessionKey(ctx context.Context) string {
	return accounts.SessionKey(h.Sessions.Token(ctx))
}

// hasSession reports whether the request's session was loaded: not for a request refused
// before its route's session middleware ran (an unknown route, a body over its limit).
func hasSession(c echo.Context) bool { return stateOf(c).session }

// layout is the view model every full page starts from. An error page for a request that has no
// session shows no founder and no forms.
func (h *Handlers) layout(c echo.Context, title string) views.Layout {
	if !hasSession(c) {
		return views.Layout{Title: title, Now: time.Now()}
	}
	l := views.Layout{Title: title, CSRF: h.csrfToken(c), Now: time.Now()}
	if p := principal(c); p != nil {
		st := stateOf(c)
		credits := st.credits
		if !st.creditsRead && st.ownBalance {
			// A page that reads its own balance failed before it did (this is its error page):
			// read it now, and if that fails too show no founder, as when the session's read
			// fails (loadUser).
			var err error
			if credits, err = h.Credits.Balance(c.Request().Context(), p.Founder.ID); err != nil {
				return l
			}
		}
		l.User = &views.User{ID: p.Founder.ID.String(), Email: p.Founder.Email, Credits: credits}
	}
	return l
}
