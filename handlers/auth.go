package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"sandman/accounts"
	"sandman/apperr"
	"sandman/views"
)

func (h *Handlers) loginPage(c echo.Context) error {
	if principal(c) != nil {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return render(c, http.StatusOK, views.Auth(views.AuthPage{Layout: h.layout(c, "Log in")}))
}

func (h *Handlers) signupPage(c echo.Context) error {
	if principal(c) != nil {
		return c.Redirect(http.StatusSeeOther, "/")
	}
	return render(c, http.StatusOK, views.Auth(views.AuthPage{Layout: h.layout(c, "Sign up"), SignUp: true}))
}

// authFormError re-renders the form with the error next to its field (or above the form).
func (h *Handlers) authFormError(c echo.Context, signUp bool, email string, err error) error {
	ae, ok := apperr.As(err)
	if !ok || ae.Kind == apperr.KindNotFound {
		return err
	}
	title := "Log in"
	if signUp {
		title = "Sign up"
	}
	p := views.AuthPage{Layout: h.layout(c, title), SignUp: signUp, Email: email, Errors: ae.Fields}
	if len(ae.Fields) == 0 {
		p.Message = ae.Message
	}
	if ae.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", itoa(int(ae.RetryAfter.Seconds())))
	}
	return render(c, httpStatus(ae.Kind), views.Auth(p))
}

func (h *Handlers) signupSubmit(c echo.Context) error {
	cred := accounts.Credentials{Email: c.FormValue("email"), Password: c.FormValue("password")}
	u, err := h.Accounts.SignUp(c.Request().Context(), cred, c.RealIP())
	if err != nil {
		return h.authFormError(c, true, cred.Email, err)
	}
	if _, err := h.logIn(c, u); err != nil {
		return err
	}
	return redirect(c, "/")
}

func (h *Handlers) loginSubmit(c echo.Context) error {
	cred := accounts.Credentials{Email: c.FormValue("email"), Password: c.FormValue("password")}
	u, err := h.Accounts.LogIn(c.Request().Context(), cred, c.RealIP())
	if err != nil {
		return h.authFormError(c, false, cred.Email, err)
	}
	if _, err := h.logIn(c, u); err != nil {
		return err
	}
	return redirect(c, "/")
}

func (h *Handlers) logoutSubmit(c echo.Context) error {
	if err := h.logOut(c); err != nil {
		return err
	}
	return redirect(c, "/login")
}

type credentialsJSON struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

type storageJSON struct {
	UsedBytes  int64 `json:"usedBytes"`
	QuotaBytes int64 `json:"quotaBytes"`
}

type sessionJSON struct {
	Email   string `json:"email"`
	Credits int32  `json:"credits"`
	// Storage is the founder's stored files against their quota, in bytes of unique content:
	// /api/me's (the sign-up and log-in answers leave it out).
	Storage *storageJSON `json:"storage,omitempty"`
	// CSRFToken is the session's; a request with an API token has no session, nor needs one.
	CSRFToken string `json:"csrfToken,omitempty"`
}

func (h *Handlers) apiSignUp(c echo.Context) error {
	var in credentialsJSON
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	u, err := h.Accounts.SignUp(c.Request().Context(), accounts.Credentials(in), c.RealIP())
	if err != nil {
		return err
	}
	tok, err := h.logIn(c, u)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, sessionJSON{Email: u.Email, Credits: u.Credits, CSRFToken: tok})
}

func (h *Handlers) apiLogIn(c echo.Context) error {
	var in credentialsJSON
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	u, err := h.Accounts.LogIn(c.Request().Context(), accounts.Credentials(in), c.RealIP())
	if err != nil {
		return err
	}
	tok, err := h.logIn(c, u)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sessionJSON{Email: u.Email, Credits: u.Credits, CSRFToken: tok})
}

func (h *Handlers) apiLogOut(c echo.Context) error {
	if err := h.logOut(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *Handlers) apiMe(c echo.Context) error {
	p := principal(c)
	credits, err := h.Credits.Balance(c.Request().Context(), p.Founder.ID)
	if err != nil {
		return err
	}
	usage, err := h.Versions.Usage(c.Request().Context(), p.Founder.ID)
	if err != nil {
		return err
	}
	out := sessionJSON{Email: p.Founder.Email, Credits: credits, Storage: &storageJSON{UsedBytes: usage.Stored, QuotaBytes: usage.Quota}}
	if !p.ViaToken() {
		// The token lets a client that logged in through the form call the JSON API too.
		out.CSRFToken = h.csrfToken(c)
	}
	return c.JSON(http.StatusOK, out)
}
