package machine

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The system-call filter every process of an isolated sandbox runs under,
// the agent included (docs/sandboxd.md, "System calls"). It is a deny list:
// the calls below are the kernel's rarely needed, often exploited surface,
// and a sandbox never needs them to build or serve an app. A refused call
// fails with EPERM (ENOSYS for clone3, so that libc falls back to clone);
// no call kills the process.

// deniedSyscall is a call the filter refuses whatever its arguments.
type deniedSyscall struct {
	name string
	nr   uintptr
	why  string
}

// deniedSyscalls are refused on every architecture; archDenied adds the
// ones a given architecture has.
var deniedSyscalls = append([]deniedSyscall{
	{"keyctl", unix.SYS_KEYCTL, "kernel keyrings: a sandbox has a fresh empty one and no use for it"},
	{"add_key", unix.SYS_ADD_KEY, "kernel keyrings"},
	{"request_key", unix.SYS_REQUEST_KEY, "kernel keyrings"},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP, "io_uring: a large, young interface with a long list of escapes; programs fall back to ordinary I/O"},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER, "io_uring"},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER, "io_uring"},
	{"userfaultfd", unix.SYS_USERFAULTFD, "lets a process stall the kernel mid-copy, the usual tool to win kernel races"},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, "performance counters: kernel escapes and side channels"},
	{"bpf", unix.SYS_BPF, "eBPF programs run in the kernel"},
	{"ptrace", unix.SYS_PTRACE, "tracing: not needed to build or serve an app, and a classic way around a filter"},
	{"mount", unix.SYS_MOUNT, "mounts (the sandbox has no capability for them either)"},
	{"umount2", unix.SYS_UMOUNT2, "mounts"},
	{"pivot_root", unix.SYS_PIVOT_ROOT, "mounts"},
	{"fsopen", unix.SYS_FSOPEN, "the new mount API"},
	{"fsconfig", unix.SYS_FSCONFIG, "the new mount API"},
	{"fsmount", unix.SYS_FSMOUNT, "the new mount API"},
	{"fspick", unix.SYS_FSPICK, "the new mount API"},
	{"move_mount", unix.SYS_MOVE_MOUNT, "the new mount API"},
	{"open_tree", unix.SYS_OPEN_TREE, "the new mount API"},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR, "the new mount API"},
	{"unshare", unix.SYS_UNSHARE, "new namespaces: each one is kernel surface a sandbox has no use for"},
	{"setns", unix.SYS_SETNS, "joining namespaces"},
	{"kexec_load", unix.SYS_KEXEC_LOAD, "loading a kernel"},
	{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, "loading a kernel"},
	{"init_module", unix.SYS_INIT_MODULE, "kernel modules"},
	{"finit_module", unix.SYS_FINIT_MODULE, "kernel modules"},
	{"delete_module", unix.SYS_DELETE_MODULE, "kernel modules"},
	{"syslog", unix.SYS_SYSLOG, "the kernel log: addresses that defeat KASLR"},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, "opens files by handle, around the mount tree (the shocker escape)"},
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, "file handles"},
	{"acct", unix.SYS_ACCT, "process accounting"},
	{"swapon", unix.SYS_SWAPON, "swap"},
	{"swapoff", unix.SYS_SWAPOFF, "swap"},
	{"reboot", unix.SYS_REBOOT, "rebooting"},
	{"quotactl", unix.SYS_QUOTACTL, "disk quotas"},
	{"quotactl_fd", unix.SYS_QUOTACTL_FD, "disk quotas"},
	{"settimeofday", unix.SYS_SETTIMEOFDAY, "the host's clock"},
	{"clock_settime", unix.SYS_CLOCK_SETTIME, "the host's clock"},
	{"clock_adjtime", unix.SYS_CLOCK_ADJTIME, "the host's clock"},
	{"adjtimex", unix.SYS_ADJTIMEX, "the host's clock"},
	{"vhangup", unix.SYS_VHANGUP, "terminals of the host"},
	{"lookup_dcookie", unix.SYS_LOOKUP_DCOOKIE, "a profiling interface"},
	{"fanotify_init", unix.SYS_FANOTIFY_INIT, "file-access notification of whole mounts"},
}, archDenied...)

// The calls the filter looks into.
const (
	// cloneNamespaceFlags are clone's flags that make namespaces.
	cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC | unix.CLONE_NEWUSER |
		unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP
	// personalityQuery reads the persona without changing it.
	personalityQuery = 0xffffffff
)

// allowedFamilies are the socket families a sandbox may open: local
// sockets, IP (its own loopback) and netlink (how programs list
// interfaces). AF_VSOCK, AF_PACKET, AF_ALG and the rest are refused.
var allowedFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// allowedPersonalities are the personas a program may set (Docker's list):
// Linux's own, with or without UNAME26. The rest (READ_IMPLIES_EXEC,
// ADDR_NO_RANDOMIZE...) weaken the kernel's defences.
var allowedPersonalities = []uint32{0, 0x0008, 0x20000, 0x20008, personalityQuery}

// deniedIoctls are the terminal ioctls that push input into a terminal or
// reach the console.
var deniedIoctls = []uint32{unix.TIOCSTI, unix.TIOCLINUX}

// seccomp_data offsets: nr, arch, then the six arguments from 16 on; on a
// little-endian machine an argument's low 32 bits come first.
const (
	seccompNr   = 0
	seccompArch = 4
	seccompArg0 = 16
	seccompArg1 = 24
	seccompArg2 = 32
)

