package projects

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"sandman/apperr"
)

// Upload limits. They keep one project's files well inside what a sandbox upload and a
// database row handle comfortably.
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
	ErrTooManyBytes = &apperr.Error{Kind: apperr.KindTooLarge, Code: "upload_too_large",
		Message: fmt.Sprintf("The upload holds more than %s once unpacked (a zip counts by the size of what is inside); the limit is %s. "+
			"Remove large files such as build output or node_modules and try again.", size(MaxTotalBytes), size(MaxTotalBytes))}
	ErrTooManyFiles = &apperr.Error{Kind: apperr.KindTooLarge, Code: "upload_too_many_files",
		Message: fmt.Sprintf("The upload holds more than %d files (a zip counts every file inside); the limit is %d. "+
			"Remove folders such as node_modules and try again.", MaxFiles, MaxFiles)}
	// ErrTooManyEntries refuses an archive whose directory alone lists more entries (folders
	// included) than any upload may hold, before the directory is read into memory.
	ErrTooManyEntries = &apperr.Error{Kind: apperr.KindTooLarge, Code: "upload_too_many_files",
		Message: fmt.Sprintf("The zip archive lists more than %d entries (files and folders together); the limit is %d entries, "+
			"and %d files. Remove folders such as node_modules and try again.", maxZipEntries, maxZipEntries, MaxFiles)}
)

// maxZipEntries is the most entries (folders, links and files) an archive's directory may list.
const maxZipEntries = 4 * MaxFiles

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

// ReadZip extracts a zip archive's regular files, charging each to the budget, and rejects
// links and anything else that is not a plain file. It returns the budget's error at the first
// overrun (the whole upload is then refused) and one FileError per entry it could not take.
func ReadZip(data []byte, b *Budget) ([]File, []FileError, error) {
	if n, ok := zipEntries(data); ok && n > maxZipEntries {
		return nil, nil, ErrTooManyEntries
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // such names are refused one by one below
		return nil, []FileError{{Message: "The archive is not a valid zip file."}}, nil
	}
	if len(zr.File) > maxZipEntries {
		return nil, nil, ErrTooManyEntries
	}
	var files []File
	var errs []FileError
	for _, zf := range zr.File {
		mode := zf.Mode()
		switch {
		case mode.IsDir():
			continue
		case mode&0o170000 == 0o120000 || mode.Type()&(1<<27) != 0: // symlink, in zip's unix mode or Go's
			errs = append(errs, FileError{Path: zf.Name, Message: "Links are not allowed; upload the file itself."})
			continue
		case !mode.IsRegular():
			errs = append(errs, FileError{Path: zf.Name, Message: "Only regular files can be uploaded."})
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			errs = append(errs, FileError{Path: zf.Name, Message: "The file cannot be read from the archive."})
			continue
		}
		content, err := b.ReadFile(rc)
		rc.Close()
		if errors.Is(err, ErrTooManyBytes) || errors.Is(err, ErrTooManyFiles) {
			return nil, nil, err
		}
		if err != nil {
			errs = append(errs, FileError{Path: zf.Name, Message: "The file cannot be read from the archive."})
			continue
		}
		files = append(files, File{Path: zf.Name, Content: content})
	}
	return files, errs, nil
}

// zipEntries reads how many entries an archive's end-of-directory record declares, without
// reading the directory itself; ok is false when the record cannot be found (zip.NewReader
// then explains what is wrong).
func zipEntries(data []byte) (n uint64, ok bool) {
	const eocdLen, maxComment = 22, 1<<16 - 1
	from := max(0, len(data)-eocdLen-maxComment)
	i := bytes.LastIndex(data[from:], []byte("PK\x05\x06"))
	if i < 0 || from+i+eocdLen > len(data) {
		return 0, false
	}
	eocd := from + i
	n = uint64(binary.LittleEndian.Uint16(data[eocd+10:]))
	// A zip64 archive keeps the true count in its own record, found through a locator just
	// before this one.
	loc := eocd - 20
	if loc < 0 || !bytes.Equal(data[loc:loc+4], []byte("PK\x06\x07")) {
		return n, true
	}
	off := binary.LittleEndian.Uint64(data[loc+8:])
	if off > uint64(len(data)) || uint64(len(data))-off < 56 || !bytes.Equal(data[off:off+4], []byte("PK\x06\x06")) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(data[off+32:]), true
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
