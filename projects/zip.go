package projects

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"sandman/apperr"
	"sandman/versions"
)

// ErrTooManyEntries refuses an archive whose directory alone lists more entries (folders
// included) than any upload may hold, before the directory is read into memory.
var ErrTooManyEntries = &apperr.Error{Kind: apperr.KindTooLarge, Code: "upload_too_many_files",
	Message: fmt.Sprintf("The zip archive lists more than %d entries (files and folders together); the limit is %d entries, "+
		"and %d files. Remove folders such as node_modules and try again.", maxZipEntries, maxZipEntries, versions.MaxFiles)}

// maxZipEntries is the most entries (folders, links and files) an archive's directory may list.
const maxZipEntries = 4 * versions.MaxFiles

// ReadZip extracts a zip archive's regular files, charging each to the budget, and rejects
// links and anything else that is not a plain file. It returns the budget's error at the first
// overrun (the whole upload is then refused) and one FileError per entry it could not take.
func ReadZip(data []byte, b *versions.Budget) ([]versions.File, []versions.FileError, error) {
	if n, ok := zipEntries(data); ok && n > maxZipEntries {
		return nil, nil, ErrTooManyEntries
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // such names are refused one by one below
		return nil, []versions.FileError{{Message: "The archive is not a valid zip file."}}, nil
	}
	if len(zr.File) > maxZipEntries {
		return nil, nil, ErrTooManyEntries
	}
	var files []versions.File
	var errs []versions.FileError
	for _, zf := range zr.File {
		mode := zf.Mode()
		switch {
		case mode.IsDir():
			continue
		case mode&0o170000 == 0o120000 || mode.Type()&(1<<27) != 0: // symlink, in zip's unix mode or Go's
			errs = append(errs, versions.FileError{Path: zf.Name, Message: "Links are not allowed; upload the file itself."})
			continue
		case !mode.IsRegular():
			errs = append(errs, versions.FileError{Path: zf.Name, Message: "Only regular files can be uploaded."})
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			errs = append(errs, versions.FileError{Path: zf.Name, Message: "The file cannot be read from the archive."})
			continue
		}
		content, err := b.ReadFile(rc)
		rc.Close()
		if errors.Is(err, versions.ErrTooManyBytes) || errors.Is(err, versions.ErrTooManyFiles) {
			return nil, nil, err
		}
		if err != nil {
			errs = append(errs, versions.FileError{Path: zf.Name, Message: "The file cannot be read from the archive."})
			continue
		}
		// The executable bit travels with the file (a script the app runs, say).
		files = append(files, versions.File{Path: zf.Name, Content: content, Executable: mode&0o111 != 0})
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