func retErrno(errno syscall.Errno) bpf.Instruction {
	return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(errno)}
}

var retAllow = bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}

// argBlock is the filter's code for one call whose argument (at off, its
// low 32 bits) decides: the values in list are allowed (allow) or refused
// (!allow); everything else gets the other answer. Every path returns.
func argBlock(nr uintptr, off uint32, list []uint32, allow bool) []bpf.Instruction {
	hit, miss := bpf.Instruction(retAllow), retErrno(unix.EPERM)
	if !allow {
		hit, miss = miss, hit
	}
	body := []bpf.Instruction{bpf.LoadAbsolute{Off: off, Size: 4}}
	for i, v := range list {
		// Jump over the other comparisons and the miss to the hit.
		body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(len(list) - i)})
	}
	body = append(body, miss, hit)
	return append([]bpf.Instruction{bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(nr), SkipTrue: uint8(len(body))}}, body...)
}

// seccompProgram assembles the filter. The architecture is checked first:
// a call through another ABI (32-bit int 0x80, x32) would use other
// numbers, so it is refused whole.
func seccompProgram() ([]unix.SockFilter, error) {
	if nativeAuditArch == 0 {
		return nil, fmt.Errorf("no system-call filter for this architecture")
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: seccompArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nativeAuditArch, SkipTrue: 1},
		retErrno(unix.ENOSYS),
		bpf.LoadAbsolute{Off: seccompNr, Size: 4},
	}
	if foreignSyscallBit != 0 {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: foreignSyscallBit, SkipFalse: 1}, retErrno(unix.ENOSYS))
	}
	for _, d := range deniedSyscalls {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(d.nr), SkipFalse: 1}, retErrno(unix.EPERM))
	}
	// clone3 passes its flags in memory the filter cannot read: ENOSYS makes
	// libc and Go fall back to clone, whose flags it can.
	prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1}, retErrno(unix.ENOSYS))
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SYS_CLONE, SkipTrue: 4},
		bpf.LoadAbsolute{Off: cloneFlagsOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNamespaceFlags, SkipFalse: 1},
		retErrno(unix.EPERM),
		retAllow,
	)
	prog = append(prog, argBlock(unix.SYS_SOCKET, seccompArg0, allowedFamilies, true)...)
	// A signal queued with a siginfo of the sender's choosing looks to the
	// Go runtime like a fault of its own (a SIGSEGV with SI_QUEUE crashes
	// it): nothing may queue one to the agent, PID 1.
	prog = append(prog, argBlock(unix.SYS_RT_SIGQUEUEINFO, seccompArg0, []uint32{1}, false)...)
	prog = append(prog, argBlock(unix.SYS_RT_TGSIGQUEUEINFO, seccompArg0, []uint32{1}, false)...)
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.SYS_PIDFD_SEND_SIGNAL, SkipTrue: 6},
		bpf.LoadAbsolute{Off: seccompArg2, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 3},
		bpf.LoadAbsolute{Off: seccompArg2 + 4, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 1},
		retAllow,
		retErrno(unix.EPERM),
	)
	prog = append(prog, argBlock(unix.SYS_PERSONALITY, seccompArg0, allowedPersonalities, true)...)
	prog = append(prog, argBlock(unix.SYS_IOCTL, seccompArg1, deniedIoctls, false)...)
	prog = append(prog, retAllow)

	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("assemble the system-call filter: %w", err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// installSeccomp puts the calling thread under the filter; its children and
// what it executes inherit it. no_new_privs must be set (bubblewrap does).
func installSeccomp() error {
	filter, err := seccompProgram()
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("install the system-call filter: %w", err)
	}
	return nil
}

// SyscallFilter is the filter as GET /_sandboxd/isolation reports it.
type SyscallFilter struct {
	// Denied maps each refused call to why.
	Denied map[string]string `json:"denied"`
	// Restricted maps calls allowed only with some arguments to the rule.
	Restricted map[string]string `json:"restricted"`
	// Refusal is what a refused call returns.
	Refusal string `json:"refusal"`
}

func syscallFilterReport() *SyscallFilter {
	r := &SyscallFilter{Denied: map[string]string{}, Restricted: map[string]string{},
		Refusal: "EPERM (ENOSYS for clone3 and for other architectures' calls); no call kills the process"}
	for _, d := range deniedSyscalls {
		r.Denied[d.name] = d.why
	}
	r.Restricted["clone"] = "no namespace flags (CLONE_NEWNS, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWCGROUP)"
	r.Restricted["clone3"] = "ENOSYS: its flags cannot be inspected, and libc falls back to clone"
	r.Restricted["socket"] = "families AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK only"
	r.Restricted["personality"] = "only Linux's own persona (0, UNAME26, and reading it)"
	r.Restricted["ioctl"] = "not TIOCSTI (typing into a terminal) or TIOCLINUX (the console)"
	r.Restricted["rt_sigqueueinfo"] = "not to PID 1, the agent (a queued siginfo can fake a fault that crashes it)"
	r.Restricted["rt_tgsigqueueinfo"] = "not to PID 1, the agent"
	r.Restricted["pidfd_send_signal"] = "without a siginfo of the caller's (the agent's pid could be reached through a pidfd)"
	return r
}

// deniedNames lists the refused calls, for the start log.
func deniedNames() string {
	names := make([]string, 0, len(deniedSyscalls))
	for _, d := range deniedSyscalls {
		names = append(names, d.name)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}
