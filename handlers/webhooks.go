package handlers

import (
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/lifecycle"
)

// webhook takes a provider delivery: capped, signature-checked, stored once, applied in a job.
func (h *Handlers) webhook(c echo.Context) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, lifecycle.MaxWebhookBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &apperr.Error{Kind: apperr.KindTooLarge, Code: "too_large", Message: "Webhook bodies are limited to 1 MiB."}
		}
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
