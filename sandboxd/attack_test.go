package sandboxd_test

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
)

// The attacks of issue 9, run from inside a sandbox through envd as the
// provider's SDK would, each asserting that the host is untouched. They
// are written so that a broken defence cannot harm the machine: markers
// are unique and removed, floods and allocations are bounded, and every
// sandbox is killed when its test ends.

// attackLimits are small, so that the attacks reach them quickly.
var attackLimits = sandboxd.Limits{Memory: 256 << 20, Pids: 256, Disk: 64 << 20}

// attackTarget is the sandboxd under attack and what it was given.
type attackTarget struct {
	c                     *client
	apiKey, webhookSecret string
	// hostBinary is the path of the executable sandboxd runs from.
	hostBinary string
	// sandboxdPid is sandboxd's own process on the host.
	sandboxdPid int
	// enforced lists the limits this configuration must enforce; the
	// others must be reported off, with a reason.
	enforced []string
	// hostUID checks the host uid a sandbox's processes run as.
	hostUID func(uid int) error
	// logs is what sandboxd has logged so far.
	logs *syncLog
}

// randomMarker is prefix and twelve random digits: unique on the host, and
// still a number after "sleep 300." so that it can name a process.
func randomMarker(prefix string) string {
	b := make([]byte, 6)
	rand.Read(b)
	n := new(big.Int).SetBytes(b)
	return fmt.Sprintf("%s%012d", prefix, n.Mod(n, big.NewInt(1e12)))
}

