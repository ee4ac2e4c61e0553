package projects

import (
	"testing"

	"sandman/versions"
)

// BenchmarkReadUnderDeclaredZip reads the archive of issue 27's review: 27.7 MB of directory
// headers (524,291 entries) behind an end record that declares 3 (as many modulo 65,536), which
// zip.NewReader takes. B/op is what refusing it costs (RELIABILITY.md, "An archive that
// under-declares its entries").
func BenchmarkReadUnderDeclaredZip(b *testing.B) {
	const n = 8<<16 + 3
	data := directoryOf(n, uint16(n%(1<<16)))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ReadZip(data, versions.NewBudget()); err != ErrTooManyEntries {
			b.Fatalf("the archive was not refused for its entries: %v", err)
		}
	}
}
