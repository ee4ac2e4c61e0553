package accounts

import "sandman/apperr"

// The codes of this package's errors, as the JSON API answers them (docs/api.md, "Error codes").
const (
	// codeBadCredentials: an unknown email or a wrong password, one answer for both (401).
	codeBadCredentials apperr.Code = "bad_credentials"

	// codeInvalidToken: an API token that is wrong, revoked or expired, one answer for all (401).
	codeInvalidToken apperr.Code = "invalid_token"

	// codeTooManyTokens: a new API token past the most a founder may have that work (409).
	codeTooManyTokens apperr.Code = "too_many_tokens"
)
