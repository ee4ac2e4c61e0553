package sandboxd

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const homeDir = "/home/user"

// cleanSandboxPath makes a client path absolute as the sandbox sees it:
// relative paths and "~" are under the user's home, as envd resolves them.
func cleanSandboxPath(p string) string {
	switch {
	case p == "" || p == "~":
		return homeDir
	case strings.HasPrefix(p, "~/"):
		p = homeDir + p[1:]
	case !path.IsAbs(p):
		p = homeDir + "/" + p
	}
	return path.Clean(p)
}

// splitSandboxPath splits a sandbox path into one of the sandbox's own
// writable trees (/home/user or /tmp) and the path inside it.
func splitSandboxPath(p string) (rel, under string, ok bool) {
	p = cleanSandboxPath(p)
	for _, base := range []string{homeDir, "/tmp"} {
		if p == base {
			return ".", base, true
		}
		if strings.HasPrefix(p, base+"/") {
			return p[len(base)+1:], base, true
		}
	}
	return "", "", false
}

// systemDirs are the host directories every sandbox sees read-only.
var systemDirs = []string{"/usr", "/etc", "/opt", "/var", "/bin", "/sbin", "/lib", "/lib64"}

// sandboxFS gives file operations the sandbox's view: /home/user and /tmp
// are the sandbox's own directories, opened through os.Root so that no
// symlink inside them reaches the host; system directories are read-only.
type sandboxFS struct {
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

var errReadOnly = errors.New("read-only file system")

func (f sandboxFS) resolve(p string, write bool) (*fsPath, error) {
	display := cleanSandboxPath(p)
	if rel, under, ok := splitSandboxPath(display); ok {
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
				return nil, &fs.PathError{Op: "write", Path: display, Err: errReadOnly}
			}
			return &fsPath{display: display, host: display}, nil
		}
	}
	return nil, &fs.PathError{Op: "open", Path: display, Err: fs.ErrNotExist}
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

func (p *fsPath) open() (*os.File, error) {
	if p.root != nil {
		return p.root.Open(p.rel)
	}
	return os.Open(p.host)
}

func (p *fsPath) readlink() (string, error) {
	if p.root != nil {
		return p.root.Readlink(p.rel)
	}
	return os.Readlink(p.host)
}

// create opens the file for writing, making its parents, truncating it.
func (p *fsPath) create() (*os.File, error) {
	if dir := path.Dir(p.rel); dir != "." {
		if err := p.root.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	return p.root.OpenFile(p.rel, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
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

// entryInfo is envd's EntryInfo in protobuf JSON (int64 as a string,
// Timestamp as RFC 3339).
type entryInfo struct {
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
}

func (p *fsPath) entry() (entryInfo, error) {
	fi, err := p.lstat()
	if err != nil {
		return entryInfo{}, err
	}
	e := entryInfo{
		Name: path.Base(p.display), Path: p.display, Size: strconv.FormatInt(fi.Size(), 10),
		Mode: uint32(fi.Mode().Perm()), Permissions: fi.Mode().String(), Owner: "root", Group: "root",
		ModifiedTime: fi.ModTime().UTC(), Type: "FILE_TYPE_FILE",
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = idName(st.Uid), idName(st.Gid)
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = "FILE_TYPE_SYMLINK"
		if t, err := p.readlink(); err == nil {
			e.SymlinkTarget = &t
		}
	case fi.IsDir():
		e.Type = "FILE_TYPE_DIRECTORY"
	}
	return e, nil
}

// idName names a uid or gid: sandbox processes run as root, so anything else
// is shown by number.
func idName(id uint32) string {
	if id == 0 {
		return "root"
	}
	return strconv.FormatUint(uint64(id), 10)
}
