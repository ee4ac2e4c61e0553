package main

import "golang.org/x/sys/unix"

func archSyscalls() {
	// Level 0 and clearing no ports: allowed by the kernel to anyone.
	raw("iopl", unix.SYS_IOPL, 0)
	raw("ioperm", unix.SYS_IOPERM, 0, 0, 0)
}
