package handlers

import (
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

// webhook takes a provider delivery: capped, signature-checked, stored once, applied in a job.
func (h *Handlers) webhook(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body) // limitBody read it already, within its 1 MiB
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The body could not be read.")
	}
	res, err := h.Lifecycle.ReceiveWebhook(c.Request().Context(), c.Request().Header, body)
	if err != nil {
		return err
	}
	status := "queued"
	if res.Duplicate {
		status = "duplicate"
	}
	return c.JSON(http.StatusOK, map[string]string{"eventId": res.EventID, "status": status})
}
