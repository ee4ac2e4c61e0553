package machine

import "golang.org/x/sys/unix"

const (
	nativeAuditArch = unix.AUDIT_ARCH_X86_64
	// foreignSyscallBit marks x32 calls, which share the architecture.
	foreignSyscallBit = 0x40000000
	cloneFlagsOffset  = seccompArg0
)

var archDenied = []deniedSyscall{
	{"iopl", unix.SYS_IOPL, "direct access to I/O ports"},
	{"ioperm", unix.SYS_IOPERM, "direct access to I/O ports"},
	{"modify_ldt", unix.SYS_MODIFY_LDT, "segment descriptors: old and exploited, needed only by 16-bit code"},
	{"uselib", unix.SYS_USELIB, "obsolete"},
	{"create_module", unix.SYS_CREATE_MODULE, "kernel modules (obsolete)"},
	{"get_kernel_syms", unix.SYS_GET_KERNEL_SYMS, "kernel modules (obsolete)"},
	{"query_module", unix.SYS_QUERY_MODULE, "kernel modules (obsolete)"},
	{"nfsservctl", unix.SYS_NFSSERVCTL, "obsolete"},
	{"_sysctl", unix.SYS__SYSCTL, "obsolete"},
	{"ustat", unix.SYS_USTAT, "obsolete"},
	{"sysfs", unix.SYS_SYSFS, "obsolete"},
}
