package machine

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A root sandboxd runs sandboxes as the host uids of its range (UIDBase to
// UIDBase+UIDRangeSize-1). Two instances handing out the same uid would let
// a sandbox of one own another's files, so each one holds an exclusive
// lock on a file naming its range for as long as it runs, and refuses to
// start when a live instance's range overlaps its own.

// uidLockDir holds the lock files of the root sandboxd instances running
// on this host (/run is per boot, so nothing outlives a reboot).
var uidLockDir = "/run/sandboxd"

// errUIDRangeTaken is wrapped by New's error when another running sandboxd
// holds an overlapping uid range.
var errUIDRangeTaken = errors.New("uid range in use")

// ErrUIDRangeTaken reports whether New failed because another running
// sandboxd uses host uids of this one's range (give it another UIDBase).
func ErrUIDRangeTaken(err error) bool { return errors.Is(err, errUIDRangeTaken) }

// lockUIDRange claims [base, base+UIDRangeSize) for this process; the
// returned file holds the claim until it is closed (or the process ends).
func lockUIDRange(base int, stateDir string) (*os.File, error) {
	if err := os.MkdirAll(uidLockDir, 0o755); err != nil {
		return nil, fmt.Errorf("uid range lock: %w", err)
	}
	// The directory's own lock makes the check and the claim one step.
	dir, err := os.Open(uidLockDir)
	if err != nil {
		return nil, fmt.Errorf("uid range lock: %w", err)
	}
	defer dir.Close()
	if err := unix.Flock(int(dir.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("uid range lock: %w", err)
	}
	entries, err := os.ReadDir(uidLockDir)
	if err != nil {
		return nil, fmt.Errorf("uid range lock: %w", err)
	}
	end := base + UIDRangeSize - 1
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "uids-") {
			continue
		}
		holder, live := readUIDLock(filepath.Join(uidLockDir, e.Name()))
		if !live {
			continue
		}
		if holder.base <= end && base <= holder.base+UIDRangeSize-1 {
			return nil, fmt.Errorf("%w: host uids %d-%d overlap %d-%d, the range of the sandboxd running with --state-dir %s (pid %d): "+
				"give this one another --uid-base, at least %d apart", errUIDRangeTaken, base, end, holder.base, holder.base+UIDRangeSize-1,
				holder.stateDir, holder.pid, UIDRangeSize)
		}
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	p := filepath.Join(uidLockDir, "uids-"+strconv.Itoa(base)+".lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("uid range lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("uid range lock %s: %w", p, err)
	}
	if _, err := fmt.Fprintf(f, "%d %d %s\n", base, os.Getpid(), abs); err != nil {
		f.Close()
		return nil, fmt.Errorf("uid range lock: %w", err)
	}
	return f, nil
}

type uidHolder struct {
	base, pid int
	stateDir  string
}

// readUIDLock reads a lock file and reports whether its holder still runs
// (holds its lock); a stale file is removed.
func readUIDLock(p string) (uidHolder, bool) {
	f, err := os.Open(p)
	if err != nil {
		return uidHolder{}, false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		os.Remove(p)
		return uidHolder{}, false
	}
	var h uidHolder
	if _, err := fmt.Fscanf(f, "%d %d %s", &h.base, &h.pid, &h.stateDir); err != nil {
		// Being written: its name says the base.
		h.base, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(p), "uids-"), ".lock"))
	}
	return h, true
}

// unlockUIDRange gives the range up.
func unlockUIDRange(f *os.File) {
	if f == nil {
		return
	}
	os.Remove(f.Name())
	f.Close()
}
