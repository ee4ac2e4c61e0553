package sandboxd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// detectIsolation resolves IsolationAuto and checks that the chosen mode
// works here, returning why the mode was picked.
func detectIsolation(want Isolation) (Isolation, string, error) {
	if _, err := os.Stat("/usr/bin/sleep"); err != nil {
		return "", "", fmt.Errorf("sandboxd: /usr/bin/sleep is needed to hold sandbox process groups: %w", err)
	}
	if want == IsolationNone {
		return IsolationNone, "configured", nil
	}
	err := probeBwrap()
	switch {
	case err == nil:
		return IsolationBwrap, "bubblewrap works", nil
	case want == IsolationBwrap:
		return "", "", fmt.Errorf("sandboxd: bubblewrap isolation unavailable: %w", err)
	default:
		return IsolationNone, "bubblewrap unavailable (" + err.Error() + "): sandboxes share the host network, so two of them cannot listen on one port", nil
	}
}

func probeBwrap() error {
	// Entering a sandbox's namespaces from outside (nsenter, setns for
	// dials) needs CAP_SYS_ADMIN in the host namespaces.
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root to enter sandbox namespaces")
	}
	for _, bin := range []string{"bwrap", "nsenter"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found (apt-get install bubblewrap util-linux)", bin)
		}
	}
	if _, err := os.Stat("/usr/bin/env"); err != nil {
		return fmt.Errorf("/usr/bin/env: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "sandboxd-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := append(bwrapArgs("probe", dir, dir), "--", "/usr/bin/true")
	out, err := exec.CommandContext(ctx, "bwrap", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bwrap failed: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
