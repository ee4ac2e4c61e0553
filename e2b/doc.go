// Package e2b is Sandman's client for the sandbox provider: the control-plane API (sandboxes,
// lifecycle events, webhook registration) and envd, the daemon inside each sandbox (files and
// processes). It speaks the provider's public contract (docs/provider.md), so the
// same code drives real E2B and the bundled local host, sandboxd, by configuration alone.
//
// Every call has a deadline, typed errors (ErrNotFound, ErrAuth, *RateLimitedError,
// ErrConflict, ErrTransient, ErrCircuitOpen, ErrInvalid), retries of transient failures with
// the configured backoff, and a circuit breaker on the control-plane API.
package e2b