func runAttacks(t *testing.T, tg attackTarget) {
	c := tg.c
	r := c.report()
	if r.Mode != sandboxd.IsolationBwrap {
		t.Fatalf("sandboxd under attack is not isolated: %+v", r)
	}
	for _, l := range []string{"memory", "pids", "cpu", "disk"} {
		_, on := r.Limits[l]
		if want := slices.Contains(tg.enforced, l); on != want {
			t.Fatalf("limit %s in force = %v, want %v: %+v", l, on, want, r)
		}
		if !on && r.Off[l] == "" {
			t.Fatalf("limit %s is off without a reason: %+v", l, r)
		}
	}
	// The I/O weight depends on the host's disks: in force, or off with why.
	if r.Limits["io"] == "" && r.Off["io"] == "" {
		t.Fatalf("the I/O weight is neither in force nor off with a reason: %+v", r)
	}
	// limit runs a limit's attack where it is in force.
	limit := func(t *testing.T, name string) bool {
		if !slices.Contains(tg.enforced, name) {
			t.Logf("%s limit off in this configuration (%s): nothing to attack", name, r.Off[name])
			return false
		}
		return true
	}

	t.Run("the API reports the limits as the sandbox's size", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		d := c.info(c.create(nil).SandboxID)
		if slices.Contains(tg.enforced, "memory") && int64(d.MemoryMB)<<20 != attackLimits.Memory {
			t.Errorf("memoryMB %d, want the %s limit", d.MemoryMB, formatMiB(attackLimits.Memory))
		}
		if slices.Contains(tg.enforced, "disk") && int64(d.DiskSizeMB)<<20 != attackLimits.Disk {
			t.Errorf("diskSizeMB %d, want the %s limit", d.DiskSizeMB, formatMiB(attackLimits.Disk))
		}
	})

	t.Run("capabilities", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		sb := c.create(nil)
		marker := randomMarker("sleep 300.")
		c.startBackground(sb, marker)
		res := c.run(sb, `grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs):' /proc/self/status /proc/1/status; id -u; id -un`)
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		if len(lines) != 14 || lines[12] != "1000" || lines[13] != "user" {
			t.Fatalf("status and id: %q %q", res.stdout, res.stderr)
		}
		for _, l := range lines[:12] {
			if strings.Contains(l, "Cap") && !strings.HasSuffix(l, "\t0000000000000000") || strings.Contains(l, "NoNewPrivs") && !strings.HasSuffix(l, "\t1") {
				t.Errorf("inside the sandbox: %s", l)
			}
		}
		// On the host, the sandbox's processes belong to an unprivileged uid.
		var pids []int
		waitFor(t, "the background process", 5*time.Second, func() bool { pids = pidsRunning(marker); return len(pids) > 0 })
		for _, pid := range pids {
			uid, caps := hostStatus(t, pid)
			if err := tg.hostUID(uid); err != nil || uid == 0 {
				t.Errorf("sandbox process %d runs as host uid %d: %v", pid, uid, err)
			}
			if caps != "0000000000000000" {
				t.Errorf("sandbox process %d has effective capabilities %s", pid, caps)
			}
		}
	})

	t.Run("limits hold every process, from the agent on", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		if len(tg.enforced) == 0 || tg.enforced[0] != "memory" {
			t.Logf("no cgroup limits in this configuration")
			return
		}
		sb := c.create(nil)
		marker := randomMarker("sleep 300.")
		c.startBackground(sb, marker)
		var pids []int
		waitFor(t, "the background process", 5*time.Second, func() bool { pids = pidsRunning(marker); return len(pids) > 0 })
		// From the command up to the sandbox's PID 1, the agent.
		chain := []int{pids[0]}
		for pid := pids[0]; nsPid(t, pid) != 1; {
			pid = hostParent(t, pid)
			chain = append(chain, pid)
		}
		for _, pid := range chain {
			for controller, want := range map[string][]string{
				"memory": {"memory.limit_in_bytes", "memory.max", strconv.FormatInt(attackLimits.Memory, 10)},
				"pids":   {"pids.max", "pids.max", strconv.Itoa(attackLimits.Pids)},
				"cpu":    {"cpu.shares", "cpu.weight", "1024", "100"},
			} {
				got, v2 := hostCgroupFile(t, pid, controller, want[0], want[1])
				exp := want[2]
				if v2 && controller == "cpu" {
					exp = want[3]
				}
				if got != exp {
					t.Errorf("process %d: %s = %q, want %q", pid, controller, got, exp)
				}
			}
		}
	})

	t.Run("read-only host directories", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		sb := c.create(nil)
		marker := randomMarker("sandboxd-attack-")
		for _, d := range []string{"/etc", "/usr"} {
			p := filepath.Join(d, marker)
			t.Cleanup(func() { os.Remove(p) })
		}
		res := c.run(sb, fmt.Sprintf(`mount -o remount,rw /etc; echo "remount-etc=$?"; mount -o remount,rw /usr; echo "remount-usr=$?"
mount -o remount,rw /; echo "remount-root=$?"; touch /etc/%[1]s; echo "touch-etc=$?"; echo x > /usr/%[1]s; echo "write-usr=$?"
unshare -Ur true; echo "userns=$?"`, marker))
		for _, step := range []string{"remount-etc", "remount-usr", "remount-root", "touch-etc", "write-usr", "userns"} {
			if !regexp.MustCompile(`(?m)^` + step + `=[1-9][0-9]*$`).MatchString(res.stdout) {
				t.Errorf("%s succeeded inside the sandbox: %q %q", step, res.stdout, res.stderr)
			}
		}
		req := c.envdRequest(sb, "POST", "/files?path=/etc/"+marker, strings.NewReader("x"))
		req.Header.Set("Content-Type", "application/octet-stream")
		if status, body := c.envdDo(req); status != 403 {
			t.Errorf("files API write to /etc: %d %s", status, body)
		}
		for _, d := range []string{"/etc", "/usr"} {
			if _, err := os.Stat(filepath.Join(d, marker)); err == nil {
				t.Errorf("the sandbox created %s on the host", filepath.Join(d, marker))
			}
		}
	})

	t.Run("host shadow", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		sb := c.create(nil)
		host, hostErr := os.ReadFile("/etc/shadow")
		res := c.run(sb, "cat /etc/shadow")
		status, body := c.envdDo(c.envdRequest(sb, "GET", "/files?path=/etc/shadow", nil))
		for what, got := range map[string]string{"commands": res.stdout, "files API": string(body)} {
			if hostErr == nil && strings.TrimSpace(got) != "" && strings.Contains(string(host), strings.TrimSpace(got)) {
				t.Errorf("%s read the host's /etc/shadow: %q", what, got)
			}
			if hostErr == nil && strings.Contains(got, strings.SplitN(string(host), "\n", 2)[0]) {
				t.Errorf("%s read a line of the host's /etc/shadow", what)
			}
		}
		// What they read is the sandbox's own, with no password of anyone's.
		if !strings.Contains(res.stdout, "user:*:") || status != 200 || string(body) != res.stdout {
			t.Errorf("the sandbox's own shadow: command %q, files API %d %q", res.stdout, status, body)
		}
	})

	t.Run("no host process or secret in /proc", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		sb := c.create(nil)
		res := c.run(sb, `ls -d /proc/[0-9]* | wc -l; for f in /proc/[0-9]*/cmdline /proc/[0-9]*/environ; do tr '\0' '\n' < $f; echo; done 2>/dev/null`)
		count, rest, _ := strings.Cut(res.stdout, "\n")
		if n, err := strconv.Atoi(strings.TrimSpace(count)); err != nil || n > 8 {
			t.Errorf("the sandbox sees %s processes: %s", count, rest)
		}
		for _, secret := range []string{tg.apiKey, tg.webhookSecret, tg.hostBinary, os.Args[0], "bwrap", "E2B_API_KEY", "E2B_WEBHOOK_SECRET"} {
			if secret != "" && strings.Contains(rest, secret) {
				t.Errorf("%q is visible in the sandbox's /proc:\n%s", secret, rest)
			}
		}
		if tg.sandboxdPid != 0 {
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", tg.sandboxdPid))
			if err != nil || bytes.Contains(cmdline, []byte(tg.apiKey)) || bytes.Contains(cmdline, []byte(tg.webhookSecret)) {
				t.Errorf("sandboxd's command line holds a secret: %q %v", cmdline, err)
			}
		}
	})

	t.Run("host loopback", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var accepted atomic.Int32
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				conn.Close()
			}
		}()
		port := ln.Addr().(*net.TCPAddr).Port
		apiPort := strings.TrimPrefix(c.h.APIURL, "http://127.0.0.1:")
		sb := c.create(nil)
		res := c.run(sb, fmt.Sprintf(`for p in %d %s; do timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$p" 2>/dev/null && echo "reached $p" || echo "unreachable $p"; done`, port, apiPort))
		if want := fmt.Sprintf("unreachable %d\nunreachable %s\n", port, apiPort); res.stdout != want {
			t.Errorf("from the sandbox, the host's loopback: %q, want %q", res.stdout, want)
		}
		if status, _ := c.preview(sb.SandboxID, port); status != 502 {
			t.Errorf("the sandbox's preview of port %d answered %d", port, status)
		}
		if n := accepted.Load(); n != 0 {
			t.Errorf("the host's listener accepted %d connections from the sandbox", n)
		}
	})

	t.Run("another sandbox", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		a, b := c.create(nil), c.create(nil)
		c.startCounter(a, 3000)
		secret := randomMarker("a-only-")
		c.upload(a, "/home/user/secret.txt", secret)
		if status, body := c.preview(b.SandboxID, 3000); status != 502 || strings.Contains(body, "Visits") {
			t.Errorf("b's preview reached a server: %d %q", status, body)
		}
		res := c.run(b, `timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/3000" 2>/dev/null && echo reached || echo unreachable; cat /home/user/secret.txt; ls -a /home /tmp`)
		if !strings.HasPrefix(res.stdout, "unreachable\n") || strings.Contains(res.stdout, secret) {
			t.Errorf("b reached a's server or files: %q", res.stdout)
		}
		if got := c.waitPreview(a.SandboxID, 3000); got != "Visits: 2" {
			t.Errorf("a's server was visited by someone else: %q", got)
		}
	})

	t.Run("process flood", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		if !limit(t, "pids") {
			return
		}
		sb := c.create(nil)
		marker := randomMarker("30.")
		// dash stops at the first fork that fails; each sleep ends by
		// itself after 30s, and the sandbox's kill takes them all at once.
		res := c.run(sb, fmt.Sprintf(`sh -c 'i=0; while [ $i -lt 3000 ]; do sleep %s >/dev/null 2>&1 & i=$((i+1)); echo $i; done' 2>&1 | tail -n 2`, marker))
		c.must(204, "DELETE", "/sandboxes/"+sb.SandboxID, nil, nil)
		var started int
		for _, l := range strings.Split(res.stdout, "\n") {
			if n, err := strconv.Atoi(l); err == nil {
				started = n
			}
		}
		if started == 0 || started >= attackLimits.Pids || !strings.Contains(res.stdout, "fork") {
			t.Errorf("a 3000-process flood started %d processes (limit %d): %q %q", started, attackLimits.Pids, res.stdout, res.stderr)
		}
		if left := pidsRunning(marker); len(left) > 0 {
			t.Errorf("%d flood processes outlived the sandbox", len(left))
		}
	})

	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		if !limit(t, "memory") {
			return
		}
		sb := c.create(nil)
		res := c.run(sb, `node -e 'const a = []; for (let i = 0; i < 64; i++) a.push(Buffer.alloc(64 << 20, 1)); console.log("allocated", a.length * 64, "MiB")'; echo "exit=$?"`)
		if strings.Contains(res.stdout, "allocated") || !strings.Contains(res.stdout, "exit=137") {
			t.Errorf("a 4 GiB allocation under a %s limit: %q %q", formatMiB(attackLimits.Memory), res.stdout, res.stderr)
		}
		// Only the process was killed: the sandbox goes on.
		if res := c.run(sb, "echo alive"); res.stdout != "alive\n" {
			t.Errorf("after the OOM kill: %+v", res)
		}
	})

	t.Run("system-call filter", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		sb := c.create(nil)
		c.uploadProbe(sb)
		res := c.run(sb, `grep -h '^Seccomp:' /proc/self/status /proc/1/status; ./probe syscalls`)
		if !strings.HasPrefix(res.stdout, "Seccomp:\t2\nSeccomp:\t2\n") {
			t.Errorf("the sandbox's processes, the agent among them, are not under a filter: %q %q", res.stdout, res.stderr)
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(res.stdout), "\n") {
			if name, answer, ok := strings.Cut(l, " "); ok && !strings.HasPrefix(l, "Seccomp:") {
				got[name] = answer
			}
		}
		for name, want := range probeWants() {
			if got[name] != want {
				t.Errorf("%s from inside the sandbox: %q, want %s", name, got[name], want)
			}
		}
		// The filter is reported as it is enforced.
		if f := r.Syscalls; f == nil || f.Denied["keyctl"] == "" || f.Denied["io_uring_setup"] == "" || f.Restricted["socket"] == "" {
			t.Errorf("GET /_sandboxd/isolation does not report the filter: %+v", f)
		}
	})

	t.Run("node, npm, python, git and bash run under the filter", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		sb := c.create(nil)
		// A worker thread: glibc's pthread_create tries clone3 first.
		res := c.run(sb, `node -e 'const {Worker} = require("worker_threads"); new Worker("require(\"worker_threads\").parentPort.postMessage(6 * 7)", {eval: true}).on("message", m => console.log("node", m))'
npm --version >/dev/null && echo npm
python3 -c 'import threading; t = threading.Thread(target=print, args=("python",)); t.start(); t.join()'
cd /tmp && git init -q repo && cd repo && git -c user.email=a@example.com -c user.name=a commit -q --allow-empty -m first && echo "git $(git log --oneline | wc -l)"
bash -l -c 'echo bash'`)
		if want := "node 42\nnpm\npython\ngit 1\nbash\n"; res.stdout != want || res.exitCode != 0 {
			t.Errorf("programs under the filter: %q (exit %d), want %q; stderr %q", res.stdout, res.exitCode, want, res.stderr)
		}
	})

	t.Run("kernel keyrings", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		// A key in the session keyring sandboxd was started with (this
		// test's): a sandbox that kept that keyring could read it.
		secret := randomMarker("key-")
		id, err := unix.AddKey("user", randomMarker("sandboxd-attack-"), []byte(secret), unix.KEY_SPEC_SESSION_KEYRING)
		if err != nil {
			t.Fatalf("add a host key: %v", err)
		}
		t.Cleanup(func() { _, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0) })
		a, b := c.create(nil), c.create(nil)
		for _, sb := range []sandboxBody{a, b} {
			c.uploadProbe(sb)
		}
		// a tries to add a key of its own; b tries to read the host's.
		resA := c.run(a, `./probe syscalls | grep -E '^(add_key|keyctl) '`)
		resB := c.run(b, fmt.Sprintf(`wc -c < /proc/keys; wc -c < /proc/key-users; ./probe readkey %d`, id))
		if resA.stdout != "keyctl EPERM\nadd_key EPERM\n" {
			t.Errorf("sandbox a's keyring calls: %q %q", resA.stdout, resA.stderr)
		}
		if resB.stdout != "0\n0\nreadkey EPERM\n" || strings.Contains(resB.stdout+resB.stderr, secret) {
			t.Errorf("sandbox b on the host's key %d: %q %q", id, resB.stdout, resB.stderr)
		}
	})

	t.Run("signals to the agent", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		sb := c.create(nil)
		res := c.run(sb, `for s in SYS ABRT ILL TRAP SEGV BUS FPE TERM QUIT HUP INT USR1 USR2 PIPE ALRM; do kill -$s 1 || echo "kill -$s failed"; done; sleep 0.5; echo sent`)
		if res.stdout != "sent\n" {
			t.Errorf("signalling PID 1: %q %q", res.stdout, res.stderr)
		}
		if res := c.run(sb, "echo alive"); res.stdout != "alive\n" {
			t.Errorf("the sandbox after signals to its agent: %+v", res)
		}
		for _, l := range strings.Split(tg.logs.String(), "\n") {
			if strings.Contains(l, sb.SandboxID) && strings.Contains(l, "sandbox runtime") {
				t.Errorf("sandboxd logged the agent's output: %s", l)
			}
		}
	})

	t.Run("core dumps and ptys", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		sb := c.create(nil)
		c.uploadProbe(sb)
		res := c.run(sb, `ulimit -c; ulimit -Hc; (ulimit -c unlimited) 2>/dev/null && echo raised || echo refused; ./probe ptys 200 | cut -d' ' -f1-2`)
		if want := fmt.Sprintf("0\n0\nrefused\nptys %s\n", r.Limits["ptys"]); r.Limits["ptys"] == "" || res.stdout != want {
			t.Errorf("core limit and ptys: %q, want %q (%q)", res.stdout, want, res.stderr)
		}
	})

	t.Run("disk fill", func(t *testing.T) {
		t.Parallel()
		c := c.forTest(t)
		if !limit(t, "disk") {
			return
		}
		sb := c.create(nil)
		res := c.run(sb, `dd if=/dev/zero of=/home/user/fill bs=1M count=200 2>&1; echo "exit=$?"; du -m /home/user/fill | cut -f1`)
		if !strings.Contains(res.stdout, "No space left on device") || !strings.Contains(res.stdout, "exit=1") {
			t.Errorf("writing 200 MiB under a %s limit: %q", formatMiB(attackLimits.Disk), res.stdout)
		}
		lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
		if mib, err := strconv.Atoi(lines[len(lines)-1]); err != nil || int64(mib)<<20 > attackLimits.Disk {
			t.Errorf("the file grew to %s MiB", lines[len(lines)-1])
		}
		// Through the files API, the write fails the way envd says it.
		req := c.envdRequest(sb, "POST", "/files?path=/tmp/big", bytes.NewReader(make([]byte, 80<<20)))
		req.Header.Set("Content-Type", "application/octet-stream")
		if status, body := c.envdDo(req); status != http.StatusInsufficientStorage {
			t.Errorf("an 80 MiB upload answered %d %s, want 507", status, body)
		}
	})
}

