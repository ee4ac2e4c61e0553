package machine

import (
	"encoding/binary"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// WatchEvent is one change under a watched directory, as envd reports it: Name is relative
// to the watched directory, Type one of envd's EVENT_TYPE_* names.
type WatchEvent struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Watch is a running watch of a directory (FileOps.Watch).
type Watch struct {
	// Events delivers the changes in batches; it is closed when the watch ends: Close, the
	// sandbox stopped, or the directory was removed.
	Events <-chan []WatchEvent
	done   chan struct{}
	once   sync.Once
	stop   func()
}

func newWatch(stop func()) (*Watch, chan<- []WatchEvent) {
	ch := make(chan []WatchEvent, 16)
	return &Watch{Events: ch, done: make(chan struct{}), stop: stop}, ch
}

// deliver hands a batch to the watch's reader; false once the watch is closed.
func (w *Watch) deliver(ch chan<- []WatchEvent, evs []WatchEvent) bool {
	select {
	case ch <- evs:
		return true
	case <-w.done:
		return false
	}
}

// Close ends the watch; it may be called more than once.
func (w *Watch) Close() {
	w.once.Do(func() {
		close(w.done)
		w.stop()
	})
}

// inotifyMask is what envd's watcher asks of the kernel (fsnotify's set).
const inotifyMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_MOVE_SELF |
	unix.IN_ATTRIB | unix.IN_MODIFY | unix.IN_DELETE | unix.IN_DELETE_SELF

// inotifyTree watches one directory, or a whole tree (recursive), with one inotify
// instance; directories made under a recursive watch are added as they appear. It runs
// wherever the paths mean what the client meant: inside the sandbox (the agent) or, without
// isolation, on the host. Only the goroutine calling next touches dirs.
type inotifyTree struct {
	f         *os.File
	root      string
	recursive bool
	dirs      map[int32]string
}

// newInotifyTree answers envd's errors: fs.ErrNotExist for a missing directory, ENOTDIR for
// anything else.
func newInotifyTree(root string, recursive bool) (*inotifyTree, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "watch", Path: root, Err: syscall.ENOTDIR}
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, &fs.PathError{Op: "inotify_init", Path: root, Err: err}
	}
	// Non-blocking, so Go's poller owns it and a Close ends a pending read.
	t := &inotifyTree{f: os.NewFile(uintptr(fd), "inotify"), root: root, recursive: recursive, dirs: map[int32]string{}}
	if err := t.add(root); err != nil {
		t.f.Close()
		return nil, err
	}
	return t, nil
}

func (t *inotifyTree) close() { t.f.Close() }

func (t *inotifyTree) add(dir string) error {
	wd, err := unix.InotifyAddWatch(int(t.f.Fd()), dir, inotifyMask|unix.IN_ONLYDIR|unix.IN_DONT_FOLLOW)
	if err != nil {
		return &fs.PathError{Op: "inotify_add_watch", Path: dir, Err: err}
	}
	t.dirs[int32(wd)] = dir
	if !t.recursive {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() {
			// A directory gone meanwhile, or one we may not read, is not the watch's failure.
			_ = t.add(path.Join(dir, e.Name()))
		}
	}
	return nil
}

// next waits for the next changes; an error ends the watch (closed, or the watched
// directory itself is gone).
func (t *inotifyTree) next() ([]WatchEvent, error) {
	buf := make([]byte, 64<<10)
	for {
		n, err := t.f.Read(buf)
		if err != nil {
			return nil, err
		}
		var evs []WatchEvent
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			wd := int32(binary.NativeEndian.Uint32(buf[off:]))
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			nameLen := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+nameLen]
			off += unix.SizeofInotifyEvent + nameLen
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
			dir, ok := t.dirs[wd]
			if mask&unix.IN_IGNORED != 0 {
				delete(t.dirs, wd)
				if dir == t.root {
					return evs, syscall.ENOENT
				}
				continue
			}
			if !ok {
				continue
			}
			full := path.Join(dir, string(name))
			rel, err := filepath.Rel(t.root, full)
			if err != nil {
				continue
			}
			// One change may carry several kinds, each its own event, in envd's order.
			for _, k := range []struct {
				mask uint32
				typ  string
			}{
				{unix.IN_CREATE | unix.IN_MOVED_TO, "EVENT_TYPE_CREATE"},
				{unix.IN_MOVED_FROM | unix.IN_MOVE_SELF, "EVENT_TYPE_RENAME"},
				{unix.IN_ATTRIB, "EVENT_TYPE_CHMOD"},
				{unix.IN_MODIFY, "EVENT_TYPE_WRITE"},
				{unix.IN_DELETE | unix.IN_DELETE_SELF, "EVENT_TYPE_REMOVE"},
			} {
				if mask&k.mask != 0 {
					evs = append(evs, WatchEvent{Name: rel, Type: k.typ})
				}
			}
			if t.recursive && mask&unix.IN_ISDIR != 0 && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				_ = t.add(full)
			}
		}
		if len(evs) > 0 {
			return evs, nil
		}
	}
}

// run feeds w from t until either ends.
func (t *inotifyTree) run(w *Watch, ch chan<- []WatchEvent) {
	defer close(ch)
	defer t.close()
	for {
		evs, err := t.next()
		if len(evs) > 0 && !w.deliver(ch, evs) {
			return
		}
		if err != nil {
			return
		}
	}
}

// Watch without isolation watches the host directory behind p.
func (f hostFiles) Watch(p string, recursive bool) (*Watch, error) {
	fp, err := f.resolve(p, false)
	if err != nil {
		return nil, err
	}
	defer fp.close()
	host := fp.host
	if fp.root != nil {
		// The sandbox's own directories are trusted code's without isolation; the walk
		// stays in them unless a symlink inside says otherwise, as the files API would.
		host = filepath.Join(fp.root.Name(), fp.rel)
	}
	t, err := newInotifyTree(host, recursive)
	if err != nil {
		return nil, remapPath(err, host, fp.display)
	}
	t.root = host
	w, ch := newWatch(t.close)
	go t.run(w, ch)
	return w, nil
}

// remapPath shows a host path in an error as the sandbox path the client asked for.
func remapPath(err error, host, display string) error {
	if pe, ok := err.(*fs.PathError); ok && pe.Path == host {
		return &fs.PathError{Op: pe.Op, Path: display, Err: pe.Err}
	}
	return err
}
