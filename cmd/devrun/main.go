// Command devrun is what `make run` runs: a private PostgreSQL under .data/pg, the local sandbox
// host (sandboxd) and Sandman wired to both, with a demo founder whose starter projects are
// ready to build. Ctrl-C stops all three; the data stays for the next run.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sandman/db/localpg"
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
	for _, a := range []string{addr, apiAddr, sandboxAddr} {
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

	apiKey, err := secretFile(filepath.Join(data, "sandboxd-api-key"), "e2b_")
	if err != nil {
		return err
	}
	webhookSecret, err := secretFile(filepath.Join(data, "webhook-secret"), "")
	if err != nil {
		return err
	}
	_, sandboxPort, _ := net.SplitHostPort(sandboxAddr)

	sandboxd := exec.Command(filepath.Join(bin, "sandboxd"),
		"--api-addr", apiAddr, "--sandbox-addr", sandboxAddr,
		"--state-dir", filepath.Join(data, "sandboxd"), "--api-key", apiKey)
	logFile, err := os.OpenFile(filepath.Join(data, "sandboxd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	sandboxd.Stdout, sandboxd.Stderr = logFile, logFile
	sandboxdProc, err := startChild(sandboxd)
	if err != nil {
		return fmt.Errorf("start sandboxd: %w", err)
	}
	defer sandboxdProc.stop()
	if err := waitHTTP(ctx, "http://"+apiAddr+"/health"); err != nil {
		return fmt.Errorf("sandboxd did not come up (see %s): %w", logFile.Name(), err)
	}

	env := append(os.Environ(),
		"DATABASE_URL="+dbURL,
		"SANDMAN_ADDR="+addr,
		"E2B_API_URL=http://"+apiAddr,
		"E2B_API_KEY="+apiKey,
		"E2B_DOMAIN=localhost:"+sandboxPort,
		"E2B_WEBHOOK_URL=http://"+addr+"/webhooks/e2b",
		"E2B_WEBHOOK_SECRET="+webhookSecret,
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
	if err := waitHTTP(ctx, "http://"+addr+"/healthz"); err != nil {
		return fmt.Errorf("sandman did not come up (see %s): %w", sandmanLog.Name(), err)
	}

	fmt.Printf(`
  Sandman is running.

    Open:      http://%s/
    Log in:    %s
    Password:  %s

  Logs: %s and %s
  Press Ctrl-C to stop (data stays in %s).

`, addr, demoEmail, demoPassword, sandmanLog.Name(), logFile.Name(), data)

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
		return fmt.Errorf("%s is in use (%v): stop what listens there, or set SANDMAN_ADDR / SANDBOXD_API_ADDR / SANDBOXD_SANDBOX_ADDR", addr, err)
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
	raw := make([]byte, 20)
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

func waitHTTP(ctx context.Context, url string) error {
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
		case <-time.After(100 * time.Millisecond):
		}
	}
}
