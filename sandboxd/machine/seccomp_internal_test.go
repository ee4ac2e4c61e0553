package machine

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompData lays out the kernel's struct seccomp_data for one call, on
// a little-endian machine, as x/net/bpf's interpreter reads it: its loads
// are big-endian where the kernel's are native, so every 32-bit word is
// written big-endian at the offset the kernel has it.
func seccompData(arch uint32, nr uintptr, args ...uint64) []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], uint32(nr))
	binary.BigEndian.PutUint32(b[4:], arch)
	for i, a := range args {
		binary.BigEndian.PutUint32(b[16+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[20+8*i:], uint32(a>>32))
	}
	return b
}

// The filter's rules, run in x/net/bpf's interpreter; the attack tests run
// the same filter in the kernel.
func TestSyscallFilterDecidesEachCallByItsArguments(t *testing.T) {
	if nativeAuditArch == 0 {
		t.Skip("no filter for this architecture")
	}
	raw, err := seccompProgram()
	if err != nil {
		t.Fatal(err)
	}
	prog := make([]bpf.RawInstruction, len(raw))
	for i, r := range raw {
		prog[i] = bpf.RawInstruction{Op: r.Code, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	insns, ok := bpf.Disassemble(prog)
	if !ok {
		t.Fatal("the filter does not disassemble")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	const allow, eperm, enosys = unix.SECCOMP_RET_ALLOW, unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM), unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	arch := uint32(nativeAuditArch)
	tests := []struct {
		name string
		data []byte
		want uint32
	}{
		{"read", seccompData(arch, unix.SYS_READ, 0), allow},
		{"keyctl", seccompData(arch, unix.SYS_KEYCTL), eperm},
		{"io_uring_setup", seccompData(arch, unix.SYS_IO_URING_SETUP), eperm},
		{"another architecture's call", seccompData(0x40000003, unix.SYS_READ), enosys},
		{"clone3", seccompData(arch, unix.SYS_CLONE3), enosys},
		{"clone of a thread", seccompData(arch, unix.SYS_CLONE, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD), allow},
		{"clone into a user namespace", seccompData(arch, unix.SYS_CLONE, unix.CLONE_NEWUSER), eperm},
		{"clone into a network namespace", seccompData(arch, unix.SYS_CLONE, unix.CLONE_NEWNET|unix.CLONE_VFORK), eperm},
		{"socket AF_INET", seccompData(arch, unix.SYS_SOCKET, unix.AF_INET), allow},
		// The kernel reads an int: the high half of the register is noise.
		{"socket AF_INET, high bits set", seccompData(arch, unix.SYS_SOCKET, 1<<32|unix.AF_INET), allow},
		{"socket AF_VSOCK", seccompData(arch, unix.SYS_SOCKET, unix.AF_VSOCK), eperm},
		{"socket AF_PACKET", seccompData(arch, unix.SYS_SOCKET, unix.AF_PACKET), eperm},
		{"ioctl FIONREAD", seccompData(arch, unix.SYS_IOCTL, 0, unix.TCGETS), allow},
		{"ioctl TIOCSTI", seccompData(arch, unix.SYS_IOCTL, 0, unix.TIOCSTI), eperm},
		// ioctl's command is an unsigned int too.
		{"ioctl TIOCSTI, high bits set", seccompData(arch, unix.SYS_IOCTL, 0, 0xffffffff<<32|unix.TIOCSTI), eperm},
		{"ioctl TIOCLINUX", seccompData(arch, unix.SYS_IOCTL, 0, unix.TIOCLINUX), eperm},
		{"personality PER_LINUX", seccompData(arch, unix.SYS_PERSONALITY, 0), allow},
		{"personality query", seccompData(arch, unix.SYS_PERSONALITY, 0xffffffff), allow},
		{"personality ADDR_NO_RANDOMIZE", seccompData(arch, unix.SYS_PERSONALITY, 0x0040000), eperm},
		{"rt_sigqueueinfo to the agent", seccompData(arch, unix.SYS_RT_SIGQUEUEINFO, 1, 11), eperm},
		{"rt_sigqueueinfo to another process", seccompData(arch, unix.SYS_RT_SIGQUEUEINFO, 7, 11), allow},
		{"rt_tgsigqueueinfo to the agent", seccompData(arch, unix.SYS_RT_TGSIGQUEUEINFO, 1, 1, 11), eperm},
		{"pidfd_send_signal", seccompData(arch, unix.SYS_PIDFD_SEND_SIGNAL, 3, 15, 0), allow},
		{"pidfd_send_signal with a siginfo", seccompData(arch, unix.SYS_PIDFD_SEND_SIGNAL, 3, 11, 0x7ffd0000), eperm},
		{"pidfd_send_signal with a high siginfo", seccompData(arch, unix.SYS_PIDFD_SEND_SIGNAL, 3, 11, 0x7ffd<<32), eperm},
	}
	if foreignSyscallBit != 0 {
		tests = append(tests, struct {
			name string
			data []byte
			want uint32
		}{"an x32 call", seccompData(arch, foreignSyscallBit|unix.SYS_READ), enosys})
	}
	for _, d := range deniedSyscalls {
		tests = append(tests, struct {
			name string
			data []byte
			want uint32
		}{d.name, seccompData(arch, d.nr), eperm})
	}
	for _, tt := range tests {
		got, err := vm.Run(tt.data)
		if err != nil || uint32(got) != tt.want {
			t.Errorf("%s: the filter answers %#x (%v), want %#x", tt.name, got, err, tt.want)
		}
	}
}
