// Command probe is uploaded into a sandbox by the attack tests and tries,
// from inside, what the sandbox must not be able to do. Every attempt is
// harmless when the defence is broken: where a call could succeed, its
// arguments make the kernel fail it right after the filter would have (so
// the two answers differ), or its effect ends with this process.
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe syscalls | connect PATH | readkey ID | ptys N")
		os.Exit(2)
	}
	// Meant for a sandbox only: on a host, as root, some calls would work.
	if os.Getenv("E2B_SANDBOX") != "true" {
		fmt.Fprintln(os.Stderr, "probe runs only inside a sandbox (E2B_SANDBOX=true)")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "syscalls":
		syscalls()
	case "connect":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			err = unix.Connect(fd, &unix.SockaddrUnix{Name: os.Args[2]})
		}
		report("connect", 0, err)
	case "readkey":
		id, _ := strconv.Atoi(os.Args[2])
		buf := make([]byte, 256)
		n, _, errno := unix.Syscall6(unix.SYS_KEYCTL, unix.KEYCTL_READ, uintptr(id), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0)
		if errno == 0 {
			fmt.Printf("readkey read %q\n", buf[:min(int(n), len(buf))])
			return
		}
		report("readkey", 0, errno)
	case "ptys":
		limit, _ := strconv.Atoi(os.Args[2])
		n := 0
		var err error
		for ; n < limit; n++ {
			if _, err = os.OpenFile("/dev/ptmx", os.O_RDWR, 0); err != nil {
				break
			}
		}
		fmt.Printf("ptys %d %v\n", n, err)
	}
}

// report prints "name ok" or "name ERRNO".
func report(name string, _ uintptr, err error) {
	var errno syscall.Errno
	switch {
	case err == nil:
		fmt.Println(name, "ok")
	case errors.As(err, &errno) && errno != 0:
		fmt.Println(name, unix.ErrnoName(errno))
	case errors.As(err, &errno):
		fmt.Println(name, "ok")
	default:
		fmt.Println(name, err)
	}
}

func raw(name string, trap uintptr, a ...uintptr) {
	var args [6]uintptr
	copy(args[:], a)
	r, _, errno := unix.Syscall6(trap, args[0], args[1], args[2], args[3], args[4], args[5])
	if errno == 0 {
		report(name, r, nil)
		return
	}
	report(name, r, errno)
}

const nowhere = "/sandboxd-probe-nonexistent"

// negative passes a negative int as a register argument.
func negative(n int) uintptr { return uintptr(n) }

func cstr(s string) uintptr {
	b, _ := unix.BytePtrFromString(s)
	return uintptr(unsafe.Pointer(b))
}

