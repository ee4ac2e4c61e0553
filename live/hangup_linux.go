package live

import (
	"net"
	"sync"
	"syscall"
)

// watchHangup calls gone once the peer of a hijacked connection hangs up, and returns how to
// stop watching (before the connection is closed). On Linux one epoll instance watches every
// stream's socket for the peer's hang-up (EPOLLRDHUP: the FIN a closing browser sends; a reset
// or an error is always reported) and one goroutine waits on it for the whole process, so a
// stream costs no goroutine and no buffer for this. A connection it cannot watch (not a
// socket, or no epoll) is read instead (watchByReading).
func watchHangup(nc net.Conn, gone func()) (unwatch func()) {
	w := theHangupWatcher()
	sc, ok := nc.(syscall.Conn)
	if w == nil || !ok {
		return watchByReading(nc, gone)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return watchByReading(nc, gone)
	}
	key, ok := w.add(gone)
	if !ok {
		return watchByReading(nc, gone)
	}
	if cerr := raw.Control(func(fd uintptr) {
		// The key, not the descriptor, names the stream: a descriptor is reused once closed.
		ev := syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: int32(uint32(key)), Pad: int32(uint32(key >> 32))}
		err = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	}); cerr != nil || err != nil {
		w.take(key)
		return watchByReading(nc, gone)
	}
	return func() {
		w.take(key)
		_ = raw.Control(func(fd uintptr) { _ = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil) })
	}
}

// hangupWatcher is the process's one epoll instance for hijacked connections.
type hangupWatcher struct {
	epfd int
	mu   sync.Mutex
	next uint64
	gone map[uint64]func()
	// broken: epoll_wait failed; nothing is watched any more.
	broken bool
}

var (
	hangupsOnce sync.Once
	hangups     *hangupWatcher
)

// theHangupWatcher starts the watcher on first use; nil when the system gives no epoll.
func theHangupWatcher() *hangupWatcher {
	hangupsOnce.Do(func() {
		fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
		if err != nil {
			return
		}
		hangups = &hangupWatcher{epfd: fd, gone: map[uint64]func(){}}
		go hangups.run()
	})
	return hangups
}

func (w *hangupWatcher) add(gone func()) (key uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.broken {
		return 0, false
	}
	w.next++
	w.gone[w.next] = gone
	return w.next, true
}

// take forgets a key and returns its callback, nil when it was taken already.
func (w *hangupWatcher) take(key uint64) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	gone := w.gone[key]
	delete(w.gone, key)
	return gone
}

// run tells each hang-up to its stream. It blocks in epoll_wait, one thread's worth of cost for
// the process, whatever the number of streams.
func (w *hangupWatcher) run() {
	events := make([]syscall.EpollEvent, 256)
	for {
		n, err := syscall.EpollWait(w.epfd, events, -1)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			// Not expected of a valid descriptor and buffer. The streams still end at their
			// next failed write (a heartbeat's); new ones are read instead.
			w.mu.Lock()
			w.broken = true
			w.mu.Unlock()
			return
		}
		for _, ev := range events[:n] {
			if gone := w.take(uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32); gone != nil {
				gone()
			}
		}
	}
}