// nsPid is a host process's pid in its own PID namespace.
func nsPid(t *testing.T, pid int) int {
	f := statusField(t, pid, "NSpid:")
	n, _ := strconv.Atoi(f[len(f)-1])
	return n
}

func hostParent(t *testing.T, pid int) int {
	n, _ := strconv.Atoi(statusField(t, pid, "PPid:")[0])
	return n
}

func statusField(t *testing.T, pid int, name string) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == name {
			return f[1:]
		}
	}
	t.Fatalf("no %s in the status of %d", name, pid)
	return nil
}

// hostCgroupFile reads a limit of the cgroup a host process is in: v1Name
// where the controller has a v1 hierarchy, v2Name in the unified one.
func hostCgroupFile(t *testing.T, pid int, controller, v1Name, v2Name string) (value string, v2 bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	var unified string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			unified = parts[2]
		}
		if slices.Contains(strings.Split(parts[1], ","), controller) {
			v, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", parts[1], parts[2], v1Name))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(v)), false
		}
	}
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if v, err := os.ReadFile(filepath.Join(root, unified, v2Name)); err == nil {
			return strings.TrimSpace(string(v)), true
		}
	}
	t.Fatalf("process %d: no %s controller", pid, controller)
	return "", false
}

func formatMiB(n int64) string { return strconv.FormatInt(n>>20, 10) + " MiB" }

