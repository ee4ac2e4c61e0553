package envd

import (
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sandman/sandboxd/machine"
	"sandman/sandboxd/store"
	"sandman/sandboxd/wire"
)

// flexUint32 reads a protobuf-JSON uint32, which may come as a number or a
// string.
type flexUint32 uint32

func (u *flexUint32) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return err
	}
	*u = flexUint32(n)
	return nil
}

// processSelector is envd's ProcessSelector oneof.
type processSelector struct {
	Pid *flexUint32 `json:"pid"`
	Tag *string     `json:"tag"`
}

func (sel processSelector) find(m *machine.Machine) (*machine.Process, *rpcError) {
	switch {
	case m == nil:
	case sel.Pid != nil:
		if p := m.Process(uint32(*sel.Pid)); p != nil {
			return p, nil
		}
		return nil, rpcErr("not_found", "process with pid %d not found", *sel.Pid)
	case sel.Tag != nil:
		if p := m.ProcessByTag(*sel.Tag); p != nil {
			return p, nil
		}
		return nil, rpcErr("not_found", "process with tag %q not found", *sel.Tag)
	default:
		return nil, rpcErr("invalid_argument", "process selector needs pid or tag")
	}
	return nil, rpcErr("not_found", "process not found")
}

// ptyRequest is envd's PTY message.
type ptyRequest struct {
	Size struct {
		Cols flexUint32 `json:"cols"`
		Rows flexUint32 `json:"rows"`
	} `json:"size"`
}

func (r ptyRequest) size() (machine.PtySize, *rpcError) {
	if r.Size.Cols == 0 || r.Size.Rows == 0 || r.Size.Cols > 0xffff || r.Size.Rows > 0xffff {
		return machine.PtySize{}, rpcErr("invalid_argument", "pty size %dx%d: columns and rows must be 1 to 65535", r.Size.Cols, r.Size.Rows)
	}
	return machine.PtySize{Cols: uint16(r.Size.Cols), Rows: uint16(r.Size.Rows)}, nil
}

type startRequest struct {
	Process machine.ProcessConfig `json:"process"`
	Pty     *ptyRequest           `json:"pty"`
	Tag     *string               `json:"tag"`
	Stdin   *bool                 `json:"stdin"`
}

type processEventMsg struct {
	Event machine.ProcEvent `json:"event"`
}

func (s *Server) processMethod(method string) envdHandlerFunc {
	switch method {
	case "Start":
		return s.rpcStart
	case "Connect":
		return s.rpcConnect
	case "List":
		return s.rpcList
	case "SendSignal":
		return s.rpcSendSignal
	case "SendInput":
		return s.rpcSendInput
	case "CloseStdin":
		return s.rpcCloseStdin
	case "Update":
		return s.rpcUpdate
	}
	return func(w http.ResponseWriter, r *http.Request, _ *envdRequest) {
		writeRPCError(w, rpcErr("unimplemented", "process.Process/%s is not implemented by sandboxd", method))
	}
}

// runningMachine returns the machine of a running sandbox, booting it if
// nothing ran in it yet; the error is envd's answer when there is none.
func (s *Server) runningMachine(id string) (*machine.Machine, store.Record, *rpcError) {
	m, rec, err := s.sbx.Running(id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, rec, rpcErr("unavailable", "sandbox %s was not found", id)
	case errors.Is(err, ErrPaused):
		return nil, rec, rpcErr("unavailable", "sandbox %s is paused", id)
	case err != nil:
		s.log.Error("boot sandbox", "sandbox_id", id, "err", err)
		return nil, rec, rpcErr("internal", "boot sandbox: %v", err)
	}
	return m, rec, nil
}

// processEnv is envd's environment: a fixed base, then the sandbox's
// variables, then the request's (later ones win).
func processEnv(rec store.Record, m *machine.Machine, user string, extra map[string]string) []string {
	if user == "" {
		user = "user"
	}
	env := []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=" + m.Home(), "USER=" + user, "LOGNAME=" + user, "LANG=C.UTF-8",
		"E2B_SANDBOX=true", "E2B_SANDBOX_ID=" + rec.ID,
	}
	for _, vars := range []map[string]string{rec.EnvVars, extra} {
		keys := make([]string, 0, len(vars))
		for k := range vars {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			env = append(env, k+"="+vars[k])
		}
	}
	return env
}

