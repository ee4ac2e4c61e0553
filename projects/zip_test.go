package projects

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"sandman/apperr"
	"sandman/internal/testkit"
	"sandman/versions"
)

// zipEntry is one entry of an archive a test builds.
type zipEntry struct {
	name    string
	content []byte
	mode    os.FileMode // 0: a regular file
	// declared, when set, is the uncompressed size the header claims instead of the true one.
	declared uint64
}

// zipOf builds a real zip archive (deflated entries, as zip tools make them).
func zipOf(t testing.TB, entries ...zipEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		if e.mode != 0 {
			h.SetMode(e.mode)
		}
		if e.declared != 0 {
			// A header that lies about the size: write the deflated bytes raw under it.
			var raw bytes.Buffer
			fw, _ := flate.NewWriter(&raw, flate.BestCompression)
			fw.Write(e.content)
			fw.Close()
			h.CompressedSize64, h.UncompressedSize64, h.CRC32 = uint64(raw.Len()), e.declared, crc32.ChecksumIEEE(e.content)
			w, err := zw.CreateRaw(h)
			if err != nil {
				t.Fatal(err)
			}
			w.Write(raw.Bytes())
			continue
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(e.content)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestReadZip(t *testing.T) {
	t.Parallel()
	data := zipOf(t,
		zipEntry{name: "app/index.js", content: []byte("console.log(1)")},
		zipEntry{name: "app/empty-dir/", mode: os.ModeDir | 0o755},
		zipEntry{name: "app/link", content: []byte("/etc/passwd"), mode: os.ModeSymlink | 0o777},
	)
	files, errs, err := ReadZip(data, versions.NewBudget())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Path != "app/index.js" || string(files[0].Content) != "console.log(1)" {
		t.Fatalf("files = %+v", files)
	}
	if len(errs) != 1 || errs[0].Path != "app/link" || !strings.Contains(errs[0].Message, "Links are not allowed") {
		t.Fatalf("errs = %+v", errs)
	}
	if _, errs, err := ReadZip([]byte("not a zip"), versions.NewBudget()); len(errs) != 1 || err != nil {
		t.Fatalf("garbage accepted: %+v %v", errs, err)
	}
}

// TestUploadBudget: one budget per request, shared by every file and archive, charged with the
// bytes that come out of the decompressor: the first overrun refuses the whole upload, naming
// the limit, whatever the archives' headers claim.
func TestUploadBudget(t *testing.T) {
	t.Parallel()
	zeros := func(n int) []byte { return make([]byte, n) }
	fiveMiB := zipOf(t, zipEntry{name: "big.bin", content: zeros(versions.MaxFileBytes)})
	manyDirs := make([]zipEntry, maxZipEntries+1)
	for i := range manyDirs {
		manyDirs[i] = zipEntry{name: "d" + strconv.Itoa(i) + "/", mode: os.ModeDir | 0o755}
	}
	manyFiles := make([]zipEntry, versions.MaxFiles+1)
	for i := range manyFiles {
		manyFiles[i] = zipEntry{name: "f" + strconv.Itoa(i), content: []byte("x")}
	}
	tests := []struct {
		name string
		// archives are read one after another with one budget, as the parts of one request.
		archives [][]byte
		want     error  // the overrun, or nil
		wantErr  string // else: a versions.FileError containing this ("" for none)
	}{
		{name: "four 5 MiB files fit", archives: [][]byte{fiveMiB, fiveMiB, fiveMiB, fiveMiB}},
		{name: "a fifth archive overruns the shared budget", archives: [][]byte{fiveMiB, fiveMiB, fiveMiB, fiveMiB, fiveMiB}, want: versions.ErrTooManyBytes},
		{name: "one archive of 100 MiB of zeros (a zip bomb)", want: versions.ErrTooManyBytes, archives: [][]byte{zipOf(t,
			zipEntry{name: "a", content: zeros(25 << 20)}, zipEntry{name: "b", content: zeros(25 << 20)},
			zipEntry{name: "c", content: zeros(25 << 20)}, zipEntry{name: "d", content: zeros(25 << 20)})}},
		{name: "a header that claims 1 byte for 30 MiB", archives: [][]byte{zipOf(t, zipEntry{name: "liar", content: zeros(30 << 20), declared: 1})},
			wantErr: "cannot be read"},
		{name: "a header that claims 1 TiB for 1 byte", archives: [][]byte{zipOf(t, zipEntry{name: "boast", content: []byte("x"), declared: 1 << 40})},
			wantErr: "cannot be read"},
		{name: "more files than an upload holds", archives: [][]byte{zipOf(t, manyFiles...)}, want: versions.ErrTooManyFiles},
		{name: "files counted across archives", archives: [][]byte{zipOf(t, manyFiles[:300]...), zipOf(t, manyFiles[300:]...)}, want: versions.ErrTooManyFiles},
		{name: "a directory of more entries than any upload", archives: [][]byte{zipOf(t, manyDirs...)}, want: ErrTooManyEntries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := versions.NewBudget()
			var got error
			var fileErrs []versions.FileError
			held := 0
			for _, a := range tt.archives {
				files, errs, err := ReadZip(a, b)
				if err != nil {
					got = err
					break
				}
				fileErrs = append(fileErrs, errs...)
				for _, f := range files {
					held += len(f.Content)
				}
			}
			if got != tt.want {
				t.Fatalf("overrun %v, want %v", got, tt.want)
			}
			if got != nil {
				if ae, ok := apperr.As(got); !ok || ae.Kind != apperr.KindTooLarge || !strings.Contains(ae.Message, "the limit is") {
					t.Fatalf("the overrun %v must be a 413 naming its limit", got)
				}
			}
			if held > versions.MaxTotalBytes+len(tt.archives) {
				t.Fatalf("%d bytes held, over the budget of %d", held, versions.MaxTotalBytes)
			}
			switch {
			case tt.wantErr == "" && len(fileErrs) > 0:
				t.Fatalf("file errors %+v, want none", fileErrs)
			case tt.wantErr != "" && (len(fileErrs) != 1 || !strings.Contains(fileErrs[0].Message, tt.wantErr)):
				t.Fatalf("file errors %+v, want one saying %q", fileErrs, tt.wantErr)
			}
		})
	}
}

// FuzzReadZip feeds ReadZip real archives and what the fuzzer makes of them: whatever the
// input, it never panics, never holds more than the budget, and every overrun is a 413.
func FuzzReadZip(f *testing.F) {
	f.Add(zipOf(f, zipEntry{name: "index.js", content: []byte("console.log(1)")}, zipEntry{name: "src/", mode: os.ModeDir | 0o755}))
	f.Add(zipOf(f, zipEntry{name: "inner.zip", content: zipOf(f, zipEntry{name: "deep.txt", content: []byte("nested")})}))
	f.Add(zipOf(f, zipEntry{name: "zeros", content: make([]byte, 1<<20)}))
	f.Add(zipOf(f, zipEntry{name: "../../etc/passwd", content: []byte("x")}, zipEntry{name: "/abs", content: []byte("y")}))
	f.Add(zipOf(f, zipEntry{name: "same", content: []byte("1")}, zipEntry{name: "same", content: []byte("2")}))
	f.Add(zipOf(f, zipEntry{name: "link", content: []byte("/etc"), mode: os.ModeSymlink | 0o777}))
	f.Add(zipOf(f, zipEntry{name: "liar", content: make([]byte, 1<<16), declared: 3}))
	f.Add([]byte("PK\x05\x06"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b := versions.NewBudget()
		files, errs, err := ReadZip(data, b)
		if err != nil {
			if ae, ok := apperr.As(err); !ok || ae.Kind != apperr.KindTooLarge || files != nil || errs != nil {
				t.Fatalf("overrun %v with %d files", err, len(files))
			}
			return
		}
		held := 0
		for _, f := range files {
			held += len(f.Content)
			if len(f.Content) > versions.MaxFileBytes+1 {
				t.Fatalf("%s holds %d bytes, past the per-file read limit", f.Path, len(f.Content))
			}
		}
		if held > versions.MaxTotalBytes || len(files) > versions.MaxFiles {
			t.Fatalf("%d files of %d bytes escaped the budget", len(files), held)
		}
		// Whatever was taken is checked like any upload; it must not panic either.
		_ = versions.CheckFiles(files)
	})
}

func TestStarterFiles(t *testing.T) {
	t.Parallel()
	for _, s := range Starters() {
		files, err := StarterFiles(s.Name)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v (%d files)", s.Name, err, len(files))
		}
		if errs := versions.CheckFiles(files); errs != nil {
			t.Fatalf("%s breaks the upload rules: %+v", s.Name, errs)
		}
	}
}