// hostStatus reads a host process's uid and effective capabilities.
func hostStatus(t *testing.T, pid int) (uid int, capEff string) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 1 && f[0] == "Uid:":
			uid, _ = strconv.Atoi(f[1])
		case len(f) > 1 && f[0] == "CapEff:":
			capEff = f[1]
		}
	}
	return uid, capEff
}

func TestAttacksAsRoot(t *testing.T) {
	t.Parallel()
	needs(t, os.Geteuid() == 0, "root (CI runs as root)")
	rcv := newReceiver(t, randomMarker("secret-"))
	logs := &syncLog{}
	c := newClient(t, sandboxdtest.WithConfig(func(cfg *sandboxd.Config) {
		cfg.Limits = attackLimits
		cfg.WebhookURL, cfg.WebhookSecret = rcv.srv.URL, rcv.secret
		cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}))
	needs(t, c.h.Server.Isolation() == sandboxd.IsolationBwrap, "isolation (%v)", c.report())
	uids := c.report().HostUIDs
	runAttacks(t, attackTarget{
		c: c, apiKey: c.h.APIKey, webhookSecret: rcv.secret, hostBinary: os.Args[0],
		enforced: []string{"memory", "pids", "cpu", "disk"}, logs: logs,
		hostUID: func(uid int) error {
			if len(uids) != 2 || uid < uids[0] || uid > uids[1] {
				return fmt.Errorf("want a uid of sandboxd's range %v, one per sandbox", uids)
			}
			return nil
		},
	})
}

