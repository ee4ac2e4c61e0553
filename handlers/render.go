package handlers

import (
	"bytes"
	"context"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"sandman/apperr"
)

// render writes a component only after it rendered completely, so a failed render becomes a
// 500 instead of half a page under a 200.
func render(c echo.Context, status int, cmp templ.Component) error {
	buf := templ.GetBuffer()
	defer templ.ReleaseBuffer(buf)
	if err := cmp.Render(c.Request().Context(), buf); err != nil {
		return err
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// apiError is the JSON API's error body.
type apiError struct {
	Error  string            `json:"error"`
	Code   apperr.Code       `json:"code"`
	Fields map[string]string `json:"fields,omitempty"`
}

func jsonError(c echo.Context, status int, code apperr.Code, msg string, fields map[string]string) error {
	return c.JSON(status, apiError{Error: msg, Code: code, Fields: fields})
}

// renderBytes renders a component for a message body (SSE) rather than a response.
func renderBytes(ctx context.Context, cmp templ.Component) ([]byte, error) {
	var buf bytes.Buffer
	err := cmp.Render(ctx, &buf)
	return buf.Bytes(), err
}
