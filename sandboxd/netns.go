package sandboxd

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	hostNetnsOnce sync.Once
	hostNetns     *os.File
	hostNetnsErr  error
)

// dialInNetns opens a TCP connection from inside the network namespace of
// pid. A socket belongs to the namespace of the thread that created it, so
// the dial runs on a locked OS thread switched into the sandbox and back.
// The thread is handed back to the runtime only once it is in the host
// namespace again; if switching back fails the thread stays locked and dies
// with the goroutine, so no other goroutine ever runs in a sandbox namespace.
func dialInNetns(ctx context.Context, pid int, addr string) (net.Conn, error) {
	hostNetnsOnce.Do(func() {
		hostNetns, hostNetnsErr = os.Open("/proc/self/ns/net")
	})
	if hostNetnsErr != nil {
		return nil, hostNetnsErr
	}
	target, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		return nil, fmt.Errorf("sandbox network namespace: %w", err)
	}
	defer target.Close()

	type result struct {
		conn net.Conn
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{nil, fmt.Errorf("enter sandbox network namespace: %w", err)}
			return
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if unix.Setns(int(hostNetns.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- result{conn, err}
	}()
	r := <-ch
	return r.conn, r.err
}
