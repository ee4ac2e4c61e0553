package e2b_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"sandman/e2b"
	"sandman/sandboxd/sandboxdtest"
)

// A process started by one stream can be followed again by its pid from another (a restart of
// Sandman, a resume): the new stream carries what it prints from then on, stdout and stderr
// apart, and its end with the exit code; once it has ended, connecting to it is not found.
func TestAProcessIsFollowedAgainByItsPid(t *testing.T) {
	t.Parallel()
	h := sandboxdtest.Start(t)
	c := clientFor(t, h)
	ctx := t.Context()
	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kill(context.WithoutCancel(ctx), sb.ID) })
	// It waits for a file, then prints one line to each stream and exits 7.
	p, err := c.StartProcess(ctx, sb, e2b.ProcessParams{
		Command: `while [ ! -e go ]; do sleep 0.05; done; echo out-marker; echo err-marker >&2; exit 7`})
	if err != nil {
		t.Fatal(err)
	}
	pid := p.PID
	p.Detach()

	again, err := c.ConnectProcess(ctx, sb, pid)
	if err != nil {
		t.Fatalf("connect to pid %d: %v", pid, err)
	}
	if again.PID != pid {
		t.Fatalf("connected to pid %d, want %d", again.PID, pid)
	}
	var mu sync.Mutex
	var out, errOut strings.Builder
	done := make(chan struct{})
	var res e2b.ProcessResult
	var ferr error
	go func() {
		defer close(done)
		res, ferr = again.Follow(context.WithoutCancel(ctx), func(stdout, stderr []byte) {
			mu.Lock()
			defer mu.Unlock()
			out.Write(stdout)
			errOut.Write(stderr)
		})
	}()
	run(t, c, sb, "touch go")
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the connected stream did not end with the process")
	}
	if ferr != nil {
		t.Fatalf("follow: %v", ferr)
	}
	mu.Lock()
	defer mu.Unlock()
	if res.ExitCode != 7 || out.String() != "out-marker\n" || errOut.String() != "err-marker\n" {
		t.Fatalf("followed: exit %d, stdout %q, stderr %q; want 7, the stdout marker and the stderr marker apart",
			res.ExitCode, out.String(), errOut.String())
	}
	if _, err := c.ConnectProcess(ctx, sb, pid); !errors.Is(err, e2b.ErrNotFound) {
		t.Fatalf("connect to an ended process: %v, want not found", err)
	}
}