func (s *Server) rpcStart(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	sw := newStreamWriter(w)
	var req startRequest
	if e := decodeStreamRequest(r, &req); e != nil {
		sw.end(e)
		return
	}
	var size machine.PtySize
	if req.Pty != nil {
		var e *rpcError
		if size, e = req.Pty.size(); e != nil {
			sw.end(e)
			return
		}
	}
	if req.Process.Cmd == "" {
		sw.end(rpcErr("invalid_argument", "process.cmd is required"))
		return
	}
	cwd := machine.HomeDir
	if req.Process.Cwd != nil && *req.Process.Cwd != "" {
		cwd = machine.CleanSandboxPath(*req.Process.Cwd)
	}
	var timeout time.Duration
	if v := r.Header.Get("Connect-Timeout-Ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			sw.end(rpcErr("invalid_argument", "invalid Connect-Timeout-Ms"))
			return
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	m, rec, e := s.runningMachine(er.rec.ID)
	if e != nil {
		sw.end(e)
		return
	}
	if dir, err := m.Files().IsDir(cwd); err != nil || !dir {
		sw.end(rpcErr("invalid_argument", "cwd '%s' does not exist", cwd))
		return
	}
	openStdin := req.Stdin == nil || *req.Stdin
	env := processEnv(rec, m, er.user, req.Process.Envs)
	var p *machine.Process
	var sub *machine.Subscriber
	var err error
	if req.Pty != nil {
		p, sub, err = m.StartPty(req.Process, req.Tag, size, env, cwd, timeout)
	} else {
		p, sub, err = m.StartProcess(req.Process, req.Tag, openStdin, env, cwd, timeout)
	}
	if err != nil {
		sw.end(rpcErr("invalid_argument", "error starting process '%s': %v", req.Process.Cmd, err))
		return
	}
	s.log.Info("process started", "sandbox_id", rec.ID, "pid", p.Pid, "cmd", req.Process.Cmd)
	if err := sw.send(processEventMsg{Event: machine.ProcEvent{Start: &machine.ProcStart{Pid: p.Pid}}}); err != nil {
		p.Unsubscribe(sub)
		return
	}
	s.pump(r, sw, p, sub)
}

// pump streams a process's events until it ends or the client leaves; the
// process keeps running when the client leaves, as with envd.
func (s *Server) pump(r *http.Request, sw *streamWriter, p *machine.Process, sub *machine.Subscriber) {
	defer p.Unsubscribe(sub)
	interval := s.keepalive(r)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	ctx := r.Context()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.C:
			if !ok {
				sw.end(nil)
				return
			}
			if ev.Lost {
				// Break the stream, with no end message: the client sees its connection
				// cut as when a sandbox of the provider goes.
				panic(http.ErrAbortHandler)
			}
			if err := sw.send(processEventMsg{Event: ev}); err != nil {
				return
			}
			ticker.Reset(interval)
		case <-ticker.C:
			if err := sw.send(processEventMsg{Event: machine.ProcEvent{Keepalive: &struct{}{}}}); err != nil {
				return
			}
		}
	}
}

// keepalive is the interval between keepalives of a stream: the client's
// Keepalive-Ping-Interval, capped.
func (s *Server) keepalive(r *http.Request) time.Duration {
	interval := s.cfg.KeepaliveMax
	if v, err := strconv.Atoi(r.Header.Get("Keepalive-Ping-Interval")); err == nil && v > 0 {
		interval = min(time.Duration(v)*time.Second, interval)
	}
	return interval
}

