package ops

import "sandman/apperr"

// The codes of this package's errors, as the JSON API answers them (docs/api.md, "Error codes").
const (
	// codeNoAccount: an operator's change for an email no founder signed up with (404).
	codeNoAccount apperr.Code = "no_account"
)
