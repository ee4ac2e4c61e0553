package machine

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// This file is the wire between sandboxd and the agent inside an isolated
// sandbox (docs/sandboxd.md, "The agent"). Both ends are the same
// executable, so the format needs no versioning.
//
// sandboxd owns one end of a SOCK_SEQPACKET socketpair per sandbox; the
// agent got the other end as an inherited descriptor. A request opens a
// fresh SOCK_STREAM socketpair, sends one end over the control socket, and
// talks on the other: one request frame, one response frame (two for
// spawn: the pid, then the exit status). A frame is a big-endian uint32
// length and that much JSON; descriptors travel as SCM_RIGHTS on the
// frame's first bytes.

const (
	maxAgentFrame = 64 << 20
	maxAgentFDs   = 4
)

// Agent operations.
const (
	opSpawn     = "spawn"     // fds stdin, stdout, stderr → pid, later exit
	opSignal    = "signal"    // pid (and its descendants when tree) gets signal
	opSignalAll = "signalAll" // every process of the sandbox but the agent
	opDial      = "dial"      // → a connected socket to 127.0.0.1:port
	opEntry     = "entry"     // lstat → entry
	opIsDir     = "isDir"     // stat following links → isDir
	opOpen      = "open"      // → fd open for reading, size
	opCreate    = "create"    // → fd open for writing (truncated, parents made)
	opMkdir     = "mkdir"     // → entry
	opMove      = "move"      // path to dest → entry of dest
	opList      = "list"      // → entries, depth levels deep
	opRemove    = "remove"
	opWatch     = "watch" // path (tree: recursive) → ready, then batches of events until either side closes
)

type agentRequest struct {
	Op     string   `json:"op"`
	Path   string   `json:"path,omitempty"`
	Dest   string   `json:"dest,omitempty"`
	Depth  int      `json:"depth,omitempty"`
	Port   int      `json:"port,omitempty"`
	Pid    int      `json:"pid,omitempty"`
	Signal int      `json:"signal,omitempty"`
	Tree   bool     `json:"tree,omitempty"`
	Cmd    string   `json:"cmd,omitempty"`
	Args   []string `json:"args,omitempty"`
	Env    []string `json:"env,omitempty"`
	Cwd    string   `json:"cwd,omitempty"`
	// Pty, for a spawn, runs the command on a new terminal of the sandbox (no descriptors
	// sent); the pid's answer carries the terminal's master.
	Pty *PtySize `json:"pty,omitempty"`
}

type agentResponse struct {
	Err     *agentError  `json:"err,omitempty"`
	Ready   bool         `json:"ready,omitempty"`
	Pid     int          `json:"pid,omitempty"`
	Size    int64        `json:"size,omitempty"`
	IsDir   bool         `json:"isDir,omitempty"`
	Entry   *EntryInfo   `json:"entry,omitempty"`
	Entries []EntryInfo  `json:"entries,omitempty"`
	Exit    *exitInfo    `json:"exit,omitempty"`
	Events  []WatchEvent `json:"events,omitempty"`
}

// agentError carries an errno across the wire so that errors.Is(err,
// fs.ErrNotExist) and friends work on sandboxd's side as on the agent's.
type agentError struct {
	Op    string `json:"op,omitempty"`
	Path  string `json:"path,omitempty"`
	Errno int    `json:"errno,omitempty"`
	Msg   string `json:"msg"`
}

func toAgentError(err error) *agentError {
	if err == nil {
		return nil
	}
	ae := &agentError{Msg: err.Error()}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		ae.Op, ae.Path, ae.Msg = pe.Op, pe.Path, pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		ae.Op, ae.Path, ae.Msg = le.Op, le.Old, le.Err.Error()
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		ae.Errno = int(errno)
	}
	return ae
}

func (e *agentError) err() error {
	var inner error = errors.New(e.Msg)
	if e.Errno != 0 {
		inner = syscall.Errno(e.Errno)
	}
	if e.Op == "" {
		return inner
	}
	return &fs.PathError{Op: e.Op, Path: e.Path, Err: inner}
}

