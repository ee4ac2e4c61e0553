// Package machine is where a sandbox runs: what the host can enforce, found
// once at start (Detect: bubblewrap's namespaces, cgroup limits, the
// system-call filter, the host uid range), a sandbox's disk image, and the
// running sandbox itself (Machine): its processes and its files, reached
// through the agent that is its PID 1, or as plain host processes without
// isolation. It knows nothing of the provider's API: the sandboxd package
// above it decides when a sandbox boots, pauses and ends.
//
// An init() here notices argument "sandboxd-agent" while being PID 1 and
// runs the agent instead of the program, so every binary that links the
// package can be an agent (docs/sandboxd.md, "The agent").
package machine
