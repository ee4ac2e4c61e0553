package sandboxd_test

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// needs stops a test whose precondition is missing here: a skip on a
// developer's machine, a failure in CI (CI=true), where every isolation
// test must run.
func needs(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and this test cannot run: %s", msg)
	}
	t.Skipf("skipped: %s (CI=true makes this a failure)", msg)
}

// report reads the isolation and limits the sandboxd under test enforces.
func (c *client) report() sandboxd.IsolationReport {
	c.t.Helper()
	var r sandboxd.IsolationReport
	c.must(http.StatusOK, "GET", "/_sandboxd/isolation", nil, &r)
	return r
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// sandboxdBinary builds cmd/sandboxd once per test binary into a directory
// every user can reach, so that an unprivileged uid can run it.
func sandboxdBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sandboxd-bin-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			buildErr = err
			return
		}
		goTool, err := exec.LookPath("go")
		if err != nil {
			buildErr = fmt.Errorf("the go command, to build cmd/sandboxd: %w", err)
			return
		}
		builtBin = filepath.Join(dir, "sandboxd")
		out, err := exec.Command(goTool, "build", "-o", builtBin, "sandman/cmd/sandboxd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build cmd/sandboxd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// procOptions start a sandboxd subprocess.
type procOptions struct {
	// uid runs it as that user (0: as the test, root); its state
	// directory is that user's.
	uid int
	// cgroups are directories (one per v1 hierarchy) it joins before it
	// starts, as a delegated cgroup would be given to it.
	cgroups []string
	// stateDir reuses a state directory (a restart); empty makes one.
	stateDir string
	apiKey   string
	// webhookURL and webhookSecret configure the static webhook.
	webhookURL, webhookSecret string
	// uidBase is a root sandboxd's --uid-base (0: one picked at random);
	// a restart on the same state directory must pass the same.
	uidBase int
	args    []string
}

// proc is a sandboxd running as a subprocess, with the secrets it was
// given and a Host to drive it with.
type proc struct {
	opts procOptions
	cmd  *exec.Cmd
	host *sandboxdtest.Host
	logs *syncLog
	done chan struct{}
}

type syncLog struct {
	mu    sync.Mutex
	lines []string
}

// Write takes log output line by line (an slog handler's sink).
func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	return len(p), nil
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// startProc starts cmd/sandboxd as opts say and waits until it listens.
// The test's end stops it (SIGTERM) unless the test killed it.
func startProc(t *testing.T, opts procOptions) *proc {
	t.Helper()
	bin := sandboxdBinary(t)
	if opts.apiKey == "" {
		key := make([]byte, 20)
		rand.Read(key)
		opts.apiKey = "e2b_" + hex.EncodeToString(key)
	}
	if opts.stateDir == "" {
		opts.stateDir = sandboxdtest.StateDir(t)
		if opts.uid != 0 {
			if err := os.Chown(opts.stateDir, opts.uid, opts.uid); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(opts.stateDir, 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	if opts.uidBase == 0 {
		opts.uidBase = sandboxdtest.UIDBase()
	}
	args := append([]string{"--api-addr", "127.0.0.1:0", "--sandbox-addr", "127.0.0.1:0",
		"--state-dir", opts.stateDir, "--log-format", "text", "--log-level", "debug",
		"--uid-base", strconv.Itoa(opts.uidBase)}, opts.args...)
	if opts.webhookURL != "" {
		args = append(args, "--webhook-url", opts.webhookURL)
	}
	// A shell joins the cgroups and drops to the uid, then becomes sandboxd:
	// it starts inside them, as under a supervisor that delegates a cgroup.
	script := `for d in $CGROUPS; do echo $$ > "$d/cgroup.procs" || exit 1; done; `
	if opts.uid != 0 {
		// --pdeathsig: changing uid clears the parent-death signal, and a
		// sandboxd must not outlive a test binary that crashed.
		script += fmt.Sprintf(`exec setpriv --reuid=%d --regid=%d --clear-groups --pdeathsig=KILL -- "$@"`, opts.uid, opts.uid)
	} else {
		script += `exec "$@"`
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, "sh", bin}, args...)...)
	cmd.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"E2B_API_KEY=" + opts.apiKey,
		"E2B_WEBHOOK_SECRET=" + opts.webhookSecret,
		"CGROUPS=" + strings.Join(opts.cgroups, " "),
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{opts: opts, cmd: cmd, logs: &syncLog{}, done: make(chan struct{})}
	listening := make(chan [2]string, 1)
	go func() {
		re := regexp.MustCompile(`api_url=(\S+) sandbox_url=(\S+)`)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.logs.mu.Lock()
			p.logs.lines = append(p.logs.lines, line)
			p.logs.mu.Unlock()
			if m := re.FindStringSubmatch(line); m != nil {
				listening <- [2]string{m[1], m[2]}
			}
			if os.Getenv("SANDBOXD_TEST_LOG") != "" {
				fmt.Fprintln(os.Stderr, "sandboxd:", line)
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t) })
	select {
	case urls := <-listening:
		domain := strings.TrimPrefix(urls[1], "http://")
		p.host = &sandboxdtest.Host{APIURL: urls[0], SandboxURL: urls[1], Domain: domain, APIKey: opts.apiKey, StateDir: opts.stateDir}
	case <-p.done:
		t.Fatalf("sandboxd exited before listening:\n%s", p.logs)
	case <-time.After(30 * time.Second):
		t.Fatalf("sandboxd did not listen within 30s:\n%s", p.logs)
	}
	return p
}

// client drives the subprocess like the in-process hosts.
func (p *proc) client(t *testing.T) *client {
	return &client{t: t, h: p.host, http: p.host.HTTPClient()}
}

// stop ends sandboxd with SIGTERM, as Ctrl-C on make run would.
func (p *proc) stop(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		t.Errorf("sandboxd did not stop on SIGTERM:\n%s", p.logs)
	}
}

