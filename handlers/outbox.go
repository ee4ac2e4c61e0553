package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/outbox"
	"sandman/views"
)

// The founder's outgoing webhooks and event feed (docs/api.md, "Webhooks"): endpoints made,
// changed, tested, rotated and deleted, their deliveries seen and retried, with the JSON API or
// the settings page. (webhooks.go is the provider's incoming webhooks.)

// endpointJSON is an endpoint as the API answers it; secret only in the answer that made it.
type endpointJSON struct {
	ID             string        `json:"id"`
	URL            string        `json:"url"`
	Events         []outbox.Type `json:"events"`
	Description    string        `json:"description"`
	Secret         string        `json:"secret,omitempty"`
	CreatedAt      time.Time     `json:"createdAt"`
	Enabled        bool          `json:"enabled"`
	DisabledReason string        `json:"disabledReason,omitempty"`
}

func toEndpointJSON(e outbox.Endpoint) endpointJSON {
	return endpointJSON{ID: e.ID.String(), URL: e.URL, Events: e.Events, Description: e.Description, Secret: e.Secret,
		CreatedAt: e.CreatedAt, Enabled: e.Enabled, DisabledReason: e.DisabledReason}
}

// withSecret answers an endpoint whose secret is in the answer: never stored by a cache.
func withSecret(c echo.Context, status int, e outbox.Endpoint) error {
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(status, toEndpointJSON(e))
}

func (h *Handlers) endpointID(c echo.Context) (uuid.UUID, error) {
	return parseID(c.Param("id"), "Webhook endpoint")
}

func (h *Handlers) apiCreateEndpoint(c echo.Context) error {
	var in struct {
		URL         string   `json:"url"`
		Events      []string `json:"events"`
		Description string   `json:"description"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	e, err := h.Outbox.Create(c.Request().Context(), principal(c).Founder.ID,
		outbox.EndpointInput{URL: in.URL, Events: in.Events, Description: in.Description, Enabled: true})
	if err != nil {
		return err
	}
	return withSecret(c, http.StatusCreated, e)
}

func (h *Handlers) apiListEndpoints(c echo.Context) error {
	es, err := h.Outbox.List(c.Request().Context(), principal(c).Founder.ID)
	if err != nil {
		return err
	}
	out := make([]endpointJSON, len(es))
	for i, e := range es {
		out[i] = toEndpointJSON(e)
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handlers) apiGetEndpoint(c echo.Context) error {
	id, err := h.endpointID(c)
	if err != nil {
		return err
	}
	e, err := h.Outbox.Get(c.Request().Context(), principal(c).Founder.ID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toEndpointJSON(e))
}

func (h *Handlers) apiPatchEndpoint(c echo.Context) error {
	id, err := h.endpointID(c)
	if err != nil {
		return err
	}
	owner := principal(c).Founder.ID
	if _, err := h.Outbox.Get(c.Request().Context(), owner, id); err != nil {
		return err // another founder's endpoint is not found, whatever the body says
	}
	var in struct {
		URL         *string   `json:"url"`
		Events      *[]string `json:"events"`
		Description *string   `json:"description"`
		Enabled     *bool     `json:"enabled"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	e, err := h.Outbox.Update(c.Request().Context(), owner, id, outbox.Patch(in))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toEndpointJSON(e))
}

