package machine

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const HomeDir = "/home/user"

// CleanSandboxPath makes a client path absolute as the sandbox sees it:
// relative paths and "~" are under the user's home, as envd resolves them.
func CleanSandboxPath(p string) string {
	switch {
	case p == "" || p == "~":
		return HomeDir
	case strings.HasPrefix(p, "~/"):
		p = HomeDir + p[1:]
	case !path.IsAbs(p):
		p = HomeDir + "/" + p
	}
	return path.Clean(p)
}

// SplitSandboxPath splits a sandbox path into one of the sandbox's own
// writable trees (/home/user or /tmp) and the path inside it.
func SplitSandboxPath(p string) (rel, under string, ok bool) {
	p = CleanSandboxPath(p)
	for _, base := range []string{HomeDir, "/tmp"} {
		if p == base {
			return ".", base, true
		}
		if strings.HasPrefix(p, base+"/") {
			return p[len(base)+1:], base, true
		}
	}
	return "", "", false
}

// FileOps is envd's file access to one sandbox. Paths are absolute and
// clean, as the sandbox sees them (cleanSandboxPath). Errors wrap the
// errno of the failure, so fs.ErrNotExist and friends work, plus
// syscall.EISDIR, ENOTDIR, EROFS and ENOSPC for the cases envd words itself.
type FileOps interface {
	// Entry describes p itself (a symlink is not followed).
	Entry(p string) (EntryInfo, error)
	// IsDir follows symlinks.
	IsDir(p string) (bool, error)
	// Open opens a file for reading; a directory is EISDIR.
	Open(p string) (io.ReadCloser, int64, error)
	// Create opens a file for writing, truncated, making its parents.
	Create(p string) (io.WriteCloser, error)
	// Mkdir makes p and its parents; an existing p is fs.ErrExist.
	Mkdir(p string) (EntryInfo, error)
	// Move renames src to dst, making dst's parents.
	Move(src, dst string) (EntryInfo, error)
	// List describes what is under directory p, depth levels deep.
	List(p string, depth int) ([]EntryInfo, error)
	// Remove deletes p and everything below it.
	Remove(p string) error
	// Watch reports changes in directory p (with recursive, in every directory below it)
	// until closed; a missing p is fs.ErrNotExist, a file ENOTDIR.
	Watch(p string, recursive bool) (*Watch, error)
}

// IsProtectedPath reports the paths no client may remove: the roots of the
// sandbox's own trees and the root itself.
func IsProtectedPath(p string) bool {
	return p == "/" || p == HomeDir || p == "/tmp"
}

// systemDirs are the host directories a sandbox without isolation reads
// through the files API.
var systemDirs = []string{"/usr", "/etc", "/opt", "/var", "/bin", "/sbin", "/lib", "/lib64"}

// hostFiles is FileOps for IsolationNone: /home/user and /tmp are the
// sandbox's own directories, opened through os.Root so that no symlink
// inside them reaches the rest of the host; system directories are the
// host's, read-only; anything else does not exist. An isolated sandbox uses
// its agent instead, which sees exactly what the sandbox sees.
type hostFiles struct {
	dir string
}

// fsPath is a resolved path: inside a root, or a read-only host path.
type fsPath struct {
	display string // the path as the sandbox sees it
	root    *os.Root
	rel     string
	host    string // for system paths, root == nil
}

func (p *fsPath) close() {
	if p.root != nil {
		p.root.Close()
	}
}

func (f hostFiles) resolve(p string, write bool) (*fsPath, error) {
	display := CleanSandboxPath(p)
	if rel, under, ok := SplitSandboxPath(display); ok {
		sub := "home"
		if under == "/tmp" {
			sub = "tmp"
		}
		dir := filepath.Join(f.dir, sub)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, err
		}
		return &fsPath{display: display, root: root, rel: rel}, nil
	}
	for _, d := range systemDirs {
		if display == d || strings.HasPrefix(display, d+"/") {
			if write {
				return nil, &fs.PathError{Op: "write", Path: display, Err: syscall.EROFS}
			}
			return &fsPath{display: display, host: display}, nil
		}
	}
	return nil, &fs.PathError{Op: "open", Path: display, Err: syscall.ENOENT}
}

func (p *fsPath) stat() (fs.FileInfo, error) {
	if p.root != nil {
		return p.root.Stat(p.rel)
	}
	return os.Stat(p.host)
}

func (p *fsPath) lstat() (fs.FileInfo, error) {
	if p.root != nil {
		return p.root.Lstat(p.rel)
	}
	return os.Lstat(p.host)
}

func (p *fsPath) openFile() (*os.File, error) {
	if p.root != nil {
		return p.root.Open(p.rel)
	}
	return os.Open(p.host)
}

