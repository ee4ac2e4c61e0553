package watch_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"sandman/applog"
	"sandman/db/dbtest"
	"sandman/e2b"
	"sandman/internal/testkit"
	"sandman/sandboxd"
	"sandman/sandboxd/sandboxdtest"
	"sandman/watch"
)

// sandboxdChildEnv makes the test binary a sandboxd (TestMain), on the state directory it
// names, with the API key in sandboxdKeyEnv.
const (
	sandboxdChildEnv = "SANDMAN_WATCH_BENCH_SANDBOXD"
	sandboxdKeyEnv   = "SANDMAN_WATCH_BENCH_KEY"
)

// runSandboxdChild runs sandboxd as sandboxdtest configures it, prints its addresses on a line
// and serves until its standard input closes (its parent ended).
func runSandboxdChild() int {
	cfg := sandboxd.Config{APIAddr: "127.0.0.1:0", SandboxAddr: "127.0.0.1:0", APIKey: os.Getenv(sandboxdKeyEnv),
		StateDir: os.Getenv(sandboxdChildEnv), Logger: slog.New(slog.DiscardHandler), UIDBase: sandboxdtest.UIDBase()}
	cfg.Limits.Disk = 1 << 30
	srv, err := sandboxd.New(cfg)
	for try := 0; sandboxd.ErrUIDRangeTaken(err) && try < 20; try++ {
		cfg.UIDBase = sandboxdtest.UIDBase()
		srv, err = sandboxd.New(cfg)
	}
	if sandboxd.ErrNoIsolation(err) && os.Getenv("CI") != "true" {
		fmt.Fprintf(os.Stderr, "sandboxd cannot isolate here, so the benchmark's sandboxes run unisolated: %v\n", err)
		cfg.Isolation = sandboxd.IsolationNone
		srv, err = sandboxd.New(cfg)
	}
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandboxd:", err)
		return 1
	}
	fmt.Printf("%s %s\n", srv.APIURL(), srv.SandboxDomain())
	signal.Ignore(syscall.SIGINT)
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	return 0
}

// startSandboxdProcess runs sandboxd in a child process, so that none of its memory is in the
// measured process, and returns a client configuration for it.
func startSandboxdProcess(b *testing.B) e2b.Config {
	key := make([]byte, 20)
	_, _ = rand.Read(key)
	apiKey := "e2b_" + hex.EncodeToString(key)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), sandboxdChildEnv+"="+sandboxdtest.StateDir(b), sandboxdKeyEnv+"="+apiKey)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	var apiURL, domain string
	if _, serr := fmt.Sscan(line, &apiURL, &domain); err != nil || serr != nil {
		b.Fatalf("sandboxd's child process did not start: %q, %v", line, err)
	}
	return e2b.Config{APIURL: apiURL, APIKey: apiKey, Domain: domain}
}

// countingSink stands for the log store's Writer, one per instance: it counts the lines.
type countingSink struct{ lines atomic.Int64 }

func (s *countingSink) Lines(_ context.Context, lines []applog.Line) { s.lines.Add(int64(len(lines))) }
func (s *countingSink) Flush(context.Context) error                  { return nil }

// watchedProc is one preview's dev server: its sandbox and pid.
type watchedProc struct {
	sb  e2b.Sandbox
	pid int
}

