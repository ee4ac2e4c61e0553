package handlers

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/envvars"
)

// A project's environment variables (docs/api.md, "Environment variables"): the JSON API's
// routes. A secret's value is never in an answer.

// envVarJSON is a variable as GET lists it: value for plain ones only.
type envVarJSON struct {
	Name      string    `json:"name"`
	Secret    bool      `json:"secret"`
	Value     *string   `json:"value,omitempty"`
	UpdatedAt time.Time `json:"updatedAt"`
	Used      bool      `json:"used"`
}

// envInJSON is one variable to set.
type envInJSON struct {
	Name   string  `json:"name"`
	Value  *string `json:"value"`
	Secret *bool   `json:"secret"`
}

func (h *Handlers) apiListEnv(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	vars, err := h.Env.List(c.Request().Context(), principal(c).Founder.ID, id)
	if err != nil {
		return err
	}
	out := make([]envVarJSON, len(vars))
	for i, v := range vars {
		out[i] = envVarJSON{Name: v.Name, Secret: v.Secret, UpdatedAt: v.UpdatedAt, Used: v.Used}
		if !v.Secret {
			out[i].Value = &v.Value
		}
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, map[string]any{"vars": out})
}

// inputs turns the request's variables into the store's, each with a value.
func inputs(in []envInJSON) ([]envvars.Input, error) {
	out := make([]envvars.Input, len(in))
	for i, v := range in {
		if v.Value == nil {
			name := v.Name
			if name == "" {
				name = "name"
			}
			return nil, apperr.Invalid(map[string]string{name: "A variable needs a value (it may be empty)."})
		}
		out[i] = envvars.Input{Name: v.Name, Value: *v.Value, Secret: v.Secret}
	}
	return out, nil
}

func (h *Handlers) apiPutEnvVar(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	var in struct {
		Value  *string `json:"value"`
		Secret *bool   `json:"secret"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	vars, err := inputs([]envInJSON{{Name: c.Param("name"), Value: in.Value, Secret: in.Secret}})
	if err != nil {
		return err
	}
	if err := h.Env.Set(c.Request().Context(), principal(c).Founder.ID, id, vars, nil); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *Handlers) apiPutEnv(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	var in struct {
		Vars   []envInJSON `json:"vars"`
		Delete []string    `json:"delete"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	vars, err := inputs(in.Vars)
	if err != nil {
		return err
	}
	if err := h.Env.Set(c.Request().Context(), principal(c).Founder.ID, id, vars, in.Delete); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *Handlers) apiDeleteEnvVar(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	if err := h.Env.Delete(c.Request().Context(), principal(c).Founder.ID, id, c.Param("name")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