func syscalls() {
	raw("keyctl", unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, negative(unix.KEY_SPEC_SESSION_KEYRING), 0)
	// Into this process's own keyring, which ends with it.
	raw("add_key", unix.SYS_ADD_KEY, cstr("user"), cstr("sandboxd-probe"), cstr("x"), 1, negative(unix.KEY_SPEC_PROCESS_KEYRING))
	raw("request_key", unix.SYS_REQUEST_KEY, cstr("user"), cstr("sandboxd-probe-none"), 0, 0)
	var uringParams [120]byte
	raw("io_uring_setup", unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&uringParams[0])))
	raw("io_uring_enter", unix.SYS_IO_URING_ENTER, ^uintptr(0), 0, 0, 0, 0)
	raw("io_uring_register", unix.SYS_IO_URING_REGISTER, ^uintptr(0), 0, 0, 0)
	raw("userfaultfd", unix.SYS_USERFAULTFD, 1 /* UFFD_USER_MODE_ONLY */)
	attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
	raw("perf_event_open", unix.SYS_PERF_EVENT_OPEN, uintptr(unsafe.Pointer(&attr)), 0, ^uintptr(0), ^uintptr(0), 0)
	raw("bpf", unix.SYS_BPF, ^uintptr(0), 0, 0)
	// ADDR_NO_RANDOMIZE; only this process's persona changes.
	raw("personality(ADDR_NO_RANDOMIZE)", unix.SYS_PERSONALITY, 0x0040000)
	raw("personality(query)", unix.SYS_PERSONALITY, 0xffffffff)
	// An unknown request: EIO from the kernel, EPERM from the filter.
	raw("ptrace", unix.SYS_PTRACE, 0xdead, 0, 0, 0)
	// Paths that do not exist: ENOENT from the kernel, whoever asks.
	raw("mount", unix.SYS_MOUNT, cstr("none"), cstr(nowhere), cstr("tmpfs"), 0, 0)
	raw("umount2", unix.SYS_UMOUNT2, cstr(nowhere), 0)
	raw("pivot_root", unix.SYS_PIVOT_ROOT, cstr(nowhere), cstr(nowhere))
	raw("fsopen", unix.SYS_FSOPEN, cstr("tmpfs"), 0)
	raw("open_tree", unix.SYS_OPEN_TREE, ^uintptr(0), cstr(nowhere), 0)
	raw("unshare(CLONE_NEWUSER)", unix.SYS_UNSHARE, unix.CLONE_NEWUSER)
	raw("setns", unix.SYS_SETNS, ^uintptr(0), 0)
	// Flag pairs the kernel refuses with EINVAL: no process is ever made.
	raw("clone(CLONE_NEWUSER)", unix.SYS_CLONE, unix.CLONE_NEWUSER|unix.CLONE_FS, 0, 0, 0, 0)
	raw("clone(CLONE_NEWNS)", unix.SYS_CLONE, unix.CLONE_NEWNS|unix.CLONE_FS, 0, 0, 0, 0)
	raw("clone3", unix.SYS_CLONE3, 0, 0)
	raw("kexec_load", unix.SYS_KEXEC_LOAD, 0, 0, 0, 0)
	raw("kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, ^uintptr(0), ^uintptr(0), 0, 0, 0)
	raw("init_module", unix.SYS_INIT_MODULE, 0, 0, cstr(""))
	raw("finit_module", unix.SYS_FINIT_MODULE, ^uintptr(0), cstr(""), 0)
	raw("delete_module", unix.SYS_DELETE_MODULE, cstr("sandboxd_probe_none"), 0)
	raw("syslog", unix.SYS_SYSLOG, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, 0, 0)
	var handle [128 + 8]byte
	handle[0] = 128
	var mountID int32
	raw("name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, negative(unix.AT_FDCWD), cstr("/tmp"), uintptr(unsafe.Pointer(&handle[0])), uintptr(unsafe.Pointer(&mountID)), 0)
	raw("open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, ^uintptr(0), uintptr(unsafe.Pointer(&handle[0])), 0)
	raw("acct", unix.SYS_ACCT, cstr(nowhere))
	raw("swapon", unix.SYS_SWAPON, cstr(nowhere), 0)
	raw("swapoff", unix.SYS_SWAPOFF, cstr(nowhere))
	// A wrong magic number: EINVAL from the kernel.
	raw("reboot", unix.SYS_REBOOT, 0, 0, 0, 0)
	archSyscalls()
	raw("ioctl(TIOCSTI)", unix.SYS_IOCTL, 1, unix.TIOCSTI, cstr("x"))
	raw("ioctl(TIOCLINUX)", unix.SYS_IOCTL, 1, unix.TIOCLINUX, cstr("\x00"))
	for _, f := range []struct {
		name   string
		family int
		typ    int
	}{
		{"socket(AF_UNIX)", unix.AF_UNIX, unix.SOCK_STREAM},
		{"socket(AF_INET)", unix.AF_INET, unix.SOCK_STREAM},
		{"socket(AF_INET6)", unix.AF_INET6, unix.SOCK_STREAM},
		{"socket(AF_NETLINK)", unix.AF_NETLINK, unix.SOCK_RAW},
		{"socket(AF_VSOCK)", unix.AF_VSOCK, unix.SOCK_STREAM},
		{"socket(AF_ALG)", unix.AF_ALG, unix.SOCK_SEQPACKET},
		{"socket(AF_PACKET)", unix.AF_PACKET, unix.SOCK_RAW},
	} {
		raw(f.name, unix.SYS_SOCKET, uintptr(f.family), uintptr(f.typ), 0)
	}
	// Signal 0 only checks: were these allowed, nothing would be sent.
	var info [128]byte
	*(*int32)(unsafe.Pointer(&info[8])) = -1 // si_code SI_QUEUE
	raw("rt_sigqueueinfo(1)", unix.SYS_RT_SIGQUEUEINFO, 1, 0, uintptr(unsafe.Pointer(&info[0])))
	pidfd, _, _ := unix.Syscall(unix.SYS_PIDFD_OPEN, 1, 0, 0)
	raw("pidfd_send_signal(siginfo)", unix.SYS_PIDFD_SEND_SIGNAL, pidfd, 0, uintptr(unsafe.Pointer(&info[0])), 0)
	raw("pidfd_send_signal", unix.SYS_PIDFD_SEND_SIGNAL, pidfd, 0, 0, 0)
}
