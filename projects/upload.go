package projects

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"
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

// ReadZip extracts a zip archive's regular files, rejecting links and anything else that is
// not a plain file, and stopping at the size limits however the archive claims its sizes.
func ReadZip(data []byte) ([]File, []FileError) {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, []FileError{{Message: "The archive is not a valid zip file."}}
	}
	var files []File
	var errs []FileError
	var total int64
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
		if len(files) >= MaxFiles {
			errs = append(errs, FileError{Message: fmt.Sprintf("An upload holds at most %d files.", MaxFiles)})
			break
		}
		rc, err := zf.Open()
		if err != nil {
			errs = append(errs, FileError{Path: zf.Name, Message: "The file cannot be read from the archive."})
			continue
		}
		b, err := io.ReadAll(io.LimitReader(rc, MaxFileBytes+1))
		rc.Close()
		if err != nil {
			errs = append(errs, FileError{Path: zf.Name, Message: "The file cannot be read from the archive."})
			continue
		}
		total += int64(len(b))
		if total > MaxTotalBytes {
			errs = append(errs, FileError{Message: fmt.Sprintf("The archive holds more than %s.", size(MaxTotalBytes))})
			break
		}
		files = append(files, File{Path: zf.Name, Content: b})
	}
	return files, errs
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
