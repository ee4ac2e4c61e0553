package machine

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// What of the host a sandbox sees (docs/sandboxd.md, "The sandbox's view"):
// /usr and the /bin, /lib... beside it, the /etc entries programs need,
// /opt only when asked. No socket, FIFO or device file of the host may be
// reachable through them: a read-only bind stops writes, not a connect to
// a host service's socket or an open of a FIFO or a device.

// etcShared are the host's /etc entries a sandbox sees (shell patterns):
// the dynamic linker's, name service's and locale's files, time zones,
// certificates, shell start-up files, the `alternatives` links behind
// many commands, and the package managers' and tools' global settings.
// Nothing that names the machine (machine-id), configures its services or
// holds accounts: the sandbox has its own passwd, group, shadow, hostname
// and hosts (sandboxEtc).
var etcShared = []string{
	"alternatives", "bash.bashrc", "bash_completion.d", "ca-certificates", "ca-certificates.conf",
	"debian_version", "environment", "ethertypes", "fonts", "gai.conf", "gitconfig", "host.conf",
	"inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "locale.alias", "localtime", "login.defs",
	"lsb-release", "magic", "magic.mime", "manpath.config", "mime.types", "mtab", "networks", "npmrc",
	"nsswitch.conf", "os-release", "perl", "pip.conf", "pki", "profile", "profile.d", "protocols",
	"python3", "python3.*", "resolv.conf", "rpc", "services", "shells", "ssl", "terminfo", "timezone",
	"vim", "wgetrc",
}

// maxMasked bounds the special files sandboxd masks under its binds; more
// means the host keeps live services there, and sandboxd refuses to start.
const maxMasked = 64

// hostEntry is one host path a sandbox sees, bound read-only or (for a
// symbolic link) recreated.
type hostEntry struct {
	path   string
	link   string // the target, for a symbolic link
	isFile bool
}

// hostSystem are the host's directories bound whole: /usr, the /bin,
// /sbin and /lib* beside it (links into /usr on merged systems), and /opt
// when shared. Their special files are found once, at start (masks), and
// masked by every sandbox's agent.
type hostSystem struct {
	entries []hostEntry
	masks   []string
}

func hostSystemDirs(shareOpt bool, uid int) (hostSystem, error) {
	var sd hostSystem
	names := []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}
	if shareOpt {
		names = append(names, "/opt")
	}
	for _, d := range names {
		e, ok := statHostEntry(d)
		if !ok {
			continue
		}
		sd.entries = append(sd.entries, e)
		switch {
		case e.link != "":
		case d == "/opt":
			// Where software is installed by hand: looked at every start.
			sd.masks = append(sd.masks, specialFiles(d, uid)...)
		default:
			sd.masks = append(sd.masks, systemSpecialFiles(d, uid)...)
		}
	}
	if len(sd.masks) > maxMasked {
		return sd, fmt.Errorf("%d sockets, FIFOs or devices under the directories sandboxes see (%s, ...): "+
			"sandboxes could reach the host's services through them; move them elsewhere", len(sd.masks), strings.Join(sd.masks[:5], ", "))
	}
	return sd, nil
}

var (
	systemScanMu sync.Mutex
	systemScans  = map[string][]string{}
)

// systemSpecialFiles is specialFiles once per process for the directories
// the distribution owns: walking all of /usr takes a moment, and test
// binaries start many sandboxd.
func systemSpecialFiles(dir string, uid int) []string {
	key := dir + "/" + strconv.Itoa(uid)
	systemScanMu.Lock()
	defer systemScanMu.Unlock()
	if found, ok := systemScans[key]; ok {
		return found
	}
	found := specialFiles(dir, uid)
	systemScans[key] = found
	return found
}

// etcEntries lists the shared /etc entries present on this host, and the
// special files under them (for the start log: the agent finds and masks
// them itself at every boot, so one that appears later is masked too).
func etcEntries(uid int) ([]hostEntry, []string) {
	var out []hostEntry
	var masks []string
	for _, pat := range etcShared {
		matches, _ := filepath.Glob(filepath.Join("/etc", pat))
		for _, p := range matches {
			if e, ok := statHostEntry(p); ok {
				out = append(out, e)
				if e.link == "" && !e.isFile {
					masks = append(masks, specialFiles(p, uid)...)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, masks
}

// statHostEntry describes a host path to share: a directory, a regular
// file or a symbolic link. Anything else is never shared.
func statHostEntry(p string) (hostEntry, bool) {
	fi, err := os.Lstat(p)
	if err != nil {
		return hostEntry{}, false
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		return hostEntry{path: p, link: target}, err == nil
	case fi.IsDir():
		return hostEntry{path: p}, true
	case fi.Mode().IsRegular():
		return hostEntry{path: p, isFile: true}, true
	}
	return hostEntry{}, false
}

// specialFiles lists the sockets, FIFOs and devices under root that the
// sandbox's host uid could reach (uid -1: sandboxd's own).
func specialFiles(root string, uid int) []string {
	var out []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && p != root && !searchableBy(p, uid) {
			return filepath.SkipDir
		}
		if d.Type()&(fs.ModeSocket|fs.ModeNamedPipe|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// searchableBy reports whether uid (-1: this process) may search dir. A
// root sandboxd's sandbox uid owns nothing of the host and has no groups,
// so it is one of "others".
func searchableBy(dir string, uid int) bool {
	if uid < 0 {
		return unix.Access(dir, unix.X_OK) == nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid {
		return fi.Mode().Perm()&0o100 != 0
	}
	return fi.Mode().Perm()&0o001 != 0
}

// bindArgs are bubblewrap's arguments for host entries.
func bindArgs(entries []hostEntry) []string {
	var args []string
	for _, e := range entries {
		if e.link != "" {
			args = append(args, "--symlink", e.link, e.path)
		} else {
			args = append(args, "--ro-bind", e.path, e.path)
		}
	}
	return args
}

// maskSpecialFiles is the agent's: it binds /dev/null over every socket,
// FIFO and device under the sandbox's /etc and over each of paths (the
// system directories' ones, found at start), so that a connect is refused
// and an open reaches nothing of the host. A path gone meanwhile needs no
// mask.
func maskSpecialFiles(paths []string) error {
	_ = filepath.WalkDir("/etc", func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&(fs.ModeSocket|fs.ModeNamedPipe|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			paths = append(paths, p)
		}
		return nil
	})
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode()&(fs.ModeSocket|fs.ModeNamedPipe|fs.ModeDevice|fs.ModeCharDevice) == 0 {
			continue
		}
		if err := unix.Mount("/dev/null", p, "", unix.MS_BIND, ""); err != nil && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("mask %s: %w", p, err)
		}
	}
	return nil
}
