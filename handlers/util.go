package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
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

// bindJSON decodes a JSON body (bounded by limitBody) strictly: a malformed body, an unknown
// field or anything after the value is a clear 400.
func bindJSON(c echo.Context, v any) error {
	mt, _, _ := mime.ParseMediaType(c.Request().Header.Get("Content-Type"))
	if mt != "application/json" {
		return echo.NewHTTPError(http.StatusUnsupportedMediaType, "Send the body as application/json.")
	}
	body, err := io.ReadAll(c.Request().Body) // within its limit already (limitBody)
	if err != nil {
		return err
	}
	return decodeJSON(body, v)
}

// decodeJSON decodes a whole body strictly: a malformed body, an unknown field or anything after
// the value is a clear 400.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		return echo.NewHTTPError(http.StatusBadRequest, "The request body is not valid JSON for this route: "+err.Error())
	}
	return nil
}
