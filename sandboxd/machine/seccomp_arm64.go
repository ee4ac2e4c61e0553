package machine

import "golang.org/x/sys/unix"

const (
	nativeAuditArch   = unix.AUDIT_ARCH_AARCH64
	foreignSyscallBit = 0
	cloneFlagsOffset  = seccompArg0
)

var archDenied []deniedSyscall