// child resolves a name inside directory p.
func (p *fsPath) child(name string) *fsPath {
	c := *p
	c.display = path.Join(p.display, name)
	if p.root != nil {
		c.rel = path.Join(p.rel, name)
	} else {
		c.host = path.Join(p.host, name)
	}
	return &c
}

func (p *fsPath) entry() (EntryInfo, error) {
	fi, err := p.lstat()
	if err != nil {
		return EntryInfo{}, err
	}
	e := newEntry(p.display, fi, p.resolveLink, func(uid, gid uint32) (string, string) { return idName(uid), idName(gid) })
	e.Metadata = p.metadata()
	return e, nil
}

// resolveLink resolves the symlink p inside its root, as the sandbox would see it.
func (p *fsPath) resolveLink() (string, fs.FileInfo, error) {
	if p.root == nil {
		t, err := filepath.EvalSymlinks(p.host)
		if err != nil {
			return "", nil, err
		}
		fi, err := os.Stat(t)
		return t, fi, err
	}
	target, err := p.root.Readlink(p.rel)
	if err != nil {
		return "", nil, err
	}
	if !path.IsAbs(target) {
		target = path.Join(path.Dir(p.display), target)
	}
	fi, err := p.stat()
	return path.Clean(target), fi, err
}

// metadata reads p's metadata through a descriptor opened inside its root, so that no
// symlink takes the read out of the sandbox's directories. Only files and directories:
// opening a FIFO would block.
func (p *fsPath) metadata() map[string]string {
	fi, err := p.stat()
	if err != nil || !(fi.Mode().IsRegular() || fi.IsDir()) {
		return nil
	}
	f, err := p.openFile()
	if err != nil {
		return nil
	}
	defer f.Close()
	return FileMetadata(f)
}

// sub returns the resolved path of q, a path below p.display.
func (p *fsPath) sub(q string) *fsPath {
	if q == p.display {
		return p
	}
	return p.child(strings.TrimPrefix(q, p.display+"/"))
}

func (f hostFiles) Entry(p string) (EntryInfo, error) {
	fp, err := f.resolve(p, false)
	if err != nil {
		return EntryInfo{}, err
	}
	defer fp.close()
	return fp.entry()
}

