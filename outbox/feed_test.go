package outbox_test

import (
	"testing"

	"sandman/outbox"
)

// A feed cursor read from a request is the one given, or refused: never another place.
func FuzzFeedCursorReadsBackAsGiven(f *testing.F) {
	for _, s := range []string{"", "1-2", "812-44", "0-0", "-1-2", "1-", "-", "x-1", "1-2-3", "9223372036854775807-1", "01-2", "1--2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := outbox.ParseFeedCursor(s)
		if err != nil {
			return
		}
		if c.Tx < 0 || c.ID < 0 {
			t.Fatalf("%q read as %+v", s, c)
		}
		again, err := outbox.ParseFeedCursor(c.String())
		if err != nil || again != c {
			t.Fatalf("%q read as %+v, written %q, read back as %+v (%v)", s, c, c.String(), again, err)
		}
	})
}
