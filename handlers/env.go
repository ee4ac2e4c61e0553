package handlers

import (
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/envvars"
	"sandman/views"
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
	id, err := h.ownedProjectID(c)
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
	id, err := h.ownedProjectID(c)
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

// The build page's section (views.EnvSection) and its forms, which work without JavaScript: a
// change goes back to the page's section, a refusal answers the section alone with its sentence.

// envVM is the project's variables as the section shows them.
func (h *Handlers) envVM(c echo.Context, projectID uuid.UUID, now time.Time) (views.EnvVars, error) {
	vars, err := h.Env.List(c.Request().Context(), principal(c).Founder.ID, projectID)
	if err != nil {
		return views.EnvVars{}, err
	}
	e := views.EnvVars{ProjectID: projectID.String(), CSRF: h.csrfToken(c), SecretsOn: h.Env.SecretsOn()}
	for _, v := range vars {
		e.Vars = append(e.Vars, views.EnvVar{Name: v.Name, Value: v.Value, Secret: v.Secret, Used: v.Used,
			SetAgo: views.EnvSetAgo(v.UpdatedAt, now)})
	}
	return e, nil
}

// envRefused answers a refused form with the section alone, its errors on the add form's
// fields when they are the name's or the value's, else above it.
func (h *Handlers) envRefused(c echo.Context, projectID uuid.UUID, form views.EnvForm, err error) error {
	ae, ok := apperr.As(err)
	if !ok || ae.Kind == apperr.KindNotFound {
		return err
	}
	p, perr := h.Projects.Get(c.Request().Context(), principal(c).Founder.ID, projectID)
	if perr != nil {
		return perr
	}
	l := h.layout(c, p.Name)
	e, lerr := h.envVM(c, projectID, l.Now)
	if lerr != nil {
		return lerr
	}
	e.Form, e.Errors = form, map[string]string{}
	for _, msg := range ae.Fields {
		e.Errors["name"] = msg
	}
	if len(e.Errors) == 0 {
		e.Errors["form"] = ae.Message
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return render(c, httpStatus(ae.Kind), views.EnvPageView(views.EnvPage{Layout: l, ProjectName: p.Name, Env: e}))
}

func (h *Handlers) envAddSubmit(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	secret := c.FormValue("secret") == "true"
	form := views.EnvForm{Name: c.FormValue("name"), Secret: secret}
	in := envvars.Input{Name: form.Name, Value: c.FormValue("value"), Secret: &secret}
	if err := h.Env.Set(c.Request().Context(), principal(c).Founder.ID, id, []envvars.Input{in}, nil); err != nil {
		return h.envRefused(c, id, form, err)
	}
	return redirect(c, "/projects/"+id.String()+"#env")
}

func (h *Handlers) envReplaceSubmit(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	in := envvars.Input{Name: c.Param("name"), Value: c.FormValue("value")}
	if err := h.Env.Set(c.Request().Context(), principal(c).Founder.ID, id, []envvars.Input{in}, nil); err != nil {
		return h.envRefused(c, id, views.EnvForm{}, err)
	}
	return redirect(c, "/projects/"+id.String()+"#env")
}

func (h *Handlers) envDeleteSubmit(c echo.Context) error {
	id, err := h.projectID(c)
	if err != nil {
		return err
	}
	if err := h.Env.Delete(c.Request().Context(), principal(c).Founder.ID, id, c.Param("name")); err != nil {
		return err
	}
	return redirect(c, "/projects/"+id.String()+"#env")
}
