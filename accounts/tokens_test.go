package accounts

import (
	"context"
	"errors"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A made token has the documented shape and passes its own checksum; changing any one of its
// characters fails it (a CRC32 catches every single-character change).
func TestTokenChecksumCatchesEveryOneCharacterChange(t *testing.T) {
	t.Parallel()
	for range 20 {
		tok, err := newTokenSecret()
		if err != nil {
			t.Fatal(err)
		}
		if len(tok) != TokenLength || !strings.HasPrefix(tok, "sm_") || len(tok) != 39 {
			t.Fatalf("token %q: want sm_ and 36 base62 characters", tok)
		}
		if err := ParseToken(tok); err != nil {
			t.Fatalf("a made token fails its own checksum: %q", tok)
		}
		for i := len(TokenPrefix); i < len(tok); i++ {
			for _, c := range []byte(base62) {
				if c == tok[i] {
					continue
				}
				changed := tok[:i] + string(c) + tok[i+1:]
				if ParseToken(changed) == nil {
					t.Fatalf("%q (character %d of %q changed) passes the checksum", changed, i, tok)
				}
			}
		}
	}
}

// The checksum is GitHub's: the CRC32 (IEEE) of the random part in base62, left-padded to six.
func TestTokenChecksumIsBase62CRC32(t *testing.T) {
	t.Parallel()
	for _, random := range []string{strings.Repeat("0", tokenRandom), "abcdefghijklmnopqrstuvwxyzABCD", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"} {
		n, got, back := crc32.ChecksumIEEE([]byte(random)), checksum(random), uint64(0)
		for _, c := range got {
			back = back*62 + uint64(strings.IndexRune(base62, c))
		}
		if len(got) != tokenChecksum || back != uint64(n) {
			t.Fatalf("checksum(%q) = %q (%d), want the base62 of %d in 6 characters", random, got, back, n)
		}
	}
}

// Tokens cut short, too long, with another prefix or with characters outside base62 are
// malformed, whatever their checksum.
func TestParseTokenRefusesWhatIsNotAToken(t *testing.T) {
	t.Parallel()
	good, err := newTokenSecret()
	if err != nil {
		t.Fatal(err)
	}
	random := good[len(TokenPrefix) : len(TokenPrefix)+tokenRandom]
	for _, s := range []string{"", "sm_", good[:len(good)-1], good + "0", "gh_" + good[3:], "SM_" + good[3:],
		"sm_" + strings.Replace(random, random[:1], "-", 1) + checksum(strings.Replace(random, random[:1], "-", 1)),
		"sm_" + random[:29] + "é" + checksum(random[:29]+"é"), " " + good, good + "\n"} {
		if ParseToken(s) == nil {
			t.Errorf("ParseToken(%q) passed", s)
		}
	}
}

// FuzzParseToken: no input makes the parser panic, and what it passes is a token: sm_, 36
// base62 characters and a matching checksum.
func FuzzParseToken(f *testing.F) {
	good, _ := newTokenSecret()
	for _, s := range []string{good, good[:20], "sm_" + strings.Repeat("A", 36), "Bearer " + good, "", "sm_\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ParseToken(s) != nil {
			return
		}
		random, ok := strings.CutPrefix(s, TokenPrefix)
		if !ok || len(random) != tokenRandom+tokenChecksum || strings.Trim(random, base62) != "" || checksum(random[:tokenRandom]) != random[tokenRandom:] {
			t.Fatalf("ParseToken passed %q", s)
		}
	})
}

// A token whose checksum fails is refused as an invalid token with no database at all: the
// Service's pool points at nothing, and only a well-formed token reaches it.
func TestChecksumFailureNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/nothing?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := New(pool, Options{})
	good, _ := newTokenSecret()
	typo := good[:10] + string(base62[(strings.IndexByte(base62, good[10])+1)%62]) + good[11:]
	for _, tok := range []string{typo, "not a token", good[:30]} {
		_, err := s.Authenticate(context.Background(), tok, "192.0.2.1")
		var r *TokenRefusal
		if !errors.Is(err, ErrInvalidToken) || !errors.As(err, &r) || r.Reason != "malformed" {
			t.Fatalf("Authenticate(%q) = %v, want ErrInvalidToken (malformed) without the database", tok, err)
		}
	}
	// The well-formed one is looked up: it reaches the (missing) database.
	if _, err := s.Authenticate(context.Background(), good, "192.0.2.1"); err == nil || errors.Is(err, ErrInvalidToken) {
		t.Fatalf("a well-formed token was not looked up: %v", err)
	}
}
