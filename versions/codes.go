package versions

import "sandman/apperr"

// The codes of this package's errors, as the JSON API answers them (docs/api.md, "Error codes").
const (
	// CodeVersionConflict: a version made on a base that is not the current version any more (409).
	CodeVersionConflict apperr.Code = "version_conflict"

	// CodeStorageQuota: new content that would take the founder past their storage quota (413).
	CodeStorageQuota apperr.Code = "storage_quota"

	// codeTooManyBytes: an upload over the total size of a version, once unpacked (413).
	codeTooManyBytes apperr.Code = "upload_too_large"

	// CodeTooManyFiles: an upload over the number of files of a version, or a zip listing too many entries (413).
	CodeTooManyFiles apperr.Code = "upload_too_many_files"

	// codeKeyReused: an Idempotency-Key sent again with another request (422).
	codeKeyReused apperr.Code = "key_reused"

	// codeKeyInFlight: an Idempotency-Key whose first request still runs (409).
	codeKeyInFlight apperr.Code = "key_in_flight"
)
