package handlers

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/db"
)

func apperrIsNotFound(err error) bool {
	if ae, ok := apperr.As(err); ok {
		return ae.Kind == apperr.KindNotFound
	}
	return db.IsNotFound(err)
}

// parseID reads an id from the path; a malformed one is simply not found.
func parseID(raw, what string) (uuid.UUID, error) {
	id, err := uuid.Parse(raw)
	if err != nil {
		return uuid.Nil, apperr.NotFound(what)
	}
	return id, nil
}

func itoa(n int) string { return strconv.Itoa(n) }

// bindJSON decodes a JSON body strictly: a malformed body or unknown field is a clear 400.
func bindJSON(c echo.Context, v any) error {
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
	if mt != "application/json" {
		return echo.NewHTTPError(http.StatusUnsupportedMediaType, "Send the body as application/json.")
	}
	dec := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The request body is not valid JSON for this route: "+err.Error())
	}
	return nil
}
