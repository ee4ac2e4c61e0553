package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"sandman/accounts"
	"sandman/apperr"
	"sandman/views"
)

// The founder's API tokens (docs/api.md, "API tokens"): made, listed and revoked by a browser
// session only (routes.go), with the JSON API or the settings page.

// madeTokenJSON is the answer that made a token: the one time its secret is sent.
type madeTokenJSON struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Token     string     `json:"token"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt"`
}

func (h *Handlers) apiCreateToken(c echo.Context) error {
	var in struct {
		Name          string `json:"name"`
		ExpiresInDays *int   `json:"expiresInDays"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	t, err := h.Accounts.CreateToken(c.Request().Context(), principal(c).Founder.ID, accounts.TokenRequest(in))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusCreated, madeTokenJSON{ID: t.ID.String(), Name: t.Name, Token: t.Secret, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt})
}

// listedTokenJSON is a token as GET /api/tokens lists it: every field, null when unset.
type listedTokenJSON struct {
	ID           string     `json:"id"`
	Name         string     `json:"name"`
	Prefix       string     `json:"prefix"`
	CreatedAt    time.Time  `json:"createdAt"`
	ExpiresAt    *time.Time `json:"expiresAt"`
	LastUsedAt   *time.Time `json:"lastUsedAt"`
	LastUsedFrom *string    `json:"lastUsedFrom"`
}

func (h *Handlers) apiListTokens(c echo.Context) error {
	tokens, err := h.Accounts.Tokens(c.Request().Context(), principal(c).Founder.ID)
	if err != nil {
		return err
	}
	out := make([]listedTokenJSON, len(tokens))
	for i, t := range tokens {
		out[i] = listedTokenJSON{ID: t.ID.String(), Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt, ExpiresAt: t.ExpiresAt,
			LastUsedAt: t.LastUsedAt}
		if t.LastUsedAt != nil {
			out[i].LastUsedFrom = &t.LastUsedFrom
		}
	}
	return c.JSON(http.StatusOK, out)
}

// revokeToken revokes the founder's token whose id is in the path.
func (h *Handlers) revokeToken(c echo.Context) error {
	id, err := parseID(c.Param("id"), "API token")
	if err != nil {
		return err
	}
	return h.Accounts.RevokeToken(c.Request().Context(), principal(c).Founder.ID, id)
}

func (h *Handlers) apiRevokeToken(c echo.Context) error {
	if err := h.revokeToken(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// tokensPage is the settings page of API tokens.
func (h *Handlers) tokensPage(c echo.Context) error {
	return h.renderTokens(c, http.StatusOK, views.TokensPage{Revoked: c.QueryParam("revoked") == "1"})
}

// renderTokens draws the tokens page over p (the form sent, its errors, a token just made).
func (h *Handlers) renderTokens(c echo.Context, status int, p views.TokensPage) error {
	tokens, err := h.Accounts.Tokens(c.Request().Context(), principal(c).Founder.ID)
	if err != nil {
		return err
	}
	p.Layout = h.layout(c, "API tokens")
	for _, t := range tokens {
		p.Tokens = append(p.Tokens, views.APIToken{ID: t.ID.String(), Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt,
			ExpiresAt: t.ExpiresAt, Expired: t.Expired, LastUsedAt: t.LastUsedAt, LastUsedFrom: t.LastUsedFrom})
	}
	return render(c, status, views.Tokens(p))
}

// createTokenSubmit makes a token from the page's form and shows the page with it, this once:
// the answer is the page itself (no redirect, which would have to carry the secret), and is
// never stored by the browser.
func (h *Handlers) createTokenSubmit(c echo.Context) error {
	form := views.TokenForm{Name: c.FormValue("name"), Expiry: c.FormValue("expiry")}
	req := accounts.TokenRequest{Name: form.Name}
	if form.Expiry != "never" {
		days, err := strconv.Atoi(form.Expiry)
		if err != nil {
			return h.renderTokens(c, http.StatusUnprocessableEntity, views.TokensPage{Form: form,
				Errors: map[string]string{"expiry": "Choose when the token expires."}})
		}
		req.ExpiresInDays = &days
	}
	made, err := h.Accounts.CreateToken(c.Request().Context(), principal(c).Founder.ID, req)
	if err != nil {
		ae, ok := apperr.As(err)
		if !ok {
			return err
		}
		errs := ae.Fields
		if errs["expiresInDays"] != "" {
			errs["expiry"] = errs["expiresInDays"]
		}
		if len(errs) == 0 {
			errs = map[string]string{"form": ae.Message}
		}
		return h.renderTokens(c, httpStatus(ae.Kind), views.TokensPage{Form: form, Errors: errs})
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.renderTokens(c, http.StatusCreated, views.TokensPage{Made: &views.MadeToken{Name: made.Name, Secret: made.Secret}})
}

// revokeTokenSubmit revokes a token from the page's list and goes back to the page.
func (h *Handlers) revokeTokenSubmit(c echo.Context) error {
	if err := h.revokeToken(c); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/settings/tokens?revoked=1")
}
