package e2b_test

import (
	"errors"
	"testing"

	"sandman/e2b"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// TestContractOf2026AgainstSandboxd: the lifecycle fields the client sends on create come back
// from GetSandbox, a timeout of zero is never sent, and a sandbox whose envd was upgraded while
// it slept is driven with what the resume answered (the client caches nothing per sandbox).
func TestContractOf2026AgainstSandboxd(t *testing.T) {
	t.Parallel()
	h := sandboxdtest.Start(t)
	c := clientFor(t, h)
	ctx := t.Context()
	for _, tt := range []struct {
		p    e2b.CreateParams
		want e2b.Lifecycle
	}{
		{e2b.CreateParams{Template: "base", OnTimeout: e2b.OnTimeoutKill, Secure: true}, e2b.Lifecycle{OnTimeout: e2b.OnTimeoutKill}},
		{e2b.CreateParams{Template: "base"}, e2b.Lifecycle{OnTimeout: e2b.OnTimeoutKill}},
		{e2b.CreateParams{Template: "base", OnTimeout: e2b.OnTimeoutPause, FilesystemOnlyPause: true}, e2b.Lifecycle{OnTimeout: e2b.OnTimeoutPause}},
		{e2b.CreateParams{Template: "base", OnTimeout: e2b.OnTimeoutPause, AutoResume: true}, e2b.Lifecycle{OnTimeout: e2b.OnTimeoutPause, AutoResume: true}},
	} {
		sb, err := c.CreateSandbox(ctx, tt.p)
		if err != nil {
			t.Fatalf("create %+v: %v", tt.p, err)
		}
		got, err := c.GetSandbox(ctx, sb.ID)
		if err != nil || got.Lifecycle == nil || *got.Lifecycle != tt.want {
			t.Errorf("created with %+v: lifecycle read back %+v (%v), want %+v", tt.p, got.Lifecycle, err, tt.want)
		}
	}

	sb, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 600, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Connect(ctx, sb.ID, 0); !errors.Is(err, e2b.ErrInvalid) {
		t.Errorf("connect with timeout 0 = %v, want ErrInvalid before any request", err)
	}
	if _, err := c.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: -1}); !errors.Is(err, e2b.ErrInvalid) {
		t.Errorf("create with a negative timeout = %v, want ErrInvalid", err)
	}
	if err := c.UploadFiles(ctx, sb, []e2b.File{{Path: "app/a.txt", Content: []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pause(ctx, sb.ID, true); err != nil {
		t.Fatal(err)
	}
	h.RestartWith(t, func(cfg *sandboxd.Config) { cfg.EnvdVersion = "0.7.1" })
	resumed, _, err := c.Connect(ctx, sb.ID, 300)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.EnvdVersion != "0.7.1" || sb.EnvdVersion == resumed.EnvdVersion {
		t.Fatalf("envd %q before the pause, %q after the resume; want the upgrade to show", sb.EnvdVersion, resumed.EnvdVersion)
	}
	got, err := c.DigestFiles(ctx, resumed, "app", []string{"a.txt"})
	if err != nil || !got.DirExists || !got.Files[0].Regular {
		t.Fatalf("envd after the upgrade: %+v, %v", got, err)
	}
}
