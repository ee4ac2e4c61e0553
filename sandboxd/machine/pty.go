package machine

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// PtySize is a terminal's size, as envd's PTY.Size.
type PtySize struct {
	Cols uint16 `json:"cols"`
	Rows uint16 `json:"rows"`
}

// openPTY opens a pseudo-terminal of the devpts this process sees (inside a sandbox: its own,
// whose 64 terminals are all it may take) and returns its master and the peer the command
// gets as its stdio. The peer is opened from the master (TIOCGPTPEER), never by a path.
func openPTY(size PtySize) (master, peer *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &os.PathError{Op: "open", Path: "/dev/ptmx", Err: err}
	}
	master = os.NewFile(uintptr(fd), "ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	pfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER, uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		master.Close()
		return nil, nil, fmt.Errorf("open pty peer: %w", errno)
	}
	peer = os.NewFile(pfd, "pty")
	if err := setWinsize(fd, size); err != nil {
		master.Close()
		peer.Close()
		return nil, nil, err
	}
	return master, peer, nil
}

func setWinsize(fd int, size PtySize) error {
	if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: size.Rows, Col: size.Cols}); err != nil {
		return fmt.Errorf("set pty size: %w", err)
	}
	return nil
}

// pollable makes f, a descriptor received or opened blocking, one Go's poller waits on, so
// that closing it ends a pending read (a terminal's peer may outlive its command).
func pollable(f *os.File) (*os.File, error) {
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "ptmx"), nil
}

// resize sets the terminal's size through its master.
func resize(master *os.File, size PtySize) error {
	rc, err := master.SyscallConn()
	if err != nil {
		return err
	}
	var ierr error
	if err := rc.Control(func(fd uintptr) { ierr = setWinsize(int(fd), size) }); err != nil {
		return err
	}
	return ierr
}

// ptyAttr starts a command as a terminal's session leader, the terminal its controlling one.
func ptyAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
}
