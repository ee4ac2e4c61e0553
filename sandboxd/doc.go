// Package sandboxd is a local host of E2B-compatible sandboxes: the
// provider's control-plane API (create, get, list, pause, connect, timeouts,
// kill, lifecycle events, webhooks) and the parts of envd, the in-sandbox
// daemon, that Sandman and the provider's SDKs use (files, processes,
// filesystem calls), with sandboxes as directories and real processes.
//
// It is an independent implementation of the contract in e2b-api.md and
// shares no code with the e2b client package, so that a misreading in one is
// caught by the other. Sandbox traffic is routed by host name
// "{port}-{sandboxID}.localhost:{port}" or by the E2b-Sandbox-Id and
// E2b-Sandbox-Port headers. With bubblewrap each sandbox gets a private root
// and its own network; without it, commands run in the sandbox directory on
// the host network. Fault injection for resilience tests is described on
// Fault.
package sandboxd