func (f hostFiles) IsDir(p string) (bool, error) {
	fp, err := f.resolve(p, false)
	if err != nil {
		return false, err
	}
	defer fp.close()
	fi, err := fp.stat()
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

func (f hostFiles) Open(p string) (io.ReadCloser, int64, error) {
	fp, err := f.resolve(p, false)
	if err != nil {
		return nil, 0, err
	}
	defer fp.close()
	fi, err := fp.stat()
	if err != nil {
		return nil, 0, err
	}
	if fi.IsDir() {
		return nil, 0, &fs.PathError{Op: "open", Path: fp.display, Err: syscall.EISDIR}
	}
	file, err := fp.openFile()
	if err != nil {
		return nil, 0, err
	}
	return file, fi.Size(), nil
}

func (f hostFiles) Create(p string) (io.WriteCloser, error) {
	fp, err := f.resolve(p, true)
	if err != nil {
		return nil, err
	}
	defer fp.close()
	if fi, err := fp.stat(); err == nil && fi.IsDir() {
		return nil, &fs.PathError{Op: "open", Path: fp.display, Err: syscall.EISDIR}
	}
	if dir := path.Dir(fp.rel); dir != "." {
		if err := fp.root.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	file, err := fp.root.OpenFile(fp.rel, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return file, nil
}

func (f hostFiles) Mkdir(p string) (EntryInfo, error) {
	fp, err := f.resolve(p, true)
	if err != nil {
		return EntryInfo{}, err
	}
	defer fp.close()
	if _, err := fp.lstat(); err == nil {
		return EntryInfo{}, &fs.PathError{Op: "mkdir", Path: fp.display, Err: syscall.EEXIST}
	}
	if err := fp.root.MkdirAll(fp.rel, 0o755); err != nil {
		return EntryInfo{}, err
	}
	return fp.entry()
}

func (f hostFiles) Move(src, dst string) (EntryInfo, error) {
	s, err := f.resolve(src, true)
	if err != nil {
		return EntryInfo{}, err
	}
	defer s.close()
	d, err := f.resolve(dst, true)
	if err != nil {
		return EntryInfo{}, err
	}
	defer d.close()
	if _, err := s.lstat(); err != nil {
		return EntryInfo{}, err
	}
	if s.root.Name() != d.root.Name() {
		return EntryInfo{}, &os.LinkError{Op: "rename", Old: s.display, New: d.display, Err: syscall.EXDEV}
	}
	if dir := path.Dir(d.rel); dir != "." {
		if err := d.root.MkdirAll(dir, 0o755); err != nil {
			return EntryInfo{}, err
		}
	}
	if err := s.root.Rename(s.rel, d.rel); err != nil {
		return EntryInfo{}, err
	}
	return d.entry()
}

func (f hostFiles) List(p string, depth int) ([]EntryInfo, error) {
	fp, err := f.resolve(p, false)
	if err != nil {
		return nil, err
	}
	defer fp.close()
	fi, err := fp.stat()
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &fs.PathError{Op: "list", Path: fp.display, Err: syscall.ENOTDIR}
	}
	names := func(q string) ([]string, error) {
		d, err := fp.sub(q).openFile()
		if err != nil {
			return nil, err
		}
		defer d.Close()
		return d.Readdirnames(-1)
	}
	return listTree(fp.display, depth, names, func(q string) (EntryInfo, error) { return fp.sub(q).entry() })
}

func (f hostFiles) Remove(p string) error {
	fp, err := f.resolve(p, true)
	if err != nil {
		return err
	}
	defer fp.close()
	if _, err := fp.lstat(); err != nil {
		return err
	}
	return fp.root.RemoveAll(fp.rel)
}

// listTree lists directory p (the caller has checked it is one) depth
// levels deep with readDir and entry, which both sides of the agent
// provide. Entries that vanish meanwhile are skipped.
func listTree(p string, depth int, readDir func(string) ([]string, error), entry func(string) (EntryInfo, error)) ([]EntryInfo, error) {
	entries := []EntryInfo{}
	var walk func(dir string, level int) error
	walk = func(dir string, level int) error {
		names, err := readDir(dir)
		if err != nil {
			return err
		}
		// envd lists by name, parents before their children.
		slices.Sort(names)
		for _, name := range names {
			e, err := entry(path.Join(dir, name))
			if err != nil {
				continue
			}
			entries = append(entries, e)
			if e.Type == "FILE_TYPE_DIRECTORY" && level < depth {
				if err := walk(e.Path, level+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(p, 1); err != nil {
		return nil, err
	}
	return entries, nil
}

// EntryInfo is envd's EntryInfo in protobuf JSON (int64 as a string,
// Timestamp as RFC 3339).
type EntryInfo struct {
	Name          string    `json:"name"`
	Type          string    `json:"type"`
	Path          string    `json:"path"`
	Size          string    `json:"size"`
	Mode          uint32    `json:"mode"`
	Permissions   string    `json:"permissions"`
	Owner         string    `json:"owner"`
	Group         string    `json:"group"`
	ModifiedTime  time.Time `json:"modifiedTime"`
	SymlinkTarget *string   `json:"symlinkTarget,omitempty"`
	// Metadata is the file's user.e2b.* extended attributes, prefix stripped.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// newEntry describes fi (an lstat result) found at display. A symlink is described as envd
// does: its target resolved to an absolute path (the link's own path when it cannot be
// resolved), with the target's type and mode; resolve answers both.
func newEntry(display string, fi fs.FileInfo, resolve func() (string, fs.FileInfo, error), names func(uid, gid uint32) (string, string)) EntryInfo {
	e := EntryInfo{
		Name: path.Base(display), Path: display, Size: strconv.FormatInt(fi.Size(), 10),
		Mode: uint32(fi.Mode().Perm()), Permissions: fi.Mode().String(), Owner: "root", Group: "root",
		ModifiedTime: fi.ModTime().UTC(), Type: fileType(fi),
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = names(st.Uid, st.Gid)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, tfi, err := resolve()
		if target == "" {
			target = display
		}
		e.SymlinkTarget = &target
		e.Type, e.Mode = "FILE_TYPE_UNSPECIFIED", 0
		if err == nil {
			e.Type, e.Mode = fileType(tfi), uint32(tfi.Mode().Perm())
		}
	}
	return e
}

func fileType(fi fs.FileInfo) string {
	switch {
	case fi.Mode().IsRegular():
		return "FILE_TYPE_FILE"
	case fi.IsDir():
		return "FILE_TYPE_DIRECTORY"
	case fi.Mode()&fs.ModeSymlink != 0:
		return "FILE_TYPE_SYMLINK"
	}
	return "FILE_TYPE_UNSPECIFIED"
}

// idName names a uid or gid without isolation: commands run as sandboxd's
// own user, so anything but root is shown by number.
func idName(id uint32) string {
	if id == 0 {
		return "root"
	}
	return strconv.FormatUint(uint64(id), 10)
}

// IsErrno reports whether err is, or wraps, one of errnos.
func IsErrno(err error, errnos ...syscall.Errno) bool {
	for _, n := range errnos {
		if errors.Is(err, n) {
			return true
		}
	}
	return false
}
