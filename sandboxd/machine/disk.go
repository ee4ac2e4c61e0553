package machine

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A sandbox's writable files (its home and /tmp) live in a sparse ext4
// image of --disk-limit bytes, loop-mounted on the sandbox's directory
// while it runs: writes past the limit fail with ENOSPC inside, and nothing
// a sandbox writes can fill the host's disk. See docs/sandboxd.md, "Disk".

// toolEnv is the environment of the helpers sandboxd runs (mkfs, mount):
// never its own, which holds the API key.
var toolEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}

// diskTools checks that images can be made and mounted here.
func diskTools() error {
	if os.Geteuid() != 0 {
		return errors.New("mounting a disk image needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "mount"} {
		if _, err := lookTool(tool); err != nil {
			return fmt.Errorf("%s not found (apt-get install e2fsprogs mount)", tool)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("no loop devices: %w", err)
	}
	return nil
}

func lookTool(name string) (string, error) {
	for _, dir := range filepath.SplitList(strings.TrimPrefix(toolEnv[0], "PATH=")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

func runTool(name string, args ...string) error {
	p, err := lookTool(name)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(p, args...)
	cmd.Env = toolEnv
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CreateImage makes a sparse ext4 image of size bytes whose root belongs
// to uid:gid. Inode tables are left uninitialised (and the mount keeps the
// kernel from zeroing them later), so the image starts at a few megabytes.
func CreateImage(img string, size int64, uid, gid int) error {
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = runTool("mkfs.ext4", "-q", "-F", "-m", "0",
			"-E", fmt.Sprintf("lazy_itable_init=1,lazy_journal_init=1,root_owner=%d:%d", uid, gid), img)
	}
	if err != nil {
		os.Remove(img)
		return fmt.Errorf("create disk image: %w", err)
	}
	return nil
}

// mountImage mounts img on dir, with discard: a file deleted inside frees
// its blocks in the image on the host too (the loop device punches holes).
// util-linux's mount reuses the loop device
// of an image that is still attached rather than attaching a second one,
// so one image never has two live filesystems on it.
func mountImage(img, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := runTool("mount", "-t", "ext4", "-o", "loop,nosuid,nodev,noinit_itable,discard", img, dir); err != nil {
		return fmt.Errorf("mount disk image: %w", err)
	}
	return nil
}

// Unmount detaches dir. Busy means someone still holds a file of the
// sandbox open, which sandboxd avoids; after a few tries the mount is
// detached lazily and the image is released when the last file closes.
func Unmount(dir string) error {
	var err error
	for range 20 {
		if err = unix.Unmount(dir, 0); err == nil || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if derr := unix.Unmount(dir, unix.MNT_DETACH); derr != nil {
		return fmt.Errorf("unmount %s: %w", dir, derr)
	}
	return fmt.Errorf("unmount %s: %w (detached lazily)", dir, err)
}

// MountsUnder lists mount points at or below dir, deepest first.
func MountsUnder(dir string) ([]string, error) {
	mounts, err := readMountinfo()
	if err != nil {
		return nil, err
	}
	var out []string
	for i := len(mounts) - 1; i >= 0; i-- {
		if p := mounts[i].point; p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out, nil
}

// FormatBytes formats a byte count for logs and errors: exactly when it is
// whole GiB or MiB, else to a tenth.
func FormatBytes(n int64) string {
	const gib, mib = 1 << 30, 1 << 20
	switch {
	case n != 0 && n%gib == 0:
		return strconv.FormatInt(n/gib, 10) + " GiB"
	case n >= gib:
		return strconv.FormatFloat(float64(n)/gib, 'f', 1, 64) + " GiB"
	case n != 0 && n%mib == 0:
		return strconv.FormatInt(n/mib, 10) + " MiB"
	case n >= mib:
		return strconv.FormatFloat(float64(n)/mib, 'f', 1, 64) + " MiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}
