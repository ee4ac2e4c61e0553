package testkit

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SSERequest is one stream a client process opens: a path and one extra header line ("" for
// none), e.g. a session's cookie.
type SSERequest struct {
	Path, Header string
}

// SSEClients are streams held open by child processes of the test binary, so that a
// benchmark's process is the server alone (its memory, its file descriptors). The package's
// TestSSEClientProcess must call RunSSEClientProcess.
type SSEClients struct {
	tb    testing.TB
	lines chan string
	cmds  []*exec.Cmd
}

// sseStreamsPerProcess leaves each client process room under a 20,000 file descriptor limit;
// each process past the first dials from a loopback address of its own (127.0.0.2, .3, …), so
// the streams are not bounded by one address's ephemeral ports (28,000 here).
const sseStreamsPerProcess = 15000

// sseWithin bounds every wait for the client processes.
const sseWithin = time.Minute

// SSEWait says when a client process's stream is ready, and what a receipt is.
type SSEWait struct {
	// ReadyID: a stream is ready once answered 200 and, unless ReadyID is "", once it carried
	// an event with that id.
	ReadyID string
	// Receipt names (by a prefix) the event whose arrival is a state's receipt: a state's last
	// event, when the stream has the whole state. "": its first event.
	Receipt string
}

// StartSSEClients opens every request's stream to addr (host:port) and returns once each is
// ready. A request refused, or a process that ends or says nothing for a minute, fails tb.
func StartSSEClients(tb testing.TB, addr string, reqs []SSERequest, wait SSEWait) *SSEClients {
	tb.Helper()
	c := &SSEClients{tb: tb, lines: make(chan string, 4096)}
	tb.Cleanup(c.Stop)
	var wg sync.WaitGroup
	for first := 0; first < len(reqs); first += sseStreamsPerProcess {
		part := reqs[first:min(first+sseStreamsPerProcess, len(reqs))]
		var list strings.Builder
		for _, r := range part {
			fmt.Fprintf(&list, "%s\t%s\n", r.Path, r.Header)
		}
		source := ""
		if n := first / sseStreamsPerProcess; n > 0 {
			source = "127.0.0." + strconv.Itoa(n+1)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestSSEClientProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "SANDMAN_SSE_ADDR="+addr, "SANDMAN_SSE_SOURCE="+source,
			"SANDMAN_SSE_FIRST="+strconv.Itoa(first), "SANDMAN_SSE_READY_ID="+wait.ReadyID, "SANDMAN_SSE_RECEIPT="+wait.Receipt)
		cmd.Stdin = strings.NewReader(list.String())
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			tb.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		c.cmds = append(c.cmds, cmd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sc := bufio.NewScanner(out); sc.Scan(); {
				c.lines <- sc.Text()
			}
		}()
	}
	go func() { wg.Wait(); close(c.lines) }()
	for ready := 0; ready < len(c.cmds); {
		if c.next("every stream ready") == "ready" {
			ready++
		}
	}
	return c
}

// next is the processes' next line; a "fail" line fails the benchmark.
func (c *SSEClients) next(what string) string {
	c.tb.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			c.tb.Fatalf("the client processes ended while waiting for %s", what)
		}
		if strings.HasPrefix(line, "fail ") {
			c.tb.Fatalf("a client process, waiting for %s: %s", what, line)
		}
		return line
	case <-time.After(sseWithin):
		c.tb.Fatalf("nothing from the client processes for %s while waiting for %s", sseWithin, what)
		return ""
	}
}

// Receipt is one stream's receipt of an event id (its first event with that id).
type Receipt struct {
	Stream int
	ID     string
	At     time.Time
}

// Next is the next receipt of any stream.
func (c *SSEClients) Next(what string) Receipt {
	c.tb.Helper()
	for {
		fields := strings.Fields(c.next(what))
		if len(fields) != 4 || fields[0] != "got" {
			continue
		}
		stream, err := strconv.Atoi(fields[1])
		ns, err2 := strconv.ParseInt(fields[3], 10, 64)
		if err != nil || err2 != nil {
			c.tb.Fatalf("a receipt that names no stream: %q", fields)
		}
		return Receipt{Stream: stream, ID: fields[2], At: time.Unix(0, ns)}
	}
}

