package apptest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// previewProxy builds cmd/previewproxy once per test process, as make previewproxy does, and
// returns its path: the lifecycle uploads it into every sandbox (SANDMAN_PREVIEW_PROXY). The
// go build cache makes it quick after the first time. The binary lives in a directory of the
// temporary directory named after this repository, so test processes of one checkout share it
// (it is replaced by rename: a process reading it sees a whole one) and others' do not.
var previewProxy = sync.OnceValues(func() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot find the repository")
	}
	repo := filepath.Join(filepath.Dir(file), "..", "..")
	sum := sha256.Sum256([]byte(repo))
	dir := filepath.Join(os.TempDir(), "sandman-previewproxy-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "build-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", tmp.Name(), "./cmd/previewproxy")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/previewproxy: %v\n%s", err, out)
	}
	path := filepath.Join(dir, "previewproxy")
	return path, os.Rename(tmp.Name(), path)
})

// PreviewProxy is the preview proxy's binary for tests' instances (previewProxy).
func PreviewProxy(t testing.TB) string {
	t.Helper()
	path, err := previewProxy()
	if err != nil {
		t.Fatalf("build the preview proxy: %v", err)
	}
	return path
}
