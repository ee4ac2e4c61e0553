// Package sandboxd is a local host of E2B-compatible sandboxes: the
// provider's control-plane API (create, get, list, pause, connect, timeouts,
// kill, lifecycle events, webhooks) and the parts of envd, the in-sandbox
// daemon, that Sandman and the provider's SDKs use (files, processes,
// filesystem calls).
//
// It is an independent implementation of the provider's contract
// (docs/provider.md) and shares no code with the e2b client package, so
// that a misreading in one is caught by the other. Sandbox traffic is routed
// by host name "{port}-{sandboxID}.localhost:{port}" or by the
// E2b-Sandbox-Id and E2b-Sandbox-Port headers.
//
// Sandboxes run untrusted code. Each runs in its own user, PID, mount,
// network, IPC and UTS namespaces (bubblewrap), as an unprivileged user
// with no capabilities, under a system-call filter and cgroup limits, with
// its files in a disk image of its own; an agent that is the sandbox's PID 1 does everything sandboxd
// needs inside it. docs/sandboxd.md explains how, and what it does not
// protect against. Without isolation (IsolationNone, for trusted code only)
// commands run in the sandbox directory on the host. Fault injection for
// resilience tests is described on Fault; only a sandboxd with
// Config.FaultInjection takes faults.
//
// This package is the control plane (the API, the lifecycle, events,
// webhooks, the sandbox-traffic proxy) and wires the rest: envd (envd's
// emulation), machine (where a sandbox runs), store (persisted records),
// faults and wire (docs/sandboxd.md, "The packages").
package sandboxd
