package machine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// File metadata is envd's: user-defined key/value pairs kept as extended attributes under
// user.e2b. on the file itself, so they travel with it (renames) and programs in the sandbox
// can read or set them (docs/sandboxd.md, "Files").
const (
	MetadataXattrPrefix = "user.e2b."
	// MaxMetadataKeyLen is the kernel's 255-byte xattr name less the prefix.
	MaxMetadataKeyLen = 255 - len(MetadataXattrPrefix)
	// MaxMetadataTotalLen keeps a file's metadata within one ext4 block, where an inode's
	// attributes must fit: past it the write would fail late, after the file was written.
	MaxMetadataTotalLen = 4096
)

// ValidateMetadata refuses what envd refuses: empty or over-long keys, bytes outside
// printable ASCII, more than MaxMetadataTotalLen in all (names with their prefix, values).
func ValidateMetadata(md map[string]string) error {
	total := 0
	for k, v := range md {
		if k == "" {
			return errors.New("metadata key must not be empty")
		}
		if len(k) > MaxMetadataKeyLen {
			return fmt.Errorf("metadata key %q exceeds %d bytes", k, MaxMetadataKeyLen)
		}
		if err := printableASCII("key", k); err != nil {
			return err
		}
		if err := printableASCII(fmt.Sprintf("value for key %q", k), v); err != nil {
			return err
		}
		total += len(MetadataXattrPrefix) + len(k) + len(v)
	}
	if total > MaxMetadataTotalLen {
		return fmt.Errorf("total metadata size %d exceeds %d bytes", total, MaxMetadataTotalLen)
	}
	return nil
}

func printableASCII(what, s string) error {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("metadata %s contains non-printable-ASCII byte 0x%02x at offset %d", what, c, i)
		}
	}
	return nil
}

// fder is a file sandboxd holds open: FileOps.Create's writers are.
type fder interface{ Fd() uintptr }

// WriteMetadata makes md the whole metadata of w, a file FileOps.Create opened: keys not in md
// are removed, so an overwrite without metadata leaves none (O_TRUNC keeps attributes). It
// works on the descriptor, so a rename racing the upload cannot redirect it. A filesystem
// without extended attributes keeps no metadata and is no error, as with envd.
func WriteMetadata(w io.Writer, md map[string]string) error {
	if err := ValidateMetadata(md); err != nil {
		return err
	}
	f, ok := w.(fder)
	if !ok {
		return nil
	}
	fd := int(f.Fd())
	names, err := xattrNames(func(b []byte) (int, error) { return unix.Flistxattr(fd, b) })
	if err != nil {
		return noXattrs(err)
	}
	for _, name := range names {
		if k, ok := strings.CutPrefix(name, MetadataXattrPrefix); ok {
			if _, keep := md[k]; !keep {
				if err := unix.Fremovexattr(fd, name); err != nil && !errors.Is(err, unix.ENODATA) {
					return err
				}
			}
		}
	}
	for k, v := range md {
		if err := unix.Fsetxattr(fd, MetadataXattrPrefix+k, []byte(v), 0); err != nil {
			return noXattrs(err)
		}
	}
	return nil
}

// FileMetadata reads back the metadata of w, a file FileOps.Create opened (nil: none).
func FileMetadata(w io.Writer) map[string]string {
	f, ok := w.(fder)
	if !ok {
		return nil
	}
	fd := int(f.Fd())
	return readMetadata(
		func(b []byte) (int, error) { return unix.Flistxattr(fd, b) },
		func(name string, b []byte) (int, error) { return unix.Fgetxattr(fd, name, b) })
}

// pathMetadata reads the metadata of p, following symlinks as envd does (nil: none).
func pathMetadata(p string) map[string]string {
	return readMetadata(
		func(b []byte) (int, error) { return unix.Listxattr(p, b) },
		func(name string, b []byte) (int, error) { return unix.Getxattr(p, name, b) })
}

// readMetadata is best effort, as envd's: an entry is described without metadata it cannot
// read, and values that are not UTF-8 (set from inside with setfattr) are left out, since
// the answer is JSON.
func readMetadata(list func([]byte) (int, error), get func(string, []byte) (int, error)) map[string]string {
	names, err := xattrNames(list)
	if err != nil {
		return nil
	}
	var md map[string]string
	for _, name := range names {
		k, ok := strings.CutPrefix(name, MetadataXattrPrefix)
		if !ok {
			continue
		}
		v, err := xattrValue(name, get)
		if err != nil || !utf8.ValidString(k) || !utf8.Valid(v) {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		md[k] = string(v)
	}
	return md
}

func xattrNames(list func([]byte) (int, error)) ([]string, error) {
	b, err := growing(list)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, n := range bytes.Split(b, []byte{0}) {
		if len(n) > 0 {
			names = append(names, string(n))
		}
	}
	return names, nil
}

func xattrValue(name string, get func(string, []byte) (int, error)) ([]byte, error) {
	return growing(func(b []byte) (int, error) { return get(name, b) })
}

// growing calls an xattr getter with a buffer large enough for its answer: asked with none,
// the kernel says the size, which may grow before the second call (ERANGE: ask again).
func growing(call func([]byte) (int, error)) ([]byte, error) {
	for range 4 {
		n, err := call(nil)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, nil
		}
		b := make([]byte, n)
		n, err = call(b)
		if errors.Is(err, unix.ERANGE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return b[:n], nil
	}
	return nil, unix.ERANGE
}

// noXattrs turns "this filesystem has no extended attributes" into no error.
func noXattrs(err error) error {
	if errors.Is(err, syscall.ENOTSUP) || errors.Is(err, syscall.EOPNOTSUPP) {
		return nil
	}
	return err
}
