package sandboxd

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
)

const idAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// sandboxIDPattern is the provider's rule; the proxy relies on it too, since
// a host label "{port}-{id}" is only unambiguous when ids have no dashes.
var sandboxIDPattern = regexp.MustCompile(`^[a-z0-9]+$`)

// newSandboxID returns "i" and 20 characters of [a-z0-9], like the provider.
func newSandboxID() string {
	b := make([]byte, 20)
	rand.Read(b)
	var sb strings.Builder
	sb.WriteByte('i')
	for _, c := range b {
		// 252 = 7*36: bytes at or above it would bias the alphabet, but a
		// sandbox id needs no uniformity, only uniqueness.
		sb.WriteByte(idAlphabet[int(c)%len(idAlphabet)])
	}
	return sb.String()
}

// parseSandboxID validates a path parameter. A legacy "<id>-<clientID>" form
// is accepted and shortened, as the provider does.
func parseSandboxID(raw string) (string, bool) {
	id, _, _ := strings.Cut(raw, "-")
	if id == "" || len(id) > 64 || !sandboxIDPattern.MatchString(id) {
		return "", false
	}
	return id, true
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	return formatUUID(b)
}

// formatUUID formats b as a version-4 UUID.
func formatUUID(b [16]byte) string {
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