// exitInfo is how a process ended, in the terms envd reports.
type exitInfo struct {
	Code   int    `json:"code"`
	Exited bool   `json:"exited"`
	Status string `json:"status"`
}

// exitFromWaitStatus words an exit like os.ProcessState.String does.
func exitFromWaitStatus(ws syscall.WaitStatus) exitInfo {
	switch {
	case ws.Exited():
		return exitInfo{Code: ws.ExitStatus(), Exited: true, Status: fmt.Sprintf("exit status %d", ws.ExitStatus())}
	case ws.Signaled():
		status := "signal: " + ws.Signal().String()
		if ws.CoreDump() {
			status += " (core dumped)"
		}
		return exitInfo{Code: -1, Status: status}
	}
	return exitInfo{Code: -1, Status: "unknown wait status"}
}

// writeFrame sends v as one frame with fds attached to its first bytes.
func writeFrame(c *net.UnixConn, v any, fds ...*os.File) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	frame = append(frame, body...)
	var oob []byte
	if len(fds) > 0 {
		ints := make([]int, len(fds))
		for i, f := range fds {
			ints[i] = int(f.Fd())
		}
		oob = unix.UnixRights(ints...)
	}
	n, _, err := c.WriteMsgUnix(frame, oob, nil)
	if err != nil || n == len(frame) {
		// No empty write after a whole frame: the peer may have answered
		// and gone already, and writing nothing to it fails with EPIPE.
		return err
	}
	_, err = c.Write(frame[n:])
	return err
}

// readFrame reads one frame into v and returns the descriptors that came
// with it; the caller owns them.
func readFrame(c *net.UnixConn, v any) ([]*os.File, error) {
	var hdr [4]byte
	oob := make([]byte, unix.CmsgSpace(maxAgentFDs*4))
	var fds []*os.File
	got := 0
	for got < len(hdr) {
		n, oobn, _, _, err := c.ReadMsgUnix(hdr[got:], oob)
		if oobn > 0 {
			more, perr := parseRights(oob[:oobn])
			fds = append(fds, more...)
			if perr != nil {
				closeAll(fds)
				return nil, perr
			}
		}
		got += n
		if err != nil {
			closeAll(fds)
			if got == 0 && errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("agent frame header: %w", err)
		}
		if n == 0 {
			closeAll(fds)
			return nil, io.ErrUnexpectedEOF
		}
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > maxAgentFrame {
		closeAll(fds)
		return nil, fmt.Errorf("agent frame of %d bytes is too large", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		closeAll(fds)
		return nil, fmt.Errorf("agent frame: %w", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		closeAll(fds)
		return nil, fmt.Errorf("agent frame: %w", err)
	}
	return fds, nil
}

func parseRights(oob []byte) ([]*os.File, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []*os.File
	for _, m := range msgs {
		ints, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range ints {
			unix.CloseOnExec(fd)
			fds = append(fds, os.NewFile(uintptr(fd), "agent-fd"))
		}
	}
	if len(fds) > maxAgentFDs {
		return fds, fmt.Errorf("%d descriptors in one frame", len(fds))
	}
	return fds, nil
}

func closeAll(fds []*os.File) {
	for _, f := range fds {
		f.Close()
	}
}

// socketPair returns two connected unix sockets of the given type
// (SOCK_STREAM or SOCK_SEQPACKET) as files, close-on-exec.
func socketPair(typ int) (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	return os.NewFile(uintptr(fds[0]), "agent-socket"), os.NewFile(uintptr(fds[1]), "agent-socket"), nil
}

// unixConn turns a socket file into a *net.UnixConn (on the runtime's
// poller, so deadlines work) and closes f.
func unixConn(f *os.File) (*net.UnixConn, error) {
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("not a unix socket: %T", c)
	}
	return uc, nil
}