// Stop ends the client processes, and so their streams.
func (c *SSEClients) Stop() {
	for _, cmd := range c.cmds {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	c.cmds = nil
}

// RunSSEClientProcess is a client process's side of StartSSEClients (a test that does nothing
// in a normal run). It opens a stream per line of stdin, prints "ready" once each is ready, then
// "got <stream> <event id> <unix ns>" for the receipt of every later id each stream receives
// (its first event, or its first named by the prefix SANDMAN_SSE_RECEIPT; streams numbered from
// SANDMAN_SSE_FIRST in the order given).
func RunSSEClientProcess(t *testing.T) {
	addr := os.Getenv("SANDMAN_SSE_ADDR")
	if addr == "" {
		t.Skip("the client side of StartSSEClients")
	}
	first, _ := strconv.Atoi(os.Getenv("SANDMAN_SSE_FIRST"))
	readyID, receipt := os.Getenv("SANDMAN_SSE_READY_ID"), os.Getenv("SANDMAN_SSE_RECEIPT")
	RaiseFileLimit(sseStreamsPerProcess + 100)
	dialer := net.Dialer{Timeout: 10 * time.Second}
	if src := os.Getenv("SANDMAN_SSE_SOURCE"); src != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	var out sync.Mutex
	w := bufio.NewWriterSize(os.Stdout, 1<<16)
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Fprintf(w, format+"\n", args...)
		out.Unlock()
	}
	var ready sync.WaitGroup
	in := bufio.NewScanner(os.Stdin)
	for stream := first; in.Scan(); stream++ {
		path, header, _ := strings.Cut(in.Text(), "\t")
		conn, err := dialer.Dial("tcp", addr)
		if err != nil {
			say("fail %d dial: %v", stream, err)
			break
		}
		if header != "" {
			header += "\r\n"
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n%s\r\n", path, addr, header)
		ready.Add(1)
		go func() {
			r := bufio.NewReaderSize(conn, 4096)
			status, err := r.ReadString('\n')
			if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200 ") {
				say("fail %d answered %q (%v)", stream, strings.TrimSpace(status), err)
				return
			}
			waiting := true
			if readyID == "" {
				waiting = false
				ready.Done()
			}
			last := ""
			// The status line, headers and chunk sizes read as unknown fields: only events
			// reach the callback. A state comes as several events with one id.
			_ = ReadSSE(r, func(ev SSEEvent) bool {
				switch {
				case waiting && ev.ID == readyID:
					waiting = false
					ready.Done()
				case ev.ID != "" && ev.ID != readyID && ev.ID != last && strings.HasPrefix(ev.Event, receipt):
					last = ev.ID
					say("got %d %s %d", stream, ev.ID, time.Now().UnixNano())
				}
				return true
			})
		}()
	}
	ready.Wait()
	say("ready")
	// Flush receipts as they come, until the benchmark ends this process.
	for {
		out.Lock()
		_ = w.Flush()
		out.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
}

// RaiseFileLimit raises this process's open file limit to n if its hard limit allows, and says
// whether n files may be open.
func RaiseFileLimit(n uint64) bool {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return false
	}
	if lim.Cur >= n {
		return true
	}
	lim.Cur = min(n, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return false
	}
	return lim.Cur >= n
}

// Memory is this process's resident memory, its heap and goroutine stacks in use, in MiB, and
// its goroutines. HeapFree is the part of Heap that holds no object: the free room in spans that
// still hold some (the heap's fragmentation).
type Memory struct {
	RSS, Heap, HeapFree, Stacks float64
	Goroutines                  int
}

// SettledMemory measures this process after a collection that returns its free pages to the
// system, so that two measurements differ by what is live, not by garbage not yet collected.
func SettledMemory() Memory {
	time.Sleep(200 * time.Millisecond) // the streams' first writes done, their buffers released
	for range 4 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	unused := []metrics.Sample{{Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(unused)
	m := Memory{Goroutines: runtime.NumGoroutine(), Heap: float64(ms.HeapInuse) / (1 << 20),
		HeapFree: float64(unused[0].Value.Uint64()) / (1 << 20), Stacks: float64(ms.StackInuse) / (1 << 20)}
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			m.RSS = float64(kb) / 1024
		}
	}
	return m
}

// StreamMemory is what a server's streams cost: per stream (resident memory, and of it the
// heap, the heap's free room in its spans, and the goroutine stacks, in KiB; goroutines), and
// the process's whole RSS with them.
type StreamMemory struct {
	KiB, HeapKiB, HeapFreeKiB, StackKiB, Goroutines, RSS float64
}

// StreamServer is a server MeasureStreams measures: its address, what waits until it holds
// every stream (nil: none), and how to stop it once its clients left.
type StreamServer struct {
	Addr       string
	Held, Stop func()
}

// MeasureStreams starts a server, holds the streams reqs open on it (ready as StartSSEClients
// says), and measures what they added to this process.
func MeasureStreams(tb testing.TB, reqs []SSERequest, readyID string, start func() StreamServer) StreamMemory {
	tb.Helper()
	before := SettledMemory()
	srv := start()
	clients := StartSSEClients(tb, srv.Addr, reqs, SSEWait{ReadyID: readyID})
	if srv.Held != nil {
		srv.Held()
	}
	with := SettledMemory()
	clients.Stop()
	srv.Stop()
	n := float64(len(reqs))
	return StreamMemory{KiB: (with.RSS - before.RSS) * 1024 / n, HeapKiB: (with.Heap - before.Heap) * 1024 / n,
		HeapFreeKiB: (with.HeapFree - before.HeapFree) * 1024 / n,
		StackKiB:    (with.Stacks - before.Stacks) * 1024 / n, Goroutines: float64(with.Goroutines-before.Goroutines) / n, RSS: with.RSS}
}

// NewBareSSEServer is the floor of a net/http SSE server: each stream a handler that writes
// its headers and a first event (id readyID), flushes, and waits for its client to leave.
func NewBareSSEServer(readyID string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		_, _ = fmt.Fprintf(w, "id: %s\nevent: ready\ndata: ready\n\n", readyID)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
}

// GoroutinesIn says whether any goroutine is running fn (a function's full name) now.
func GoroutinesIn(fn string) bool {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
	return bytes.Contains(buf.Bytes(), []byte(fn+"+"))
}
