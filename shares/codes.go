package shares

import "sandman/apperr"

// The codes of this package's errors, as the JSON API answers them (docs/api.md, "Error codes").
const (
	// codeSharingOff: a link asked of a Sandman without SANDMAN_SHARE_KEY (503).
	codeSharingOff apperr.Code = "sharing_off"

	// codeLinkGone: a share link's token that is turned off, replaced or unknown (404).
	codeLinkGone apperr.Code = "link_gone"
)
