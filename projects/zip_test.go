package projects

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"hash/crc32"
	"os"
	"strconv"
	"strings"
	"testing"

	"sandman/apperr"
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