func (h *Handlers) apiDeleteEndpoint(c echo.Context) error {
	id, err := h.endpointID(c)
	if err != nil {
		return err
	}
	if err := h.Outbox.Delete(c.Request().Context(), principal(c).Founder.ID, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (h *Handlers) apiRotateSecret(c echo.Context) error {
	id, err := h.endpointID(c)
	if err != nil {
		return err
	}
	e, err := h.Outbox.Rotate(c.Request().Context(), principal(c).Founder.ID, id)
	if err != nil {
		return err
	}
	return withSecret(c, http.StatusOK, e)
}

func (h *Handlers) apiTestEndpoint(c echo.Context) error {
	id, err := h.endpointID(c)
	if err != nil {
		return err
	}
	if err := h.Outbox.Test(c.Request().Context(), principal(c).Founder.ID, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusAccepted)
}

// deliveryJSON is a delivery with its last attempt. The secret is never in it.
type deliveryJSON struct {
	ID            string     `json:"id"`
	WebhookID     string     `json:"webhookId"`
	EventType     string     `json:"eventType"`
	State         string     `json:"state"`
	Attempts      int32      `json:"attempts"`
	StatusCode    *int32     `json:"statusCode"`
	DurationMs    *int32     `json:"durationMs"`
	Error         string     `json:"error,omitempty"`
	Response      string     `json:"response,omitempty"`
	AttemptedAt   *time.Time `json:"attemptedAt"`
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	CreatedAt     time.Time  `json:"createdAt"`
}

// pageQuery reads ?after= and ?limit=: a malformed one is a 400.
func pageQuery(c echo.Context) (int64, int32, error) {
	after, err := outbox.Cursor(c.QueryParam("after"))
	if err != nil {
		return 0, 0, echo.NewHTTPError(http.StatusBadRequest, `"after" is the "next" of a previous answer: a whole number.`)
	}
	limit, err := limitQuery(c)
	return after, limit, err
}

// limitQuery reads ?limit=: a malformed one is a 400.
func limitQuery(c echo.Context) (int32, error) {
	limit := 0
	if v := c.QueryParam("limit"); v != "" {
		var err error
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			return 0, echo.NewHTTPError(http.StatusBadRequest, `"limit" is a whole number from 1 to 100.`)
		}
	}
	return outbox.Page(limit), nil
}

func (h *Handlers) apiDeliveries(c echo.Context) error {
	id, err := h.endpointID(c)
	if err != nil {
		return err
	}
	after, limit, err := pageQuery(c)
	if err != nil {
		return err
	}
	ds, err := h.Outbox.Deliveries(c.Request().Context(), principal(c).Founder.ID, id, after, limit)
	if err != nil {
		return err
	}
	out := struct {
		Deliveries []deliveryJSON `json:"deliveries"`
		Next       *string        `json:"next"`
	}{Deliveries: make([]deliveryJSON, len(ds))}
	for i, d := range ds {
		j := deliveryJSON{ID: strconv.FormatInt(d.ID, 10), WebhookID: d.MessageID, EventType: string(d.EventType), State: d.State,
			Attempts: d.Attempts, Error: d.Error, Response: d.Response, AttemptedAt: d.AttemptedAt, NextAttemptAt: d.NextAt, CreatedAt: d.CreatedAt}
		if d.AttemptedAt != nil {
			j.StatusCode, j.DurationMs = &d.StatusCode, &d.DurationMs
		}
		out.Deliveries[i] = j
	}
	if len(ds) == int(limit) {
		next := strconv.FormatInt(ds[len(ds)-1].ID, 10)
		out.Next = &next
	}
	return c.JSON(http.StatusOK, out)
}

func (h *Handlers) retryDelivery(c echo.Context) error {
	id, err := h.endpointID(c)
	if err != nil {
		return err
	}
	d, err := strconv.ParseInt(c.Param("delivery"), 10, 64)
	if err != nil {
		return apperr.NotFound("Delivery")
	}
	return h.Outbox.Retry(c.Request().Context(), principal(c).Founder.ID, id, d)
}

func (h *Handlers) apiRetryDelivery(c echo.Context) error {
	if err := h.retryDelivery(c); err != nil {
		return err
	}
	return c.NoContent(http.StatusAccepted)
}

// apiEvents is the feed: the founder's events after the cursor, oldest first.
func (h *Handlers) apiEvents(c echo.Context) error {
	after, err := outbox.ParseFeedCursor(c.QueryParam("after"))
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, `"after" is the "next" of a previous answer, as it was given.`)
	}
	limit, err := limitQuery(c)
	if err != nil {
		return err
	}
	items, next, err := h.Outbox.Events(c.Request().Context(), principal(c).Founder.ID, after, limit)
	if err != nil {
		return err
	}
	type item struct {
		ID string `json:"id"`
		outbox.Payload
	}
	out := struct {
		Events []item `json:"events"`
		Next   string `json:"next"`
	}{Events: make([]item, len(items)), Next: next.String()}
	for i, it := range items {
		out.Events[i].ID = it.ID
		if err := json.Unmarshal(it.Payload, &out.Events[i].Payload); err != nil {
			return err
		}
	}
	return c.JSON(http.StatusOK, out)
}

// The settings page.

func (h *Handlers) webhooksPage(c echo.Context) error {
	return h.renderWebhooks(c, http.StatusOK, views.WebhooksPage{Done: c.QueryParam("done")})
}