// unprivileged starts sandboxd as an unprivileged user, in cgroups of its
// own when delegated.
func attackUnprivileged(t *testing.T, delegated bool) {
	needs(t, os.Geteuid() == 0, "root, to start sandboxd as another user")
	uid := testUID()
	rcv := newReceiver(t, randomMarker("secret-"))
	opts := procOptions{uid: uid, webhookURL: rcv.srv.URL, webhookSecret: rcv.secret,
		args: []string{"--memory-limit", "256MiB", "--pids-limit", "256", "--disk-limit", "64MiB"}}
	enforced := []string{}
	if delegated {
		opts.cgroups = delegatedCgroups(t, uid)
		enforced = []string{"memory", "pids", "cpu"}
	}
	p := startProc(t, opts)
	runAttacks(t, attackTarget{
		c: p.client(t), apiKey: p.opts.apiKey, webhookSecret: rcv.secret, hostBinary: sandboxdBinary(t),
		sandboxdPid: p.sandboxdPid(), enforced: enforced, logs: p.logs,
		hostUID: func(got int) error {
			if got != uid {
				return fmt.Errorf("want sandboxd's own uid %d", uid)
			}
			return nil
		},
	})
}

func TestAttacksAsUnprivilegedUser(t *testing.T) {
	t.Parallel()
	attackUnprivileged(t, false)
}

