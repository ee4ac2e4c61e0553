// Command devrun is what `make run` runs: a private PostgreSQL under .data/pg, the local sandbox
// host (sandboxd) and Sandman wired to both, with a demo founder whose starter projects are
// ready to build. Ctrl-C stops all three; the data stays for the next run, and sandboxd brings
// every sandbox back as a filesystem snapshot. Secrets travel in files and the environment,
// never on a command line.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"sandman/db/localpg"
	"sandman/sandboxd"
)

const (
	demoEmail    = "demo@sandman.local"
	demoPassword = "sandman-demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context) error {
	data, err := filepath.Abs(getenv("SANDMAN_DATA_DIR", ".data"))
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(getenv("SANDMAN_BIN_DIR", "bin"))
	if err != nil {
		return err
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	addr := getenv("SANDMAN_ADDR", "127.0.0.1:8080")
	apiAddr := getenv("SANDBOXD_API_ADDR", "127.0.0.1:8081")
	sandboxAddr := getenv("SANDBOXD_SANDBOX_ADDR", "127.0.0.1:8082")
	metricsAddr := getenv("SANDMAN_METRICS_ADDR", "127.0.0.1:8083")
	for _, a := range []string{addr, apiAddr, sandboxAddr, metricsAddr} {
		if err := checkFree(a); err != nil {
			return err
		}
	}

	dbURL := os.Getenv("DATABASE_URL")
	if dbURL == "" {
		fmt.Println("starting PostgreSQL in", filepath.Join(data, "pg"))
		pg, err := localpg.Start(ctx, localpg.Options{Dir: filepath.Join(data, "pg"), Durable: true})
		if err != nil {
			return err
		}
		defer pg.Stop()
		if err := ensureDatabase(ctx, pg); err != nil {
			return err
		}
		dbURL = pg.URL("sandman")
	}

	keyFile := filepath.Join(data, "sandboxd-api-key")
	apiKey, err := secretFile(keyFile, "e2b_")
	if err != nil {
		return err
	}
	webhookSecret, err := secretFile(filepath.Join(data, "webhook-secret"), "")
	if err != nil {
		return err
	}
	// Share links' tokens are made with it: kept between runs, so the links founders sent keep
	// showing on their build pages.
	shareKey, err := secretFile(filepath.Join(data, "share-key"), "")
	if err != nil {
		return err
	}
	// Secrets at rest are sealed with it: kept between runs, or they would not open again.
	secretsKey, err := secretFile(filepath.Join(data, "secrets-key"), "")
	if err != nil {
		return err
	}
	_, sandboxPort, _ := net.SplitHostPort(sandboxAddr)

	isolation := getenv("SANDBOXD_ISOLATION", "auto")
	sandboxd := exec.Command(filepath.Join(bin, "sandboxd"),
		"--api-addr", apiAddr, "--sandbox-addr", sandboxAddr,
		"--state-dir", filepath.Join(data, "sandboxd"), "--api-key-file", keyFile, "--isolation", isolation)
	logFile, err := os.OpenFile(filepath.Join(data, "sandboxd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	sandboxd.Stdout, sandboxd.Stderr = logFile, logFile
	// Only what it needs: whatever else is in this shell (a real E2B key, say) stays out.
	sandboxd.Env = []string{"PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}
	sandboxdProc, err := startChild(sandboxd)
	if err != nil {
		return fmt.Errorf("start sandboxd: %w", err)
	}
	defer sandboxdProc.stop()
	if err := waitHTTP(ctx, "http://"+apiAddr+"/health", sandboxdProc.done); err != nil {
		if why := refusal(logFile.Name()); why != "" {
			return fmt.Errorf("sandboxd refused to start: %s\n\n"+
				"  To run the sandboxes anyway, unisolated (they can then read and change whatever your user can;\n"+
				"  only for code you trust): SANDBOXD_ISOLATION=none make run", why)
		}
		return fmt.Errorf("sandboxd did not come up (see %s): %w", logFile.Name(), err)
	}
	report, err := isolationReport("http://"+apiAddr, apiKey)
	if err != nil {
		return fmt.Errorf("sandboxd's isolation report: %w", err)
	}

	env := append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"SANDMAN_ADDR="+addr,
		"SANDMAN_METRICS_ADDR="+metricsAddr,
		"E2B_API_URL=http://"+apiAddr,
		"E2B_API_KEY="+apiKey,
		"E2B_DOMAIN=localhost:"+sandboxPort,
		"E2B_WEBHOOK_URL=http://"+addr+"/webhooks/e2b",
		"E2B_WEBHOOK_SECRET="+webhookSecret,
		"SANDMAN_SHARE_KEY="+getenv("SANDMAN_SHARE_KEY", shareKey),
		"SANDMAN_SECRETS_KEY="+getenv("SANDMAN_SECRETS_KEY", secretsKey),
		// A founder trying webhooks locally points them at a server on this machine.
		"SANDMAN_WEBHOOKS_ALLOW_PRIVATE="+getenv("SANDMAN_WEBHOOKS_ALLOW_PRIVATE", "true"),
	)
	seed := exec.CommandContext(ctx, filepath.Join(bin, "sandman"), "demo-founder", demoEmail, demoPassword)
	seed.Env, seed.Stdout, seed.Stderr = env, os.Stdout, os.Stderr
	if err := seed.Run(); err != nil {
		return fmt.Errorf("seed the demo founder: %w", err)
	}
	sandman := exec.Command(filepath.Join(bin, "sandman"), "serve")
	sandman.Env = env
	sandmanLog, err := os.OpenFile(filepath.Join(data, "sandman.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer sandmanLog.Close()
	sandman.Stdout, sandman.Stderr = sandmanLog, sandmanLog
	sandmanProc, err := startChild(sandman)
	if err != nil {
		return fmt.Errorf("start sandman: %w", err)
	}
	defer sandmanProc.stop()
	if err := waitHTTP(ctx, "http://"+addr+"/healthz", sandmanProc.done); err != nil {
		return fmt.Errorf("sandman did not come up (see %s): %w", sandmanLog.Name(), err)
	}

	fmt.Printf(`
  Sandman is running.

    Open:      http://%s/
    Log in:    %s
    Password:  %s
    Metrics:   http://%s/metrics

%s
  Logs: %s and %s
  Press Ctrl-C to stop (data stays in %s; sandboxes come back paused, with their files).

`, addr, demoEmail, demoPassword, metricsAddr, banner(report), sandmanLog.Name(), logFile.Name(), data)

	select {
	case <-ctx.Done():
		fmt.Println("\nstopping…")
		return nil
	case <-sandmanProc.done:
		return fmt.Errorf("sandman exited: %v (see %s)", sandmanProc.err, sandmanLog.Name())
	case <-sandboxdProc.done:
		return fmt.Errorf("sandboxd exited: %v (see %s)", sandboxdProc.err, logFile.Name())
	}
}

func checkFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s is in use (%v): stop what listens there, or set SANDMAN_ADDR / SANDMAN_METRICS_ADDR / SANDBOXD_API_ADDR / SANDBOXD_SANDBOX_ADDR", addr, err)
	}
	return l.Close()
}

func ensureDatabase(ctx context.Context, pg *localpg.Cluster) error {
	out, err := exec.CommandContext(ctx, "psql", pg.URL("postgres"), "-tAc",
		"SELECT 1 FROM pg_database WHERE datname = 'sandman'").Output()
	if err != nil {
		return fmt.Errorf("psql: %w", err)
	}
	if strings.TrimSpace(string(out)) == "1" {
		return nil
	}
	return exec.CommandContext(ctx, "psql", pg.URL("postgres"), "-qc", "CREATE DATABASE sandman").Run()
}

// secretFile returns the secret stored in path, creating it on first run so restarts keep it.
func secretFile(path, prefix string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	raw := make([]byte, 32) // a secrets key's size (keyring.KeySize)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	s := prefix + hex.EncodeToString(raw)
	return s, os.WriteFile(path, []byte(s+"\n"), 0o600)
}

type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func startChild(cmd *exec.Cmd) (*child, error) {
	// Children die with us even if we are killed hard.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	return c, nil
}

// stop asks the child to shut down cleanly and kills it if it takes too long.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// waitHTTP polls url until it answers 200, the child exits (done) or a minute passes.
func waitHTTP(ctx context.Context, url string, done <-chan struct{}) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(url)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s after 60s: %v", url, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return errors.New("it exited")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// isolationReport asks sandboxd what isolation and limits are in force.
func isolationReport(apiURL, apiKey string) (sandboxd.IsolationReport, error) {
	var r sandboxd.IsolationReport
	req, err := http.NewRequest(http.MethodGet, apiURL+"/_sandboxd/isolation", nil)
	if err != nil {
		return r, err
	}
	req.Header.Set("X-API-Key", apiKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return r, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return r, fmt.Errorf("%s", res.Status)
	}
	return r, json.NewDecoder(res.Body).Decode(&r)
}

// banner says how sandboxes are isolated and limited, and warns loudly when they are not.
func banner(r sandboxd.IsolationReport) string {
	var b strings.Builder
	if r.Mode == sandboxd.IsolationNone {
		fmt.Fprintf(&b, "  WARNING: sandboxes are NOT isolated (SANDBOXD_ISOLATION=none). Their code runs as\n"+
			"  %s, with no limits. Use this only with code you trust.\n", r.User)
		return b.String()
	}
	fmt.Fprintf(&b, "  Sandboxes: isolated (%s), each as %s.\n", r.Mode, r.User)
	names := make([]string, 0, len(r.Limits))
	for n := range r.Limits {
		names = append(names, n)
	}
	sort.Strings(names)
	var in []string
	for _, n := range names {
		in = append(in, n+" "+r.Limits[n])
	}
	if r.MaxSandboxes > 0 {
		in = append(in, fmt.Sprintf("%d running at most", r.MaxSandboxes))
	}
	fmt.Fprintf(&b, "  Limits per sandbox: %s; pause: %s.\n", strings.Join(in, ", "), r.Pause)
	names = names[:0]
	for n := range r.Off {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  Limit off: %s (%s).\n", n, r.Off[n])
	}
	return b.String()
}

// refusal finds, in sandboxd's log, why it refused to start, if it did.
func refusal(log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "cannot isolate sandboxes here") {
		return ""
	}
	return strings.TrimPrefix(last, "sandboxd: ")
}