// renderWebhooks draws the page over p: the endpoints, each with its recent deliveries.
func (h *Handlers) renderWebhooks(c echo.Context, status int, p views.WebhooksPage) error {
	ctx := c.Request().Context()
	owner := principal(c).Founder.ID
	es, err := h.Outbox.List(ctx, owner)
	if err != nil {
		return err
	}
	p.Layout = h.layout(c, "Webhooks")
	p.Types = make([]string, 0, len(outbox.Types))
	for _, t := range outbox.Types {
		if t != outbox.WebhookTest {
			p.Types = append(p.Types, string(t))
		}
	}
	p.Max = outbox.MaxEndpoints
	for _, e := range es {
		ds, err := h.Outbox.Deliveries(ctx, owner, e.ID, 0, 10)
		if err != nil {
			return err
		}
		v := views.WebhookEndpoint{ID: e.ID.String(), URL: e.URL, Description: e.Description, Enabled: e.Enabled,
			Failing: e.DisabledReason == "failing", CreatedAt: e.CreatedAt}
		for _, t := range e.Events {
			v.Events = append(v.Events, string(t))
		}
		for _, d := range ds {
			v.Deliveries = append(v.Deliveries, views.WebhookDelivery{ID: strconv.FormatInt(d.ID, 10), EventType: string(d.EventType),
				State: d.State, Attempts: d.Attempts, StatusCode: d.StatusCode, Error: d.Error, AttemptedAt: d.AttemptedAt, CreatedAt: d.CreatedAt})
		}
		p.Endpoints = append(p.Endpoints, v)
	}
	return render(c, status, views.Webhooks(p))
}

// formError shows the page again with an error of the domain on the form, or returns it.
func (h *Handlers) webhooksFormError(c echo.Context, form views.WebhookForm, err error) error {
	ae, ok := apperr.As(err)
	if !ok {
		return err
	}
	errs := ae.Fields
	if len(errs) == 0 {
		errs = map[string]string{"form": ae.Message}
	}
	return h.renderWebhooks(c, httpStatus(ae.Kind), views.WebhooksPage{Form: form, Errors: errs})
}

// createEndpointSubmit makes an endpoint from the page's form and shows its secret, this once.
func (h *Handlers) createEndpointSubmit(c echo.Context) error {
	if err := c.Request().ParseForm(); err != nil {
		return err
	}
	form := views.WebhookForm{URL: c.FormValue("url"), Description: c.FormValue("description"), Events: c.Request().PostForm["events"]}
	e, err := h.Outbox.Create(c.Request().Context(), principal(c).Founder.ID,
		outbox.EndpointInput{URL: form.URL, Events: form.Events, Description: form.Description, Enabled: true})
	if err != nil {
		return h.webhooksFormError(c, form, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.renderWebhooks(c, http.StatusCreated, views.WebhooksPage{Secret: &views.WebhookSecret{URL: e.URL, Secret: e.Secret}})
}

// endpointAction runs an action of an endpoint's row and goes back to the page.
func (h *Handlers) endpointAction(done string, act func(c echo.Context, owner, id uuid.UUID) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := h.endpointID(c)
		if err != nil {
			return err
		}
		if err := act(c, principal(c).Founder.ID, id); err != nil {
			return h.webhooksFormError(c, views.WebhookForm{}, err)
		}
		return c.Redirect(http.StatusSeeOther, "/settings/webhooks?done="+done)
	}
}

func (h *Handlers) rotateEndpointSubmit(c echo.Context) error {
	id, err := h.endpointID(c)
	if err != nil {
		return err
	}
	e, err := h.Outbox.Rotate(c.Request().Context(), principal(c).Founder.ID, id)
	if err != nil {
		return h.webhooksFormError(c, views.WebhookForm{}, err)
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return h.renderWebhooks(c, http.StatusOK, views.WebhooksPage{Secret: &views.WebhookSecret{URL: e.URL, Secret: e.Secret, Rotated: true}})
}

func (h *Handlers) testEndpoint(c echo.Context, owner, id uuid.UUID) error {
	return h.Outbox.Test(c.Request().Context(), owner, id)
}

func (h *Handlers) enableEndpoint(c echo.Context, owner, id uuid.UUID) error {
	on := c.FormValue("enabled") == "true"
	_, err := h.Outbox.Update(c.Request().Context(), owner, id, outbox.Patch{Enabled: &on})
	return err
}

func (h *Handlers) deleteEndpoint(c echo.Context, owner, id uuid.UUID) error {
	return h.Outbox.Delete(c.Request().Context(), owner, id)
}

func (h *Handlers) retryDeliveryOf(c echo.Context, _, _ uuid.UUID) error { return h.retryDelivery(c) }