// crash kills sandboxd at once, leaving whatever it had running.
func (p *proc) crash() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// sandboxdPid is the pid of sandboxd itself (the shell exec'd into it).
func (p *proc) sandboxdPid() int { return p.cmd.Process.Pid }

// delegatedCgroups makes one cgroup per v1 hierarchy sandboxd uses, under
// this test's own, owned by uid, as a supervisor delegating a subtree
// would. It is removed when the test ends.
func delegatedCgroups(t *testing.T, uid int) []string {
	t.Helper()
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	name := fmt.Sprintf("sandboxd-test-delegated-%d", os.Getpid())
	for _, line := range strings.Split(strings.TrimSpace(string(own)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range []string{"memory", "pids", "cpu", "freezer"} {
			if !strings.Contains(","+parts[1]+",", ","+c+",") {
				continue
			}
			mount := filepath.Join("/sys/fs/cgroup", parts[1])
			if _, err := os.Stat(mount); err != nil {
				continue
			}
			dir := filepath.Join(mount, parts[2], name+"-"+strconv.Itoa(len(dirs)))
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { removeTestCgroup(dir) })
			// Delegation: the directory and the files that place processes.
			for _, f := range []string{"", "cgroup.procs", "tasks"} {
				if err := os.Chown(filepath.Join(dir, f), uid, uid); err != nil {
					t.Fatal(err)
				}
			}
			dirs = append(dirs, dir)
		}
	}
	needs(t, len(dirs) == 4, "v1 memory, pids, cpu and freezer hierarchies to delegate (found %v)", dirs)
	return dirs
}

// removeTestCgroup removes a delegated cgroup and what sandboxd left in it.
func removeTestCgroup(dir string) {
	var rm func(string)
	rm = func(d string) {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.IsDir() {
				rm(filepath.Join(d, e.Name()))
			}
		}
		for range 50 {
			if err := syscall.Rmdir(d); err == nil || os.IsNotExist(err) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	rm(dir)
}

// testUID is an unprivileged host uid for sandboxd subprocesses, away from
// the range root sandboxd gives sandboxes and from other test binaries.
func testUID() int { return 1_900_000_000 + os.Getpid()%1_000_000 }