// emptyEntries is an archive of n empty, stored files: a directory of n headers, cheap to send.
func emptyEntries(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range n {
		if _, err := zw.CreateHeader(&zip.FileHeader{Name: strconv.Itoa(i), Method: zip.Store}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// directoryOf is an archive of one empty, stored file whose directory lists it n times (under n
// names) and whose end record declares `declared` entries: the records zip.Writer would write
// for a few entries (it writes zip64 ones past 65,535), the directory of many.
func directoryOf(n int, declared uint16) []byte {
	le := binary.LittleEndian
	out := le.AppendUint32(nil, 0x04034b50) // the local header of an empty file named "0"
	out = append(out, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	out = append(out, make([]byte, 12)...) // CRC-32 and sizes: 0
	out = le.AppendUint16(out, 1)
	out = le.AppendUint16(out, 0)
	out = append(out, '0')
	dir := len(out)
	for i := range n {
		name := strconv.Itoa(i)
		out = le.AppendUint32(out, dirHeaderSig)
		out = append(out, 20, 3, 10, 0) // made by unix, version 2.0; needs 1.0
		out = append(out, make([]byte, 20)...)
		out = le.AppendUint16(out, uint16(len(name)))
		out = append(out, make([]byte, 8)...)            // extra, comment, disk, internal attributes
		out = le.AppendUint32(out, uint32(0o100644)<<16) // a regular file
		out = le.AppendUint32(out, 0)                    // its local header's offset
		out = append(out, name...)
	}
	out = le.AppendUint32(out, endSig)
	out = le.AppendUint32(out, 0)
	out = le.AppendUint16(out, declared)
	out = le.AppendUint16(out, declared)
	out = le.AppendUint32(out, uint32(len(out)-4-8-dir))
	out = le.AppendUint32(out, uint32(dir))
	return le.AppendUint16(out, 0)
}

// shortened rewrites an archive's end record to declare a directory k bytes shorter than it is:
// zip.NewReader then takes the difference for data before the archive, unless it finds a header
// where the directory was said to start.
func shortened(data []byte, k uint32) []byte {
	out := bytes.Clone(data)
	end := len(out) - endLen
	binary.LittleEndian.PutUint32(out[end+12:], binary.LittleEndian.Uint32(out[end+12:])-k)
	return out
}

// asZip64 rewrites an archive's end as a zip64 archive's: the counts, the directory's size and
// offset in a zip64 end record (declaring n entries), found through its locator, and an end
// record that defers to them.
func asZip64(data []byte, n uint64) []byte {
	end := len(data) - endLen
	dirSize := uint64(binary.LittleEndian.Uint32(data[end+12:]))
	dirOffset := uint64(binary.LittleEndian.Uint32(data[end+16:]))
	out := bytes.Clone(data[:end])
	rec := len(out)
	out = binary.LittleEndian.AppendUint32(out, end64Sig)
	out = binary.LittleEndian.AppendUint64(out, end64Len-12)
	out = binary.LittleEndian.AppendUint16(out, 45)
	out = binary.LittleEndian.AppendUint16(out, 45)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint64(out, n)
	out = binary.LittleEndian.AppendUint64(out, n)
	out = binary.LittleEndian.AppendUint64(out, dirSize)
	out = binary.LittleEndian.AppendUint64(out, dirOffset)
	out = binary.LittleEndian.AppendUint32(out, end64LocSig)
	out = binary.LittleEndian.AppendUint32(out, 0)
	out = binary.LittleEndian.AppendUint64(out, uint64(rec))
	out = binary.LittleEndian.AppendUint32(out, 1)
	out = binary.LittleEndian.AppendUint32(out, endSig)
	out = append(out, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0)
	return out
}

// An archive whose end record declares a few entries while its directory holds many more is
// refused as one that declares them all (a 413 naming the limit), and cheaply: its directory is
// walked and left, never parsed into memory. The zip64 records, and data before the archive,
// are read as zip.NewReader reads them.
func TestAZipThatUnderDeclaresItsEntriesIsRefusedCheaply(t *testing.T) {
	// 1<<16 + 3 entries: zip.NewReader checks the count it read against the declared one modulo
	// 65,536 (the end record's field is 16 bits), so an archive that declares 3 is one it takes.
	many := 1<<16 + 3
	few := emptyEntries(t, 3)
	tests := []struct {
		name    string
		archive []byte
		refused bool
	}{
		{"the end record declares 3", directoryOf(many, 3), true},
		{"the end record declares none", directoryOf(many, 0), true},
		{"the zip64 record declares 3", asZip64(directoryOf(many, 3), 3), true},
		{"after data before the archive", append(bytes.Repeat([]byte("x"), 1000), directoryOf(many, 3)...), true},
		{"the end record declares a short directory", shortened(directoryOf(many, 3), 1000), true},
		{"a small archive as zip64", asZip64(few, 3), false},
		{"a small archive after data before it", append([]byte("#!/bin/sh\nexit 0\n"), few...), false},
		{"a small directory of one file thrice", directoryOf(3, 3), false},
	}
	refused := 0
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			files, errs, err := ReadZip(tt.archive, versions.NewBudget())
			runtime.ReadMemStats(&after)
			if !tt.refused {
				if err != nil || len(errs) != 0 || len(files) != 3 {
					t.Fatalf("read %d files, file errors %+v, error %v; want the 3 files", len(files), errs, err)
				}
				return
			}
			if err != ErrTooManyEntries {
				t.Fatalf("read %d files, file errors %d, error %v; want the archive refused for its entries", len(files), len(errs), err)
			}
			if ae, _ := apperr.As(err); ae.Kind != apperr.KindTooLarge || !strings.Contains(ae.Message, "the limit is 2000 entries") {
				t.Fatalf("the refusal %v must be a 413 naming the limit", err)
			}
			// zip.NewReader spends about 300 bytes an entry; walking a directory, none.
			if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
				t.Fatalf("refusing the archive allocated %d KiB, want at most 256 KiB: its directory was read into memory", got>>10)
			}
			refused++
		})
	}
	testkit.Record(t, testkit.Scenario{ID: "zip-under-declared",
		Injected: "archives whose directory lists 65,539 entries while the end record declares 3 or none, the zip64 record 3, or the directory's size short, one after data before the archive",
		Times:    refused,
		Result:   "each refused (413 naming the limit of 2,000 entries) before zip.NewReader, allocating at most 256 KiB; small archives, zip64 or after data, read whole"})
}

