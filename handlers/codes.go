package handlers

import "sandman/apperr"

// The codes of this package's errors, as the JSON API answers them (docs/api.md, "Error codes").
const (
	// codeUnauthorized: a JSON request with neither a session nor an API token (401).
	codeUnauthorized apperr.Code = "unauthorized"

	// codeCSRF: a form or request without the session's CSRF token (403).
	codeCSRF apperr.Code = "csrf"

	// codeSessionOnly: an API token on a route a browser session alone may call (403).
	codeSessionOnly apperr.Code = "session_only"

	// codeTooLarge: a body over its route's limit (413).
	codeTooLarge apperr.Code = "too_large"

	// codeBusy: a large body that found no turn among those read at once (503).
	codeBusy apperr.Code = "busy"

	// codeTooManyStreams: an event stream past the most one founder or link may hold open (429).
	codeTooManyStreams apperr.Code = "too_many_streams"

	// codeShuttingDown: an event stream asked of an instance that is stopping (503).
	codeShuttingDown apperr.Code = "shutting_down"

	// codeLinkUnshowable: a share link made with another SANDMAN_SHARE_KEY, which cannot be shown again (409).
	codeLinkUnshowable apperr.Code = "link_unshowable"

	// codeBadRequest: the request cannot be read as sent: a malformed body, header or parameter (400).
	codeBadRequest apperr.Code = "bad_request"

	// codeForbidden: a request refused without a code of its own (403).
	codeForbidden apperr.Code = "forbidden"

	// codeMethodNotAllowed: a method the path does not take (405).
	codeMethodNotAllowed apperr.Code = "method_not_allowed"

	// codeInternal: a failure on our side, logged: try again (5xx).
	codeInternal apperr.Code = "internal"

	// codeOther: any other refusal without a code of its own: its status says which (408, 415).
	codeOther apperr.Code = "error"
)
