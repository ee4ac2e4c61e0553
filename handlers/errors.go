package handlers

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"sandman/apperr"
	"sandman/db"
	"sandman/views"
)

// kindStatus is the HTTP status of each apperr kind.
var kindStatus = map[apperr.Kind]int{
	apperr.KindInvalid:      http.StatusUnprocessableEntity,
	apperr.KindNotFound:     http.StatusNotFound,
	apperr.KindConflict:     http.StatusConflict,
	apperr.KindUnauthorized: http.StatusUnauthorized,
	apperr.KindRateLimited:  http.StatusTooManyRequests,
	apperr.KindNoCredits:    http.StatusPaymentRequired,
	apperr.KindUnavailable:  http.StatusServiceUnavailable,
	apperr.KindTooLarge:     http.StatusRequestEntityTooLarge,
	apperr.KindForbidden:    http.StatusForbidden,
}

// httpStatus is the status for an apperr kind. A kind added to apperr without a status here is
// a server error, not a zero status (which net/http refuses with a panic).
func httpStatus(k apperr.Kind) int {
	if status, ok := kindStatus[k]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// errorHandler is the one place errors become responses: apperr kinds map to statuses, echo's
// own errors keep theirs, anything else is a logged 500 whose details stay out of the page. The
// answer is written as the route's group declared (answerAs): JSON, a share link's page, or a
// page (a flash message for htmx).
func (h *Handlers) errorHandler(err error, c echo.Context) {
	if c.Response().Committed || errors.Is(err, context.Canceled) {
		return
	}
	status, code, msg := http.StatusInternalServerError, codeInternal, "Something went wrong on our side. Try again in a moment."
	var fields map[string]string
	var he *echo.HTTPError
	if ae, ok := apperr.As(err); ok {
		status, code, msg, fields = httpStatus(ae.Kind), ae.Code, ae.Message, ae.Fields
		if ae.RetryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(ae.RetryAfter.Seconds())))
		}
	} else if db.IsNotFound(err) {
		status, code, msg = http.StatusNotFound, apperr.CodeNotFound, "Not found."
	} else if errors.As(err, &he) {
		status = he.Code
		code = statusCode(status)
		if m, ok := he.Message.(string); ok && status < 500 {
			msg = m
		} else {
			msg = http.StatusText(status)
		}
	}
	if status >= 500 {
		h.Logger.Error("request failed", "method", c.Request().Method, "path", logPath(c.Request()), "status", status, "err", err)
	} else {
		h.Logger.Warn("request refused", "method", c.Request().Method, "path", logPath(c.Request()), "status", status, "err", err)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	// The answer is still owed when the request's context has ended under it (a body that
	// took too long ends it): render it regardless.
	c.SetRequest(c.Request().WithContext(context.WithoutCancel(c.Request().Context())))
	answers := answersOf(c)
	if answers == answerJSON {
		_ = jsonError(c, status, code, msg, fields)
		return
	}
	if isHTMX(c) {
		// Swapping an error page into a card would break the page: show it in the flash region.
		c.Response().Header().Set("HX-Retarget", "#flash")
		c.Response().Header().Set("HX-Reswap", "innerHTML")
		if err := render(c, status, views.Flash(msg)); err != nil {
			h.Logger.Error("render flash", "err", err)
		}
		return
	}
	if answers == answerShare {
		if err := render(c, status, views.ShareMessageView(shareError(c, status, msg))); err != nil {
			h.Logger.Error("render a share link's error page", "err", err)
		}
		return
	}
	page := views.ErrorPage{Layout: h.layout(c, http.StatusText(status)), Status: status, Heading: http.StatusText(status), Message: msg}
	if err := render(c, status, views.ErrorView(page)); err != nil {
		h.Logger.Error("render error page", "err", err)
	}
}

func statusCode(status int) apperr.Code {
	switch status {
	case http.StatusNotFound:
		return apperr.CodeNotFound
	case http.StatusMethodNotAllowed:
		return codeMethodNotAllowed
	case http.StatusRequestEntityTooLarge:
		return codeTooLarge
	case http.StatusBadRequest:
		return codeBadRequest
	case http.StatusForbidden:
		return codeForbidden
	case http.StatusUnauthorized:
		return codeUnauthorized
	}
	if status >= 500 {
		return codeInternal
	}
	return codeOther
}
