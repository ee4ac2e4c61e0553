package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The kinds of failure callers act on. Test with errors.Is; every error the client returns
// wraps at most one of them (a rate limit wraps ErrRateLimited and is a *RateLimitedError).
var (
	// ErrNotFound: the sandbox (or webhook, process) does not exist. Definitive.
	ErrNotFound = errors.New("e2b: not found")
	// ErrAuth: the provider rejected the API key or envd access token (401/403).
	ErrAuth = errors.New("e2b: unauthorized")
	// ErrConflict: the current state forbids the call (409), e.g. set timeout while pausing.
	ErrConflict = errors.New("e2b: conflict")
	// ErrInvalid: the provider rejected the request itself (400/422); retrying cannot help.
	ErrInvalid = errors.New("e2b: invalid request")
	// ErrRateLimited: 429. The error is also a *RateLimitedError carrying Retry-After.
	ErrRateLimited = errors.New("e2b: rate limited")
	// ErrTransient: timeouts, network errors and 5xx; the call was retried and still failed.
	ErrTransient = errors.New("e2b: transient failure")
	// ErrCircuitOpen: the breaker is open after repeated failures; no request was sent.
	ErrCircuitOpen = errors.New("e2b: circuit open")
)

// APIError is an error answer from the provider's API or from envd.
type APIError struct {
	// Op names the call, e.g. "pause".
	Op string
	// Status is the HTTP status (0 when a Connect stream ended with an error).
	Status int
	// Code is the provider's error_code, or the Connect code for envd ("not_found").
	Code string
	// Message is the provider's message.
	Message string

	retryAfter time.Duration // Retry-After on a 503, honoured by the retry loop
}

// Error reads like "e2b pause: 404: Sandbox … doesn't exist".
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "e2b %s: ", e.Op)
	if e.Status != 0 {
		fmt.Fprintf(&b, "%d", e.Status)
	}
	if e.Code != "" {
		if e.Status != 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.Code)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap gives the kind of failure, so errors.Is(err, ErrNotFound) works.
func (e *APIError) Unwrap() error {
	if k := connectKind(e.Code); k != nil {
		return k
	}
	return statusKind(e.Status)
}

// RateLimitedError is a 429 answer that outlived the retries, or whose Retry-After is beyond
// the call's deadline.
type RateLimitedError struct {
	// RetryAfter is the provider's Retry-After, zero when it sent none.
	RetryAfter time.Duration
	// Err is the underlying answer.
	Err *APIError
}

// Error adds the Retry-After to the answer's text.
func (e *RateLimitedError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%v (retry after %s)", e.Err, e.RetryAfter)
	}
	return e.Err.Error()
}

// Unwrap makes errors.Is(err, ErrRateLimited) and errors.As(err, **APIError) work.
func (e *RateLimitedError) Unwrap() []error { return []error{ErrRateLimited, e.Err} }

// statusKind maps an HTTP status to its kind of failure (nil: none of ours).
func statusKind(status int) error {
	switch {
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity:
		return ErrInvalid
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return ErrAuth
	case status == http.StatusNotFound, status == http.StatusGone:
		return ErrNotFound
	case status == http.StatusConflict:
		return ErrConflict
	case status == http.StatusTooManyRequests:
		return ErrRateLimited
	case status == http.StatusRequestTimeout, status >= 500 && status <= 599:
		return ErrTransient
	}
	return nil
}

// connectKind maps a Connect error code (envd) to its kind of failure.
func connectKind(code string) error {
	switch code {
	case "not_found":
		return ErrNotFound
	case "unauthenticated", "permission_denied":
		return ErrAuth
	case "already_exists", "failed_precondition", "aborted":
		return ErrConflict
	case "invalid_argument", "out_of_range", "unimplemented":
		return ErrInvalid
	case "resource_exhausted":
		return ErrRateLimited
	case "unavailable", "deadline_exceeded", "internal", "unknown", "data_loss":
		return ErrTransient
	}
	return nil
}

// errorFromResponse builds the error for a non-success answer. The body is the provider's
// {"code", "message", "error_code"}, envd's Connect {"code": "not_found", "message"}, or
// anything a proxy on the way sends.
func errorFromResponse(op string, status int, header http.Header, body []byte) error {
	apiErr := &APIError{Op: op, Status: status}
	var parsed struct {
		Code      json.RawMessage `json:"code"`
		Message   string          `json:"message"`
		ErrorCode string          `json:"error_code"`
	}
	if json.Unmarshal(body, &parsed) == nil && (parsed.Message != "" || len(parsed.Code) > 0) {
		apiErr.Message = parsed.Message
		apiErr.Code = parsed.ErrorCode
		var connectCode string
		if json.Unmarshal(parsed.Code, &connectCode) == nil && connectKind(connectCode) != nil {
			apiErr.Code = connectCode
		}
	} else {
		apiErr.Message = shortText(body)
	}
	apiErr.retryAfter, _ = parseRetryAfter(header.Get("Retry-After"), time.Now())
	if status == http.StatusTooManyRequests || apiErr.Code == "resource_exhausted" {
		return &RateLimitedError{RetryAfter: apiErr.retryAfter, Err: apiErr}
	}
	return apiErr
}

// shortText keeps an unexpected body readable in logs: one line, valid UTF-8, bounded.
func shortText(body []byte) string {
	const limit = 300
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > limit {
		s = s[:limit]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		s += "…"
	}
	return strings.ToValidUTF8(s, "?")
}

// maxRetryAfter caps absurd Retry-After values; the call's deadline usually cuts earlier.
const maxRetryAfter = time.Hour

// parseRetryAfter reads Retry-After as delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		if secs > int64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(secs) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	switch {
	case d < 0:
		return 0, true
	case d > maxRetryAfter:
		return maxRetryAfter, true
	}
	return d, true
}

// transportError classifies a failure to get any answer. A cancellation by the caller stays
// a plain context error; everything else (timeouts included) is transient.
func transportError(op string, parent context.Context, err error) error {
	if errors.Is(parent.Err(), context.Canceled) {
		return fmt.Errorf("e2b %s: %w", op, parent.Err())
	}
	return fmt.Errorf("e2b %s: %w: %w", op, ErrTransient, err)
}

// notSent reports errors that prove the request never reached the server, so even a
// non-idempotent call may be repeated.
func notSent(err error) bool {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return true
	}
	var dnsErr *net.DNSError
	return errors.As(err, &dnsErr)
}

// outcome is the metrics label for a call's result.
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrCircuitOpen):
		return "circuit_open"
	case errors.Is(err, ErrNotFound):
		return "not_found"
	case errors.Is(err, ErrConflict):
		return "conflict"
	case errors.Is(err, ErrAuth):
		return "auth"
	case errors.Is(err, ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case errors.Is(err, ErrTransient):
		return "transient"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}
