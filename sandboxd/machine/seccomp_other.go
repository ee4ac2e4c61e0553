//go:build !amd64 && !arm64

package machine

// No filter is built for other architectures: sandboxd refuses to isolate
// there rather than run sandboxes without one.
const (
	nativeAuditArch   = 0
	foreignSyscallBit = 0
	cloneFlagsOffset  = seccompArg0
)

var archDenied []deniedSyscall