func (s *Server) rpcConnect(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	sw := newStreamWriter(w)
	var req struct {
		Process processSelector `json:"process"`
	}
	if e := decodeStreamRequest(r, &req); e != nil {
		sw.end(e)
		return
	}
	p, e := req.Process.find(s.sbx.Current(er.rec.ID))
	if e != nil {
		sw.end(e)
		return
	}
	sub := p.Subscribe()
	if sub == nil {
		sw.end(rpcErr("not_found", "process with pid %d not found", p.Pid))
		return
	}
	if err := sw.send(processEventMsg{Event: machine.ProcEvent{Start: &machine.ProcStart{Pid: p.Pid}}}); err != nil {
		p.Unsubscribe(sub)
		return
	}
	s.pump(r, sw, p, sub)
}

type processInfo struct {
	Config machine.ProcessConfig `json:"config"`
	Pid    uint32                `json:"pid"`
	Tag    *string               `json:"tag,omitempty"`
}

func (s *Server) rpcList(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req struct{}
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	out := []processInfo{}
	if m := s.sbx.Current(er.rec.ID); m != nil {
		for _, p := range m.Processes() {
			out = append(out, processInfo{Config: p.Config, Pid: p.Pid, Tag: p.Tag})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	wire.WriteJSON(w, http.StatusOK, map[string]any{"processes": out})
}

// parseSignal reads envd's Signal enum by name or number.
func parseSignal(raw json.RawMessage) (syscall.Signal, *rpcError) {
	switch strings.Trim(string(raw), `"`) {
	case "SIGNAL_SIGKILL", "9":
		return syscall.SIGKILL, nil
	case "SIGNAL_SIGTERM", "15":
		return syscall.SIGTERM, nil
	}
	return 0, rpcErr("unimplemented", "signal %s is not supported", string(raw))
}

func (s *Server) rpcSendSignal(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req struct {
		Process processSelector `json:"process"`
		Signal  json.RawMessage `json:"signal"`
	}
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	sig, e := parseSignal(req.Signal)
	if e != nil {
		writeRPCError(w, e)
		return
	}
	p, e := req.Process.find(s.sbx.Current(er.rec.ID))
	if e != nil {
		writeRPCError(w, e)
		return
	}
	if err := p.Signal(sig); err != nil && !machine.IsErrno(err, syscall.ESRCH) {
		writeRPCError(w, rpcErr("internal", "signal process %d: %v", p.Pid, err))
		return
	}
	wire.WriteJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) rpcSendInput(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req struct {
		Process processSelector `json:"process"`
		Input   struct {
			Stdin []byte `json:"stdin"`
			Pty   []byte `json:"pty"`
		} `json:"input"`
	}
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	p, e := req.Process.find(s.sbx.Current(er.rec.ID))
	if e != nil {
		writeRPCError(w, e)
		return
	}
	write, input := p.WriteStdin, req.Input.Stdin
	if req.Input.Pty != nil { // a terminal's input goes to its terminal, not a stdin
		write, input = p.WritePty, req.Input.Pty
	}
	if err := write(input); err != nil {
		writeRPCError(w, rpcErr("failed_precondition", "%v", err))
		return
	}
	wire.WriteJSON(w, http.StatusOK, struct{}{})
}

func (s *Server) rpcCloseStdin(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req struct {
		Process processSelector `json:"process"`
	}
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	p, e := req.Process.find(s.sbx.Current(er.rec.ID))
	if e != nil {
		writeRPCError(w, e)
		return
	}
	p.CloseStdin()
	wire.WriteJSON(w, http.StatusOK, struct{}{})
}

// rpcUpdate resizes a command's terminal, envd's only update.
func (s *Server) rpcUpdate(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var req struct {
		Process processSelector `json:"process"`
		Pty     *ptyRequest     `json:"pty"`
	}
	if e := decodeUnary(r, &req); e != nil {
		writeRPCError(w, e)
		return
	}
	p, e := req.Process.find(s.sbx.Current(er.rec.ID))
	if e != nil {
		writeRPCError(w, e)
		return
	}
	if req.Pty != nil {
		size, e := req.Pty.size()
		if e != nil {
			writeRPCError(w, e)
			return
		}
		if err := p.Resize(size); err != nil {
			writeRPCError(w, rpcErr("failed_precondition", "%v", err))
			return
		}
	}
	wire.WriteJSON(w, http.StatusOK, struct{}{})
}
