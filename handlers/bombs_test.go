package handlers_test

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"fmt"
	"hash/crc32"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"sandman/app/apptest"
	"sandman/internal/testkit"
)

// heapPeak samples the heap's live objects every millisecond while f runs and returns the most
// they exceeded what was live before f (after a collection). It reads the whole process: the
// test must not run in parallel with others (the server is in the process, which is the point).
func heapPeak(f func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > peak {
				peak = v
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

// deflatedZeros is n zero bytes deflated, with their CRC, to be written raw into any number of
// archive entries.
func deflatedZeros(t testing.TB, n int) ([]byte, uint32) {
	t.Helper()
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestCompression)
	chunk := make([]byte, 1<<20)
	crc := crc32.NewIEEE()
	for left := n; left > 0; left -= len(chunk) {
		w.Write(chunk[:min(left, len(chunk))])
		crc.Write(chunk[:min(left, len(chunk))])
	}
	w.Close()
	return buf.Bytes(), crc.Sum32()
}

// zipOfZeros is an archive of entries entries of size zero bytes each.
func zipOfZeros(t testing.TB, entries, size int) []byte {
	t.Helper()
	raw, crc := deflatedZeros(t, size)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for i := range entries {
		w, err := zw.CreateRaw(&zip.FileHeader{Name: "zeros-" + strconv.Itoa(i), Method: zip.Deflate, CRC32: crc,
			CompressedSize64: uint64(len(raw)), UncompressedSize64: uint64(size)})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(raw)
	}
	zw.Close()
	return buf.Bytes()
}

// TestUploadBombs sends the upload the archives and forms an attacker would: each is refused
// with a 413 that names the limit, stores nothing, and the heap never grows past its bound
// while Sandman reads it. Not parallel: the heap is measured.
func TestUploadBombs(t *testing.T) {
	s := webOnly(t)
	c := s.NewClient(t)
	c.SignUp("bombs@example.com")
	c.Get("/projects/new")
	settings := map[string]string{"name": "Bomb", "start_command": "node index.js", "port": "3000"}
	small := zipOfZeros(t, 1, 20<<20) // 20 MiB of zeros in about 20 KiB
	manyZips := make([]upFile, 0, 1000)
	for i := 0; len(manyZips) < cap(manyZips); i++ {
		manyZips = append(manyZips, upFile{fmt.Sprintf("bomb-%d.zip", i), string(small)})
	}
	var dirBomb bytes.Buffer
	zw := zip.NewWriter(&dirBomb)
	for i := range 100_000 {
		zw.CreateHeader(&zip.FileHeader{Name: strconv.Itoa(i), Method: zip.Store})
	}
	zw.Close()
	manyParts := make([]upFile, 10_000)
	for i := range manyParts {
		manyParts[i] = upFile{"f" + strconv.Itoa(i) + ".js", "x"}
	}
	const bound = 64 << 20
	tests := []struct {
		id, injected string
		files        []upFile
		want         string
	}{
		{"bomb-many-zips", "one request of 1,000 zips, each 20 MiB of zeros in about 20 KiB (20 GiB unpacked in all)",
			manyZips, "once unpacked"},
		{"bomb-one-zip", "one zip of 8 entries of 64 MiB of zeros each (512 MiB unpacked), the headers telling the truth",
			[]upFile{{"bomb.zip", string(zipOfZeros(t, 8, 64<<20))}}, "once unpacked"},
		{"bomb-zip-directory", "one zip whose directory lists 100,000 entries",
			[]upFile{{"dir.zip", dirBomb.String()}}, "entries"},
		{"bomb-many-parts", "one request of 10,000 one-byte files",
			manyParts, "files"},
		{"bomb-wire", "one 30 MiB file (past the 21 MiB the wire allows)",
			[]upFile{{"big.bin", string(make([]byte, 30<<20))}}, "larger than 21 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			body, ct := multipartBody(t, c.CSRF(), settings, tt.files)
			before := s.count(t, "SELECT count(*) FROM projects")
			var r apptest.Response
			peak := heapPeak(func() {
				r = c.Do(http.MethodPost, "/projects/upload", bytes.NewReader(body.Bytes()), map[string]string{"Content-Type": ct})
			})
			apptest.RequireStatus(t, r, http.StatusRequestEntityTooLarge)
			apptest.RequireContains(t, r.Body, tt.want)
			apptest.RequireContains(t, r.Body, "limit")
			if n := s.count(t, "SELECT count(*) FROM projects"); n != before {
				t.Fatalf("a refused upload stored a project (%d → %d)", before, n)
			}
			t.Logf("%s: %.1f MiB on the wire, heap peak %.1f MiB over the baseline", tt.id, float64(body.Len())/(1<<20), float64(peak)/(1<<20))
			if peak > bound {
				t.Fatalf("the heap grew by %.1f MiB reading it, over the bound of %d MiB", float64(peak)/(1<<20), bound>>20)
			}
			testkit.Record(t, testkit.Scenario{ID: tt.id, Injected: tt.injected, Times: 1,
				Result: fmt.Sprintf("413 naming the limit, nothing stored; heap peak while reading ≤ %d MiB", bound>>20)})
		})
	}
}
