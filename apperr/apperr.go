// Package apperr is the small set of errors the domain packages return and the handlers map to
// HTTP statuses in one place.
package apperr

import (
	"errors"
	"fmt"
	"time"
)

// Kind says what went wrong from the caller's point of view.
type Kind int

// The kinds, each with one HTTP status in handlers (a kind without one answers 500).
const (
	KindInvalid      Kind = iota + 1 // 422: the input breaks a rule; Fields says which
	KindNotFound                     // 404: missing, or another founder's
	KindConflict                     // 409: the current state forbids it
	KindUnauthorized                 // 401: bad credentials or no session
	KindRateLimited                  // 429: too many attempts; RetryAfter says when
	KindNoCredits                    // 402: a build needs a credit the founder does not have
	KindUnavailable                  // 503: a dependency cannot answer now
	KindTooLarge                     // 413: the request body is over its limit
	KindForbidden                    // 403: the request is not allowed as sent (a missing or wrong CSRF token)

	kindEnd // not a kind: keep it last, so Kinds lists every kind above
)

// Kinds returns every kind, for tests that check each one is handled.
func Kinds() []Kind {
	out := make([]Kind, 0, kindEnd-1)
	for k := Kind(1); k < kindEnd; k++ {
		out = append(out, k)
	}
	return out
}

// Code is an error's stable, machine-readable name in the JSON API's answers ("code"). Each is
// declared once, as a constant of this type, by the package that returns it, and listed in
// docs/api.md ("Error codes"); a code used by several packages is declared here.
type Code string

// The codes of more than one package.
const (
	// CodeInvalid: the input breaks a rule; the error's fields say which (422).
	CodeInvalid Code = "invalid"
	// CodeNotFound: missing, or another founder's (404).
	CodeNotFound Code = "not_found"
	// CodeRateLimited: too many attempts; Retry-After says when to try again (429).
	CodeRateLimited Code = "rate_limited"
)

// Error is an error a person can act on: Message is safe to show, Err is for the logs.
type Error struct {
	Kind       Kind
	Code       Code              // stable machine-readable code for the JSON API
	Message    string            // shown to the founder
	Fields     map[string]string // per-field messages for KindInvalid
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.Err)
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// As returns the *Error in err's chain, if any.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Invalid reports input that breaks rules, one message per field.
func Invalid(fields map[string]string) *Error {
	return &Error{Kind: KindInvalid, Code: CodeInvalid, Message: "Please correct the highlighted fields.", Fields: fields}
}

// NotFound reports a missing (or someone else's) thing.
func NotFound(what string) *Error {
	return &Error{Kind: KindNotFound, Code: CodeNotFound, Message: what + " not found."}
}

// New builds an error of any kind.
func New(kind Kind, code Code, message string) *Error {
	return &Error{Kind: kind, Code: code, Message: message}
}