func TestAttacksAsUnprivilegedUserWithDelegatedCgroup(t *testing.T) {
	t.Parallel()
	attackUnprivileged(t, true)
}

func TestRunningSandboxCap(t *testing.T) {
	t.Parallel()
	c := newClient(t, sandboxdtest.WithConfig(func(cfg *sandboxd.Config) { cfg.MaxSandboxes = 2 }))
	a := c.create(nil)
	b := c.create(nil)
	wantBody := `{"code":429,"message":"you have reached the maximum number of concurrent E2B sandboxes (2). If you need more, please visit 'https://e2b.dev/docs/billing'"}`
	if status, body, _ := c.do("POST", "/sandboxes", map[string]any{"templateID": "base"}); status != 429 || strings.TrimSpace(string(body)) != wantBody {
		t.Fatalf("third create: %d %s", status, body)
	}
	// A paused sandbox does not count; resuming it does.
	c.must(204, "POST", "/sandboxes/"+a.SandboxID+"/pause", map[string]any{"memory": false}, nil)
	c.create(nil)
	if status, body, _ := c.do("POST", "/sandboxes/"+a.SandboxID+"/connect", map[string]any{"timeout": 60}); status != 429 || strings.TrimSpace(string(body)) != wantBody {
		t.Fatalf("resume at the cap: %d %s", status, body)
	}
	c.must(204, "DELETE", "/sandboxes/"+b.SandboxID, nil, nil)
	c.must(201, "POST", "/sandboxes/"+a.SandboxID+"/connect", map[string]any{"timeout": 60}, nil)
}

