// Package keyring seals small values kept at rest (founders' secrets, webhook signing secrets)
// with AES-256-GCM under the operator's key (SANDMAN_SECRETS_KEY), and opens them under it or
// the previous one (SANDMAN_SECRETS_KEY_PREVIOUS) while a rotation re-seals them
// (docs/architecture.md, "Secrets at rest"). Each sealed value is stored with the id of the key
// that sealed it, and is bound to associated data chosen by the caller (what it belongs to), so
// a sealed value copied to another row does not open.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of a key: AES-256.
const KeySize = 32

var (
	// ErrNoKey: no key is configured, so nothing can be sealed or opened.
	ErrNoKey = errors.New("keyring: no key configured (SANDMAN_SECRETS_KEY)")
	// ErrUnknownKey: the value was sealed under a key that is neither the current nor the
	// previous one.
	ErrUnknownKey = errors.New("keyring: sealed under a key this instance does not have")
	// ErrOpen: the value does not open under its key with this associated data: it was changed,
	// or it belongs to another row.
	ErrOpen = errors.New("keyring: the sealed value does not open")
)

// Overhead is what sealing adds to a value's length: GCM's 12-byte nonce and 16-byte tag.
const Overhead = 12 + 16

// Keyring holds the current key and, during a rotation, the previous one. The zero of a
// *Keyring (nil) has no key: it refuses to seal or open.
type Keyring struct {
	current  key
	previous *key
}

type key struct {
	id   string
	aead cipher.AEAD
}

// Parse makes a Keyring of the current key and, if not empty, the previous one, each 32 bytes
// written as 64 hex characters or as base64. An empty current key with an empty previous one is
// no keyring (nil, nil): secrets are off.
func Parse(current, previous string) (*Keyring, error) {
	current, previous = strings.TrimSpace(current), strings.TrimSpace(previous)
	if current == "" {
		if previous != "" {
			return nil, errors.New("SANDMAN_SECRETS_KEY_PREVIOUS is set without SANDMAN_SECRETS_KEY: set the new key too")
		}
		return nil, nil
	}
	cur, err := parseKey(current)
	if err != nil {
		return nil, fmt.Errorf("SANDMAN_SECRETS_KEY %w", err)
	}
	k := &Keyring{current: cur}
	if previous != "" {
		prev, err := parseKey(previous)
		if err != nil {
			return nil, fmt.Errorf("SANDMAN_SECRETS_KEY_PREVIOUS %w", err)
		}
		if prev.id == cur.id {
			return nil, errors.New("SANDMAN_SECRETS_KEY_PREVIOUS is the same key as SANDMAN_SECRETS_KEY")
		}
		k.previous = &prev
	}
	return k, nil
}

func parseKey(s string) (key, error) {
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != KeySize {
		raw, err = base64.StdEncoding.DecodeString(s)
		if err != nil {
			raw, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
		}
	}
	if err != nil || len(raw) != KeySize {
		return key{}, fmt.Errorf("must be %d random bytes, as %d hex characters (openssl rand -hex %d) or base64", KeySize, 2*KeySize, KeySize)
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	// The id names the key without revealing it: a hash of it, under a label of its own so it
	// is no hash anything else computes of the key.
	sum := sha256.Sum256(append([]byte("sandman keyring id\x00"), raw...))
	return key{id: hex.EncodeToString(sum[:6]), aead: aead}, nil
}

// Enabled says whether values can be sealed.
func (k *Keyring) Enabled() bool { return k != nil }

// CurrentID is the id of the key new values are sealed under ("" without a key).
func (k *Keyring) CurrentID() string {
	if k == nil {
		return ""
	}
	return k.current.id
}

// Seal seals plain bound to ad (what it belongs to: the same ad opens it), under the current
// key, and returns the key's id with the sealed bytes (nonce, then ciphertext and tag).
func (k *Keyring) Seal(plain, ad []byte) (keyID string, sealed []byte, err error) {
	if k == nil {
		return "", nil, ErrNoKey
	}
	a := k.current.aead
	out := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	if _, err := rand.Read(out); err != nil {
		return "", nil, err
	}
	return k.current.id, a.Seal(out, out, plain, ad), nil
}

// Open opens a value sealed under keyID with ad.
func (k *Keyring) Open(keyID string, sealed, ad []byte) ([]byte, error) {
	if k == nil {
		return nil, ErrNoKey
	}
	var a cipher.AEAD
	switch {
	case keyID == k.current.id:
		a = k.current.aead
	case k.previous != nil && keyID == k.previous.id:
		a = k.previous.aead
	default:
		return nil, ErrUnknownKey
	}
	if len(sealed) < a.NonceSize()+a.Overhead() {
		return nil, ErrOpen
	}
	plain, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], ad)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// Stale says whether a value sealed under keyID should be sealed again under the current key
// (a rotation's work).
func (k *Keyring) Stale(keyID string) bool { return k != nil && keyID != k.current.id }
