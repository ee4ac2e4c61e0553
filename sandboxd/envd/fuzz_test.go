package envd

import (
	"bytes"
	"testing"
)

func FuzzReadEnvelope(f *testing.F) {
	f.Add(appendEnvelope(nil, 0, []byte(`{"process":{"cmd":"ls"}}`)))
	f.Add(appendEnvelope(nil, envelopeEndStream, []byte(`{}`)))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		flags, msg, err := readEnvelope(bytes.NewReader(data))
		if err != nil {
			return
		}
		if enc := appendEnvelope(nil, flags, msg); !bytes.HasPrefix(data, enc) {
			t.Fatalf("re-encoded %x is not a prefix of %x", enc, data)
		}
	})
}