func TestCrashKeepsEverySandboxsFiles(t *testing.T) {
	t.Parallel()
	needs(t, os.Geteuid() == 0, "root (CI runs as root)")
	p := startProc(t, procOptions{})
	c := p.client(t)
	running, memPaused := c.create(nil), c.create(nil)
	markers := []string{randomMarker("sleep 600."), randomMarker("sleep 601.")}
	for i, sb := range []sandboxBody{running, memPaused} {
		c.run(sb, "echo kept > keep.txt")
		c.startBackground(sb, markers[i])
	}
	c.startCounter(memPaused, 3000)
	c.must(204, "POST", "/sandboxes/"+memPaused.SandboxID+"/pause", nil, nil)

	p.crash()
	waitFor(t, "the running sandbox to die with sandboxd", 10*time.Second, func() bool { return len(pidsRunning(markers[0])) == 0 })

	p2 := startProc(t, procOptions{stateDir: p.opts.stateDir, apiKey: p.opts.apiKey, uidBase: p.opts.uidBase})
	c = p2.client(t)
	// The frozen sandbox's processes are cleared by the next start.
	waitFor(t, "the frozen sandbox's processes to go", 10*time.Second, func() bool { return len(pidsRunning(markers[1])) == 0 })
	for _, sb := range []sandboxBody{running, memPaused} {
		if d := c.info(sb.SandboxID); d.State != "paused" {
			t.Fatalf("%s after a crash: %+v", sb.SandboxID, d)
		}
		var resumed sandboxBody
		c.must(201, "POST", "/sandboxes/"+sb.SandboxID+"/connect", map[string]any{"timeout": 60}, &resumed)
		if res := c.run(resumed, "cat keep.txt"); res.stdout != "kept\n" {
			t.Fatalf("%s: files after a crash: %+v", sb.SandboxID, res)
		}
	}
	if status, _ := c.preview(memPaused.SandboxID, 3000); status != 502 {
		t.Fatalf("the app outlived a crash: %d", status)
	}
}
