package projects

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"sandman/apperr"
	"sandman/versions"
)

// ErrTooManyEntries refuses an archive whose directory alone lists more entries (folders
// included) than any upload may hold, before the directory is read into memory.
var ErrTooManyEntries = &apperr.Error{Kind: apperr.KindTooLarge, Code: versions.CodeTooManyFiles,
	Message: fmt.Sprintf("The zip archive lists more than %d entries (files and folders together); the limit is %d entries, "+
		"and %d files. Remove folders such as node_modules and try again.", maxZipEntries, maxZipEntries, versions.MaxFiles)}

// maxZipEntries is the most entries (folders, links and files) an archive's directory may list.
const maxZipEntries = 4 * versions.MaxFiles

// ReadZip extracts a zip archive's regular files, charging each to the budget, and rejects
// links and anything else that is not a plain file. It returns the budget's error at the first
// overrun (the whole upload is then refused) and one FileError per entry it could not take.
func ReadZip(data []byte, b *versions.Budget) ([]versions.File, []versions.FileError, error) {
	n, ok := zipEntries(data, maxZipEntries)
	if n > maxZipEntries {
		return nil, nil, ErrTooManyEntries
	}
	var zr *zip.Reader
	var err error
	if ok {
		zr, err = zip.NewReader(bytes.NewReader(data), int64(len(data)))
	}
	if !ok || err != nil && !errors.Is(err, zip.ErrInsecurePath) { // such names are refused one by one below
		return nil, []versions.FileError{{Message: "The archive is not a valid zip file."}}, nil
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

// The records of a zip archive's directory that zipEntries reads (APPNOTE.TXT 4.3.12-16).
const (
	dirHeaderSig = 0x02014b50 // a central directory file header
	dirHeaderLen = 46         // its fixed part, before the name, extra field and comment
	endSig       = 0x06054b50 // the end of central directory record
	endLen       = 22
	end64LocSig  = 0x07064b50 // the zip64 end of central directory locator
	end64LocLen  = 20
	end64Sig     = 0x06064b50 // the zip64 end of central directory record
	end64Len     = 56
)

// zipEntries counts the entries of an archive's central directory by walking its headers from
// where zip.NewReader starts reading them, and stops past limit: the count the end record
// declares is the sender's word, and zip.NewReader parses (and allocates for) every header it
// finds, however many were declared. It finds the directory as zip.NewReader does, zip64 and
// data before the archive included, and counts every header zip.NewReader could read (a few it
// would refuse, too): a count within limit means zip.NewReader reads no more than limit
// entries. ok is false when no directory can be found, which zip.NewReader would refuse too.
func zipEntries(data []byte, limit int) (n int, ok bool) {
	starts, ok := directoryStarts(data)
	for _, at := range starts {
		n = max(n, walkDirectory(data, at, limit))
	}
	return n, ok
}

// directoryStarts are where an archive's central directory may begin, found as zip.NewReader
// finds it (its readDirectoryEnd): the end record in the last 1 KiB, else the last 65 KiB; its
// zip64 record when the end record's fields say so; the offset moved by any data before the
// archive. zip.NewReader may then decide that there is no such data, by reading a header at the
// unmoved offset: both places are returned, and the caller counts the longer directory.
func directoryStarts(data []byte) ([]int64, bool) {
	size := int64(len(data))
	end := int64(-1)
	for i, n := range []int64{1 << 10, 65 << 10} {
		n = min(n, size)
		if p := findEndRecord(data[size-n:]); p >= 0 {
			end = size - n + int64(p)
			break
		}
		if i == 1 || n == size {
			return nil, false
		}
	}
	records, dirSize, dirOffset := uint64(le16(data, end+10)), uint64(le32(data, end+12)), uint64(le32(data, end+16))
	if records == 0xffff || dirSize == 0xffff || dirOffset == 0xffffffff {
		if loc := end - end64LocLen; loc >= 0 && le32(data, loc) == end64LocSig && le32(data, loc+4) == 0 && le32(data, loc+16) == 1 {
			p := le64(data, loc+8)
			if p > uint64(size) || uint64(size)-p < end64Len || le32(data, int64(p)) != end64Sig {
				return nil, false
			}
			end = int64(p)
			dirSize, dirOffset = le64(data, end+40), le64(data, end+48)
		}
	}
	if dirSize > math.MaxInt64 || dirOffset > math.MaxInt64 {
		return nil, false
	}
	// As zip.NewReader computes it (int64 arithmetic, wrapping included): the directory's start
	// is the record's offset less the directory's size, and the data before the archive what
	// separates it from the declared offset.
	at := end - int64(dirSize)
	if at < 0 || at >= size {
		return nil, false
	}
	starts := []int64{at}
	if base := at - int64(dirOffset); base > 0 {
		starts = append(starts, int64(dirOffset))
	}
	return starts, true
}

// findEndRecord is where the end record is in b, as archive/zip looks for it: the last
// signature, unless its comment runs past b (then none), -1 for none.
func findEndRecord(b []byte) int {
	for i := len(b) - endLen; i >= 0; i-- {
		if le32(b, int64(i)) == endSig {
			if int(le16(b, int64(i+endLen-2)))+endLen+i > len(b) {
				return -1
			}
			return i
		}
	}
	return -1
}

// walkDirectory counts the directory headers from at, as zip.NewReader reads them (each a
// signature, its fixed part and its three variable fields, whole), up to limit+1.
func walkDirectory(data []byte, at int64, limit int) int {
	size, n := int64(len(data)), 0
	for n <= limit && at >= 0 && size-at >= dirHeaderLen && le32(data, at) == dirHeaderSig {
		at += dirHeaderLen + int64(le16(data, at+28)) + int64(le16(data, at+30)) + int64(le16(data, at+32))
		if at > size {
			break
		}
		n++
	}
	return n
}

func le16(b []byte, at int64) uint16 { return binary.LittleEndian.Uint16(b[at:]) }
func le32(b []byte, at int64) uint32 { return binary.LittleEndian.Uint32(b[at:]) }
func le64(b []byte, at int64) uint64 { return binary.LittleEndian.Uint64(b[at:]) }
