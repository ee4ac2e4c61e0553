package lifecycle

import "sandman/apperr"

// The codes of this package's errors, as the JSON API answers them (docs/api.md, "Error codes").
const (
	// codeNotBuilt: a rebuild of a project never built (409).
	codeNotBuilt apperr.Code = "not_built"

	// codeAlreadyBuilt: a first build asked of a project that has one (409).
	codeAlreadyBuilt apperr.Code = "already_built"

	// codeNoCredits: a build or rebuild without a credit to spend (402).
	codeNoCredits apperr.Code = "no_credits"

	// codeKeyUsed: a build's idempotency key sent again for another project or kind (409).
	codeKeyUsed apperr.Code = "key_used"

	// codeNotRunning: a pause of a preview that is not running (409).
	codeNotRunning apperr.Code = "not_running"

	// codeNotPaused: a resume of a preview that is not paused (409).
	codeNotPaused apperr.Code = "not_paused"

	// codeBadSignature: a webhook whose signature is not the provider's (401).
	codeBadSignature apperr.Code = "bad_signature"

	// codeBadPayload: a signed webhook whose body is not a lifecycle event (422).
	codeBadPayload apperr.Code = "bad_payload"
)
