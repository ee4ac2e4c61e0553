package keyring_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"sandman/keyring"
)

const (
	keyA = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	keyB = "1f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403020100"
)

func mustParse(t *testing.T, current, previous string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(current, previous)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestASealedValueOpensOnlyWithItsOwnAssociatedData(t *testing.T) {
	k := mustParse(t, keyA, "")
	id, sealed, err := k.Seal([]byte("sk-live-123"), []byte("project-1/OPENAI_API_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("sk-live-123")) {
		t.Fatal("the sealed value holds the plain text")
	}
	plain, err := k.Open(id, sealed, []byte("project-1/OPENAI_API_KEY"))
	if err != nil || string(plain) != "sk-live-123" {
		t.Fatalf("Open = %q, %v", plain, err)
	}
	for _, ad := range []string{"project-2/OPENAI_API_KEY", "project-1/OTHER", ""} {
		if _, err := k.Open(id, sealed, []byte(ad)); !errors.Is(err, keyring.ErrOpen) {
			t.Errorf("opened with ad %q: %v", ad, err)
		}
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	if _, err := k.Open(id, tampered, []byte("project-1/OPENAI_API_KEY")); !errors.Is(err, keyring.ErrOpen) {
		t.Errorf("a changed value opened: %v", err)
	}
	if _, err := k.Open(id, sealed[:5], nil); !errors.Is(err, keyring.ErrOpen) {
		t.Errorf("a cut value: %v", err)
	}
}

func TestTwoSealsOfOneValueDiffer(t *testing.T) {
	k := mustParse(t, keyA, "")
	_, a, _ := k.Seal([]byte("same"), nil)
	_, b, _ := k.Seal([]byte("same"), nil)
	if bytes.Equal(a, b) {
		t.Fatal("the same value sealed twice gives the same bytes: the nonce repeats")
	}
}

func TestThePreviousKeyStillOpensWhatItSealed(t *testing.T) {
	old := mustParse(t, keyA, "")
	id, sealed, err := old.Seal([]byte("v"), []byte("ad"))
	if err != nil {
		t.Fatal(err)
	}
	rotating := mustParse(t, keyB, keyA)
	if !rotating.Stale(id) {
		t.Fatal("a value under the previous key is not stale")
	}
	if plain, err := rotating.Open(id, sealed, []byte("ad")); err != nil || string(plain) != "v" {
		t.Fatalf("the previous key does not open: %q, %v", plain, err)
	}
	newID, _, _ := rotating.Seal([]byte("v"), []byte("ad"))
	if newID == id || rotating.Stale(newID) {
		t.Fatalf("new values are sealed under %s, the previous key's id is %s", newID, id)
	}
	done := mustParse(t, keyB, "")
	if _, err := done.Open(id, sealed, []byte("ad")); !errors.Is(err, keyring.ErrUnknownKey) {
		t.Fatalf("opened without the previous key: %v", err)
	}
}

func TestNoKeySealsNothing(t *testing.T) {
	k := mustParse(t, "", "")
	if k.Enabled() {
		t.Fatal("no key, yet enabled")
	}
	if _, _, err := k.Seal([]byte("v"), nil); !errors.Is(err, keyring.ErrNoKey) {
		t.Fatalf("Seal without a key: %v", err)
	}
	if _, err := k.Open("x", []byte("v"), nil); !errors.Is(err, keyring.ErrNoKey) {
		t.Fatalf("Open without a key: %v", err)
	}
}

func TestAKeyIsRefusedUnlessItIsThirtyTwoBytes(t *testing.T) {
	raw := make([]byte, 32)
	for i := range raw {
		raw[i] = byte(i)
	}
	for _, tc := range []struct {
		name, current, previous, err string
	}{
		{"hex", keyA, "", ""},
		{"base64", base64.StdEncoding.EncodeToString(raw), "", ""},
		{"base64url", base64.RawURLEncoding.EncodeToString(raw), "", ""},
		{"with a newline", keyA + "\n", "", ""},
		{"rotation", keyB, keyA, ""},
		{"short hex", keyA[:62], "", "SANDMAN_SECRETS_KEY must be 32 random bytes"},
		{"a passphrase", "correct horse battery staple", "", "SANDMAN_SECRETS_KEY must be 32 random bytes"},
		{"16 bytes", keyA[:32], "", "SANDMAN_SECRETS_KEY must be 32 random bytes"},
		{"bad previous", keyA, "nope", "SANDMAN_SECRETS_KEY_PREVIOUS must be 32 random bytes"},
		{"previous alone", "", keyA, "without SANDMAN_SECRETS_KEY"},
		{"previous the same", keyA, keyA, "the same key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := keyring.Parse(tc.current, tc.previous)
			if tc.err == "" {
				if err != nil || !k.Enabled() {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
		})
	}
}

func FuzzParseNeverPanicsAndRoundTrips(f *testing.F) {
	f.Add(keyA, "")
	f.Add(keyB, keyA)
	f.Add("", "")
	f.Add("====", "zz")
	f.Fuzz(func(t *testing.T, current, previous string) {
		k, err := keyring.Parse(current, previous)
		if err != nil || !k.Enabled() {
			return
		}
		id, sealed, err := k.Seal([]byte("x"), []byte("ad"))
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := k.Open(id, sealed, []byte("ad")); err != nil || string(plain) != "x" {
			t.Fatalf("round trip: %q, %v", plain, err)
		}
	})
}