// FuzzZipEntries: whatever the bytes, the walk never panics, never counts past its limit, and
// never counts fewer entries than zip.NewReader reads, so a count within the cap is a promise
// about what zip.NewReader will hold.
func FuzzZipEntries(f *testing.F) {
	few := emptyEntries(f, 3)
	f.Add(few)
	f.Add(directoryOf(12, 2))
	f.Add(asZip64(few, 3))
	f.Add(asZip64(directoryOf(12, 1), 1))
	f.Add(append([]byte("prefix"), directoryOf(3, 3)...))
	f.Add(shortened(directoryOf(12, 12), 20))
	f.Add(zipOf(f, zipEntry{name: "a/", mode: os.ModeDir | 0o755}, zipEntry{name: "a/b", content: []byte("x")}))
	f.Add([]byte("PK\x05\x06"))
	const limit = 8
	f.Fuzz(func(t *testing.T, data []byte) {
		n, ok := zipEntries(data, limit)
		if n > limit+1 {
			t.Fatalf("counted %d entries, past the limit %d and one", n, limit)
		}
		zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
			return
		}
		if !ok || n < min(len(zr.File), limit+1) {
			t.Fatalf("the walk counted %d entries (found a directory: %v), zip.NewReader read %d", n, ok, len(zr.File))
		}
	})
}
