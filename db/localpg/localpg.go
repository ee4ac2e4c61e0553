// Package localpg starts a private PostgreSQL 15 cluster on 127.0.0.1 for `make run` and the
// tests, so neither needs a database set up by hand. As root it runs the server as the
// `postgres` user, because initdb and postgres refuse to run as root.
package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultBinDir is where Debian's postgresql-15 package installs the server programs.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// Options configure a cluster.
type Options struct {
	// Dir holds the cluster's data. It is created (and initdb'd) when empty and kept otherwise.
	Dir string
	// BinDir holds initdb and postgres; DefaultBinDir (or $PG_BIN) when empty.
	BinDir string
	// Durable keeps fsync on. Tests turn it off: their data is thrown away.
	Durable bool
	// Log receives the server's output; discarded when nil.
	Log io.Writer
	// Settings are extra `-c name=value` server settings.
	Settings map[string]string
	// Port is the loopback port to listen on; 0: any free one. A cluster started again on its
	// Dir and Port (a restart) keeps its URLs.
	Port int
}

// Cluster is a running server.
type Cluster struct {
	Dir  string
	Port int
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// URL is a connection string for database name on this cluster.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, database)
}

// MissingBinariesError explains how to get the server programs.
type MissingBinariesError struct{ BinDir string }

func (e *MissingBinariesError) Error() string {
	return fmt.Sprintf("PostgreSQL 15 server programs not found in %s: install them with "+
		"`apt-get install -y postgresql-15` (Debian/Ubuntu), set PG_BIN to the directory holding "+
		"initdb and postgres, or set DATABASE_URL to an existing database", e.BinDir)
}

// Start initialises Dir if needed and starts the server on a free loopback port.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin := opts.BinDir
	if bin == "" {
		bin = os.Getenv("PG_BIN")
	}
	if bin == "" {
		bin = DefaultBinDir
	}
	for _, prog := range []string{"initdb", "postgres"} {
		if _, err := os.Stat(filepath.Join(bin, prog)); err != nil {
			return nil, &MissingBinariesError{BinDir: bin}
		}
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	if err := prepareDir(dir, cred); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", dir, "-U", "postgres",
			"-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("initdb %s: %w\n%s", dir, err, out.String())
		}
	}

	port := opts.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"-D", dir, "-p", strconv.Itoa(port), "-h", "127.0.0.1",
		// No unix socket: its path length limit bites in deep checkouts and we connect over TCP.
		"-c", "unix_socket_directories=", "-c", "max_connections=300"}
	if !opts.Durable {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	for k, v := range opts.Settings {
		args = append(args, "-c", k+"="+v)
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	var tail tailBuffer
	cmd := exec.Command(filepath.Join(bin, "postgres"), args...)
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = cmd.Stdout
	// Pdeathsig: the server must not outlive a test binary or `make run` that was killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	c := &Cluster{Dir: dir, Port: port, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.done) }()
	if err := c.waitReady(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, tail.String())
	}
	return c, nil
}

func (c *Cluster) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-c.done:
			return errors.New("postgres exited during start-up")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after 60s: %w", err)
		}
	}
}

// Stop shuts the server down (fast shutdown: active sessions are ended, data is kept).
func (c *Cluster) Stop() {
	c.once.Do(func() {
		_ = c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	})
}

// serverCredential is the identity the server runs as: ourselves, or `postgres` when we are root.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, the server must run as the `postgres` user, which does not exist: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// prepareDir creates dir owned by the server's user, because initdb refuses a directory it
// cannot write and postgres one that is not private.
func prepareDir(dir string, cred *syscall.Credential) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if cred == nil {
		return nil
	}
	if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
		return err
	}
	// Every parent must be traversable by the server's user.
	for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("the postgres user cannot enter %s (mode %v): pick a data directory outside it", p, fi.Mode().Perm())
		}
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last few KiB of the server's output for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = t.buf[len(t.buf)-8<<10:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
