package projects

import "sandman/apperr"

// The codes of this package's errors, as the JSON API answers them (docs/api.md, "Error codes").
const (
	// codeProjectLimit: a new project past the most one account may have (409).
	codeProjectLimit apperr.Code = "project_limit"
)