// BENCHMARKS.md, issue 26, f): memory per watched preview at 1,000 watched, against a bare
// client holding the same process streams. sandboxd runs in a child process (this binary
// started again), so the measured process holds the Sandman side alone. Each preview is a
// process (`sh` printing a line, then sleeping) in one of a few sandboxes. The watch: each
// process started (StartProcess, as a build does), followed (Watcher.Follow: the stream, its
// line cutters, the sink) and held (Watcher.Hold: the holding and its goroutine, the advisory
// lock on the watch's connection), as the lifecycle hands a started dev server over. The floor:
// the watch stopped (the processes run on), the same processes' streams opened again by their
// pids (ConnectProcess) and read, the bytes dropped. Each side is the growth of the heap in use
// and of the goroutine stacks after a collection, per preview, and its goroutines. Checked,
// also under -short (100 previews, one sandbox: fewer make the growth noise): every process's first line reached the sink, every preview
// is followed, every bare stream is open, the ratio is a number.
func BenchmarkWatchMemory(b *testing.B) {
	n := testkit.BenchSize(1000, 100)
	const perSandbox = 100
	testkit.Needs(b, testkit.RaiseFileLimit(uint64(4*n+1000)), "%d open files for %d streams", 4*n+1000, n)
	cfg := startSandboxdProcess(b)
	setup, err := e2b.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var sbs []e2b.Sandbox
	for range (n + perSandbox - 1) / perSandbox {
		sb, err := setup.CreateSandbox(ctx, e2b.CreateParams{Template: "base", TimeoutSec: 3600})
		if err != nil {
			b.Fatal(err)
		}
		sbs = append(sbs, sb)
	}
	pool := dbtest.NewPool(b)
	// Go keeps the record of every goroutine that ever ran and reuses it: the side measured
	// second would reuse the first's and count less. Enough records made here, before both
	// measures, are reused by both.
	warmGoroutines(20*n + 1000)

	for range b.N {
		watchClient, err := e2b.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		sink := &countingSink{}
		w := watch.New(watch.Options{Pool: pool, Provider: watchClient, Sink: sink, Name: "bench-watch"})
		w.Start(ctx)
		b.Cleanup(w.Stop)
		procs := make([]watchedProc, n)
		ids := make([]uuid.UUID, n)
		before := testkit.SettledMemory()
		for i := range n {
			sb := sbs[i/perSandbox]
			proc, err := watchClient.StartProcess(ctx, sb, e2b.ProcessParams{
				Argv: []string{"sh", "-c", "echo ready; exec sleep 3600"}})
			if err != nil {
				b.Fatal(err)
			}
			procs[i] = watchedProc{sb: sb, pid: proc.PID}
			ids[i] = uuid.New()
			run := applog.Run{ProjectID: uuid.New(), SandboxID: ids[i], Version: 1, Source: applog.SourceApp, ID: uuid.New()}
			if !w.Hold(ctx, w.Follow(run, proc)) {
				b.Fatalf("preview %d: the watch did not take it", i)
			}
		}
		testkit.Until(b, time.Minute, "every process's first line in the sink", func() bool { return sink.lines.Load() >= int64(n) })
		watched := testkit.SettledMemory()
		for i, id := range ids {
			if !w.Holds(id) {
				b.Fatalf("preview %d of %d is not followed once all were held", i+1, n)
			}
		}
		w.Stop()

		bareClient, err := e2b.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		bctx, stopBare := context.WithCancel(ctx)
		var open atomic.Int64
		var wg sync.WaitGroup
		bareBefore := testkit.SettledMemory()
		for _, p := range procs {
			proc, err := bareClient.ConnectProcess(bctx, p.sb, p.pid)
			if err != nil {
				b.Fatal(err)
			}
			open.Add(1)
			wg.Go(func() {
				defer open.Add(-1)
				_, _ = proc.Follow(bctx, func(_, _ []byte) {})
			})
		}
		bare := testkit.SettledMemory()
		if got := open.Load(); got != int64(n) {
			b.Fatalf("%d of %d bare streams open", got, n)
		}
		stopBare()
		wg.Wait()

		watchKiB, bareKiB := perPreview(before, watched, n), perPreview(bareBefore, bare, n)
		ratio := watchKiB / bareKiB
		if math.IsNaN(ratio) || math.IsInf(ratio, 0) || ratio <= 0 || ratio > 20 {
			b.Fatalf("watch %.2f KiB a preview against a bare client's %.2f: the ratio %.2f is not a measure", watchKiB, bareKiB, ratio)
		}
		b.ReportMetric(watchKiB, "watch-KiB/preview")
		b.ReportMetric((watched.Heap-before.Heap)*1024/float64(n), "watch-heap-KiB/preview")
		b.ReportMetric((watched.Stacks-before.Stacks)*1024/float64(n), "watch-stack-KiB/preview")
		b.ReportMetric(float64(watched.Goroutines-before.Goroutines)/float64(n), "watch-goroutines/preview")
		b.ReportMetric(bareKiB, "floor-KiB/preview")
		b.ReportMetric((bare.Heap-bareBefore.Heap)*1024/float64(n), "floor-heap-KiB/preview")
		b.ReportMetric((bare.Stacks-bareBefore.Stacks)*1024/float64(n), "floor-stack-KiB/preview")
		b.ReportMetric(float64(bare.Goroutines-bareBefore.Goroutines)/float64(n), "floor-goroutines/preview")
		b.ReportMetric(ratio, "watch/floor")
		b.ReportMetric((watched.Heap-before.Heap)/(bare.Heap-bareBefore.Heap), "heap-watch/floor")
		for _, p := range procs {
			_ = setup.SendSignal(ctx, p.sb, p.pid, e2b.SignalKill)
		}
	}
}

// perPreview is the heap in use and the goroutine stacks the previews added, in KiB each.
func perPreview(before, with testkit.Memory, n int) float64 {
	return (with.Heap + with.Stacks - before.Heap - before.Stacks) * 1024 / float64(n)
}

// warmGoroutines runs n goroutines at once and waits for their end.
func warmGoroutines(n int) {
	var wg sync.WaitGroup
	release := make(chan struct{})
	for range n {
		wg.Go(func() { <-release })
	}
	close(release)
	wg.Wait()
}
