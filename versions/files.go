package versions

import (
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"sandman/apperr"
)

// Limits of one version's files (an upload's too). They keep a project's files well inside
// what a sandbox upload and a database row handle comfortably.
const (
	MaxFiles      = 500
	MaxTotalBytes = 20 << 20
	MaxFileBytes  = 5 << 20
	MaxPathLength = 255
)

// File is one stored source file; Path is relative to the project root, with forward slashes.
type File struct {
	Path    string
	Content []byte
	// Executable is the file's executable bit (a zip's mode carries it).
	Executable bool
}

// FileError says why one file was rejected.
type FileError struct {
	Path    string
	Message string
}

// CheckPath reports why p cannot be a project file path, or nil when it can.
func CheckPath(p string) error {
	switch {
	case p == "":
		return errors.New("the path is empty")
	case len(p) > MaxPathLength:
		return fmt.Errorf("the path is longer than %d bytes", MaxPathLength)
	case !utf8.ValidString(p):
		return errors.New("the path is not valid UTF-8")
	case strings.HasPrefix(p, "/"):
		return errors.New("absolute paths are not allowed")
	case strings.Contains(p, `\`):
		return errors.New(`use "/" between folders, not "\"`)
	}
	for _, r := range p {
		if unicode.IsControl(r) {
			return errors.New("the path contains a control character")
		}
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return errors.New(`".." is not allowed in paths`)
		}
	}
	if path.Clean(p) != p || p == "." {
		return errors.New("the path is not in its simplest form (no \".\", empty folders or trailing \"/\")")
	}
	return nil
}

// CheckFiles applies every upload rule and returns one error per rejected file (an empty path
// for rules about the whole upload). A nil result means the files can be stored.
func CheckFiles(files []File) []FileError {
	var errs []FileError
	if len(files) == 0 {
		return []FileError{{Message: "Choose at least one file to upload."}}
	}
	if len(files) > MaxFiles {
		errs = append(errs, FileError{Message: fmt.Sprintf("An upload holds at most %d files; this one has %d.", MaxFiles, len(files))})
	}
	var total int64
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		total += int64(len(f.Content))
		if err := CheckPath(f.Path); err != nil {
			errs = append(errs, FileError{Path: f.Path, Message: capitalize(err.Error()) + "."})
			continue
		}
		if seen[f.Path] {
			errs = append(errs, FileError{Path: f.Path, Message: "This path appears twice."})
			continue
		}
		seen[f.Path] = true
		if len(f.Content) > MaxFileBytes {
			errs = append(errs, FileError{Path: f.Path, Message: fmt.Sprintf("The file is %s; the limit is %s.", size(int64(len(f.Content))), size(MaxFileBytes))})
		}
	}
	// A file and a folder may not share a name: "a" and "a/b" cannot both exist on disk.
	for p := range seen {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if seen[dir] {
				errs = append(errs, FileError{Path: dir, Message: "This is both a file and a folder in the upload."})
			}
		}
	}
	if total > MaxTotalBytes {
		errs = append(errs, FileError{Message: fmt.Sprintf("The upload is %s; the limit is %s in all.", size(total), size(MaxTotalBytes))})
	}
	return errs
}

// Budget is one upload request's allowance: the bytes of its files once unpacked, and their
// number, shared by every part and every archive of the request. It is charged as bytes are
// read (decompressed bytes as they come out of the decompressor, whatever an archive's headers
// claim), so an upload stops at its first overrun, before it holds more than the limit in
// memory. The zero value is not usable: NewBudget.
type Budget struct {
	bytesLeft int64
	filesLeft int
}

// NewBudget returns the allowance of one upload: MaxTotalBytes and MaxFiles.
func NewBudget() *Budget { return &Budget{bytesLeft: MaxTotalBytes, filesLeft: MaxFiles} }

// ErrTooManyBytes and ErrTooManyFiles are the budget's overruns: the whole upload is refused
// (413), nothing is stored.
var (
	ErrTooManyBytes = &apperr.Error{Kind: apperr.KindTooLarge, Code: codeTooManyBytes,
		Message: fmt.Sprintf("The upload holds more than %s once unpacked (a zip counts by the size of what is inside); the limit is %s. "+
			"Remove large files such as build output or node_modules and try again.", size(MaxTotalBytes), size(MaxTotalBytes))}
	ErrTooManyFiles = &apperr.Error{Kind: apperr.KindTooLarge, Code: CodeTooManyFiles,
		Message: fmt.Sprintf("The upload holds more than %d files (a zip counts every file inside); the limit is %d. "+
			"Remove folders such as node_modules and try again.", MaxFiles, MaxFiles)}
)

// ReadFile reads one file whole, charging it to the budget. A file over MaxFileBytes is read
// only that far: its content is MaxFileBytes+1 bytes long, and CheckFiles refuses it.
func (b *Budget) ReadFile(r io.Reader) ([]byte, error) {
	if b.filesLeft <= 0 {
		return nil, ErrTooManyFiles
	}
	b.filesLeft--
	return io.ReadAll(io.LimitReader(&charged{r: r, b: b}, MaxFileBytes+1))
}

// charged reads from r, charging every byte read to b; the read that overruns b fails.
type charged struct {
	r io.Reader
	b *Budget
}

func (c *charged) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.b.bytesLeft -= int64(n)
	if c.b.bytesLeft < 0 {
		return 0, ErrTooManyBytes
	}
	return n, err
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
