package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// PreviewHost is the host serving port of sandbox id: {port}-{id}.{domain}.
func PreviewHost(sandboxID, domain string, port int) string {
	return strconv.Itoa(port) + "-" + sandboxID + "." + domain
}

// PreviewURL is the URL of port of sandbox id: https, or http when the domain is the local
// host (localhost:NNNN, *.localhost or a loopback address), where there is no TLS.
func PreviewURL(sandboxID, domain string, port int) string {
	return schemeFor(domain) + "://" + PreviewHost(sandboxID, domain, port)
}

func schemeFor(domain string) string {
	host := domain
	if h, _, err := net.SplitHostPort(domain); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return "http"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return "http"
	}
	return "https"
}

// Domain is the sandbox domain for sb: the provider's answer, else the configured one.
func (c *Client) Domain(sb Sandbox) string {
	if sb.Domain != "" {
		return sb.Domain
	}
	return c.cfg.Domain
}

// PreviewHost is the host serving port of sb (see the package function).
func (c *Client) PreviewHost(sb Sandbox, port int) string {
	return PreviewHost(sb.ID, c.Domain(sb), port)
}

// PreviewURL is the URL of port of sb (see the package function). Take it afresh after each
// resume: the provider may move a sandbox to another domain.
func (c *Client) PreviewURL(sb Sandbox, port int) string {
	return PreviewURL(sb.ID, c.Domain(sb), port)
}

// envdURL is envd's base URL for sb: the E2B_SANDBOX_URL override, or the per-sandbox host.
func (c *Client) envdURL(sb Sandbox) string {
	if c.cfg.SandboxURL != "" {
		return c.cfg.SandboxURL
	}
	return PreviewURL(sb.ID, c.Domain(sb), EnvdPort)
}

// envdHeader names the sandbox (needed on a shared host, harmless elsewhere) and carries the
// access token of a secure sandbox.
func envdHeader(sb Sandbox, user string) http.Header {
	h := http.Header{}
	h.Set("E2b-Sandbox-Id", sb.ID)
	h.Set("E2b-Sandbox-Port", strconv.Itoa(EnvdPort))
	if sb.EnvdAccessToken != "" {
		h.Set("X-Access-Token", sb.EnvdAccessToken)
	}
	if user != "" {
		// envd picks the user from Basic auth with an empty password.
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":")))
	}
	return h
}

func checkSandboxID(op, id string) error {
	if id == "" || strings.ContainsAny(id, "/?#") {
		return fmt.Errorf("e2b %s: %w: bad sandbox ID %q", op, ErrInvalid, id)
	}
	return nil
}

// File is one file to write into a sandbox.
type File struct {
	// Path is absolute, or relative to the user's home directory. Parent directories are
	// created; an existing file is replaced.
	Path    string
	Content []byte
}

// UploadFiles writes files into sb in one multipart request (envd POST /files). Writing the
// same files again gives the same result, so transient failures are retried.
func (c *Client) UploadFiles(ctx context.Context, sb Sandbox, files []File) error {
	if err := checkSandboxID("upload", sb.ID); err != nil {
		return err
	}
	if len(files) == 0 {
		return nil
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for _, f := range files {
		if f.Path == "" || strings.ContainsAny(f.Path, "\r\n\x00") {
			return fmt.Errorf("e2b upload: %w: bad file path %q", ErrInvalid, f.Path)
		}
		// CreateFormFile would do, but envd needs the whole path in filename, and spelling the
		// header out makes that explicit (RFC 7578 says to strip directories; envd does not).
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename="%s"`, quoteEscaper.Replace(f.Path)))
		h.Set("Content-Type", "application/octet-stream")
		w, err := mw.CreatePart(h)
		if err != nil {
			return err
		}
		if _, err := w.Write(f.Content); err != nil {
			return err
		}
	}
	if err := mw.Close(); err != nil {
		return err
	}
	_, err := c.do(ctx, &request{op: "envd_upload", method: http.MethodPost, url: c.envdURL(sb) + "/files",
		header: envdHeader(sb, ""), body: body.Bytes(), contentType: mw.FormDataContentType(), idempotent: true})
	return err
}

var quoteEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`)

// envdUnary makes a unary Connect call with the JSON codec.
func (c *Client) envdUnary(ctx context.Context, op string, sb Sandbox, procedure string, in, out any) error {
	if err := checkSandboxID(op, sb.ID); err != nil {
		return err
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	h := envdHeader(sb, "")
	h.Set("Connect-Protocol-Version", "1")
	resp, err := c.do(ctx, &request{op: op, method: http.MethodPost, url: c.envdURL(sb) + "/" + procedure,
		header: h, body: body, contentType: "application/json", idempotent: true})
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(resp.body, out); err != nil {
		return fmt.Errorf("e2b %s: decode answer: %w", op, err)
	}
	return nil
}

// ProcessInfo is a process envd started and still tracks. A process that survived a memory
// snapshot may be missing (E2B#1031): check a dev server by its port, not by this list.
type ProcessInfo struct {
	PID  int
	Tag  string
	Cmd  string
	Args []string
	Cwd  string
	Envs map[string]string
}

type processConfigJSON struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  string            `json:"cwd,omitempty"`
}

// ListProcesses lists the processes envd tracks in sb.
func (c *Client) ListProcesses(ctx context.Context, sb Sandbox) ([]ProcessInfo, error) {
	var out struct {
		Processes []struct {
			Config processConfigJSON `json:"config"`
			PID    protoInt          `json:"pid"`
			Tag    string            `json:"tag"`
		} `json:"processes"`
	}
	if err := c.envdUnary(ctx, "envd_list_processes", sb, "process.Process/List", struct{}{}, &out); err != nil {
		return nil, err
	}
	list := make([]ProcessInfo, 0, len(out.Processes))
	for _, p := range out.Processes {
		list = append(list, ProcessInfo{PID: int(p.PID), Tag: p.Tag, Cmd: p.Config.Cmd, Args: p.Config.Args,
			Cwd: p.Config.Cwd, Envs: p.Config.Envs})
	}
	return list, nil
}

// Signal is a signal envd can send.
type Signal string

// The signals envd implements.
const (
	SignalKill Signal = "SIGNAL_SIGKILL"
	SignalTerm Signal = "SIGNAL_SIGTERM"
)

// SendSignal signals process pid in sb; ErrNotFound when envd does not know it.
func (c *Client) SendSignal(ctx context.Context, sb Sandbox, pid int, sig Signal) error {
	in := map[string]any{"process": map[string]int{"pid": pid}, "signal": sig}
	return c.envdUnary(ctx, "envd_signal", sb, "process.Process/SendSignal", in, nil)
}

// ProcessParams describes a command to start in a sandbox.
type ProcessParams struct {
	// Command runs as /bin/bash -l -c Command, as the SDKs do.
	Command string
	// Argv, instead of Command, runs a program directly: Argv[0] (looked up in PATH) with the
	// rest as its arguments, no shell and no login profile, so no process but the program's
	// own starts, and no argument is ever parsed by a shell.
	Argv []string
	// Cwd is the working directory; empty means the user's home.
	Cwd  string
	Envs map[string]string
	// Tag names the process in ListProcesses.
	Tag string
	// User runs the command as that user; empty means the sandbox's default user.
	User string
}

// ProcessResult is how a process ended.
type ProcessResult struct {
	ExitCode int
	// Exited is false when the process was killed by a signal.
	Exited bool
	Status string
	// Error is envd's explanation when the process could not run or ended abnormally.
	Error string
	// Stdout and Stderr hold the output, at most the last MaxProcessOutput bytes of each.
	Stdout, Stderr string
}

// MaxProcessOutput bounds the output a ProcessResult keeps per stream.
const MaxProcessOutput = 256 << 10

// Process is a started process whose output stream is open. Call Wait to follow it to its end,
// or Detach to leave it running (a dev server); one of them must be called to free the stream.
type Process struct {
	// PID is the process ID inside the sandbox.
	PID int

	op     string
	body   io.Closer
	frames *envelopeReader
	cancel context.CancelFunc
	cfg    Config

	// onData, when set (Follow), gets each chunk of output as it arrives.
	onData func(stdout, stderr []byte)
	// lastFrame is when the stream last brought anything (output, an end, envd's keepalive), in
	// Unix nanoseconds: a stream silent for long is dead even when its connection is not closed.
	lastFrame atomic.Int64

	mu             sync.Mutex
	stdout, stderr []byte
	result         *ProcessResult
	err            error
}

type processEventJSON struct {
	Event struct {
		Start *struct {
			PID protoInt `json:"pid"`
		} `json:"start"`
		Data *struct {
			Stdout protoBytes `json:"stdout"`
			Stderr protoBytes `json:"stderr"`
			Pty    protoBytes `json:"pty"`
		} `json:"data"`
		End *struct {
			ExitCode     protoInt `json:"exitCode"`
			ExitCodeName protoInt `json:"exit_code"`
			Exited       bool     `json:"exited"`
			Status       string   `json:"status"`
			Error        string   `json:"error"`
		} `json:"end"`
	} `json:"event"`
}

// StartProcess starts a command through envd's streaming Start call and returns once envd
// reported its PID. The start itself is bounded by the context and the attempt timeout; the
// stream then lives until Wait or Detach. It is repeated only when the request provably did
// not reach envd (connection refused, 502/503 from the proxy), since a repeat could start the
// command twice.
func (c *Client) StartProcess(ctx context.Context, sb Sandbox, p ProcessParams) (*Process, error) {
	const op = "envd_start"
	if err := checkSandboxID(op, sb.ID); err != nil {
		return nil, err
	}
	cfg := processConfigJSON{Cmd: "/bin/bash", Args: []string{"-l", "-c", p.Command}, Envs: p.Envs, Cwd: p.Cwd}
	switch {
	case len(p.Argv) > 0 && p.Command == "" && p.Argv[0] != "":
		cfg.Cmd, cfg.Args = p.Argv[0], p.Argv[1:]
	case len(p.Argv) > 0 || strings.TrimSpace(p.Command) == "":
		return nil, fmt.Errorf("e2b %s: %w: a command or a program, not both nor neither", op, ErrInvalid)
	}
	msg, err := json.Marshal(map[string]any{
		"process": cfg,
		"stdin":   false,
		"tag":     p.Tag,
	})
	if err != nil {
		return nil, err
	}
	return c.stream(ctx, op, sb, p.User, "process.Process/Start", msg)
}

// ConnectProcess follows again a process envd started earlier, by its pid (envd's streaming
// Connect call): after a restart of the caller, or a resume. It returns once envd answered with
// the process's start event; the output and end that follow are the process's from then on
// (what it printed before is not repeated). ErrNotFound when envd does not have the process
// (it ended, or the sandbox was booted afresh). Connecting twice follows nothing twice, so a
// request that provably did not reach envd is repeated like a start.
func (c *Client) ConnectProcess(ctx context.Context, sb Sandbox, pid int) (*Process, error) {
	const op = "envd_connect"
	if err := checkSandboxID(op, sb.ID); err != nil {
		return nil, err
	}
	if pid <= 0 {
		return nil, fmt.Errorf("e2b %s: %w: bad pid %d", op, ErrInvalid, pid)
	}
	msg, err := json.Marshal(map[string]any{"process": map[string]int{"pid": pid}})
	if err != nil {
		return nil, err
	}
	return c.stream(ctx, op, sb, "", "process.Process/Connect", msg)
}

// stream opens one of envd's streaming process calls (Start, Connect) up to its start event,
// repeating a request that provably did not reach envd with the client's retry delays.
func (c *Client) stream(ctx context.Context, op string, sb Sandbox, user, procedure string, msg []byte) (*Process, error) {
	start := time.Now()
	ctx, cancelCall := c.withDeadline(ctx)
	defer cancelCall()
	var proc *Process
	var err error
	for attempt := 0; ; attempt++ {
		var retryable bool
		proc, retryable, err = c.startOnce(ctx, op, sb, user, procedure, appendEnvelope(nil, 0, msg))
		if err == nil || !retryable || attempt >= len(c.cfg.RetryDelays) {
			break
		}
		wait := c.cfg.RetryDelays[attempt]
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			break
		}
		c.log.Warn("e2b call failed, retrying", "op", op, "attempt", attempt+1, "wait", wait, "err", err)
		c.metrics.retries.WithLabelValues(op, "transient").Inc()
		if serr := sleep(ctx, wait); serr != nil {
			break
		}
	}
	c.metrics.observe(op, err, time.Since(start))
	return proc, err
}

// startOnce sends one streaming request (Start, or Connect) and reads up to the start event.
func (c *Client) startOnce(ctx context.Context, op string, sb Sandbox, user, procedure string, body []byte) (*Process, bool, error) {
	// The stream must outlive ctx (a detached dev server's stream is closed by Detach), so it
	// gets its own cancel; ctx and the attempt timeout only guard the handshake.
	streamCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stopCtxGuard := context.AfterFunc(ctx, cancel)
	timer := time.AfterFunc(c.cfg.AttemptTimeout, cancel)
	fail := func(retryable bool, err error) (*Process, bool, error) {
		timer.Stop()
		stopCtxGuard()
		cancel()
		return nil, retryable, err
	}
	req, err := http.NewRequestWithContext(streamCtx, http.MethodPost, c.envdURL(sb)+"/"+procedure, bytes.NewReader(body))
	if err != nil {
		return fail(false, err)
	}
	req.Header = envdHeader(sb, user)
	req.Header.Set("Content-Type", "application/connect+json")
	req.Header.Set("Connect-Protocol-Version", "1")
	// Ask envd for keepalives so that idle streams (a quiet install) survive proxies.
	req.Header.Set("Keepalive-Ping-Interval", "50")
	req.Header.Set("User-Agent", "sandman-e2b/1")
	res, err := c.http.Do(req)
	if err != nil {
		return fail(notSent(err), transportError(op, ctx, err))
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		res.Body.Close()
		// 502/503 come from the proxy in front of envd: the command was not started.
		retryable := res.StatusCode == http.StatusBadGateway || res.StatusCode == http.StatusServiceUnavailable
		return fail(retryable, errorFromResponse(op, res.StatusCode, res.Header, b))
	}
	proc := &Process{op: op, body: res.Body, frames: &envelopeReader{r: res.Body}, cancel: cancel, cfg: c.cfg}
	for {
		done, err := proc.readFrame()
		if err != nil {
			res.Body.Close()
			return fail(false, proc.streamError(ctx, err))
		}
		if proc.PID != 0 {
			break
		}
		if done {
			res.Body.Close()
			return fail(false, fmt.Errorf("e2b %s: %w: stream ended before the process started", op, ErrTransient))
		}
	}
	// If a guard fired while the start event arrived, the stream is already cancelled.
	if !timer.Stop() || !stopCtxGuard() {
		res.Body.Close()
		return fail(false, proc.streamError(ctx, context.DeadlineExceeded))
	}
	return proc, false, nil
}

// readFrame reads one envelope into p. done is true at the end of the stream; a process end
// event is recorded in p.result and a stream error returned.
func (p *Process) readFrame() (done bool, err error) {
	flags, msg, err := p.frames.next()
	p.lastFrame.Store(time.Now().UnixNano())
	if err != nil {
		if errors.Is(err, io.EOF) {
			return true, fmt.Errorf("stream closed without an end message: %w", io.ErrUnexpectedEOF)
		}
		return true, err
	}
	if flags&flagEndStream != 0 {
		return true, endStreamError(p.op, msg)
	}
	var ev processEventJSON
	if err := json.Unmarshal(msg, &ev); err != nil {
		return true, fmt.Errorf("%w: bad event: %v", errMalformedStream, err)
	}
	if e := ev.Event; e.Data != nil && p.onData != nil {
		p.onData(append(e.Data.Stdout, e.Data.Pty...), e.Data.Stderr)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e := ev.Event; {
	case e.Start != nil:
		p.PID = int(e.Start.PID)
	case e.Data != nil:
		p.stdout = appendTail(p.stdout, e.Data.Stdout)
		p.stdout = appendTail(p.stdout, e.Data.Pty)
		p.stderr = appendTail(p.stderr, e.Data.Stderr)
	case e.End != nil:
		code := e.End.ExitCode
		if code == 0 {
			code = e.End.ExitCodeName
		}
		p.result = &ProcessResult{ExitCode: int(code), Exited: e.End.Exited, Status: e.End.Status, Error: e.End.Error}
	}
	return false, nil
}

// LastFrame is when the process's stream last brought anything (zero before its first frame).
func (p *Process) LastFrame() time.Time {
	if n := p.lastFrame.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func appendTail(buf, data []byte) []byte {
	buf = append(buf, data...)
	if over := len(buf) - MaxProcessOutput; over > 0 {
		buf = append(buf[:0], buf[over:]...)
	}
	return buf
}

// streamError types a failure of the stream: the caller's cancellation stays a context error,
// an error sent by envd keeps its code, anything else is transient.
func (p *Process) streamError(ctx context.Context, err error) error {
	var apiErr *APIError
	switch {
	case errors.As(err, &apiErr):
		return err
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("e2b %s: %w", p.op, ctx.Err())
	case ctx.Err() != nil:
		return fmt.Errorf("e2b %s: %w: %w", p.op, ErrTransient, ctx.Err())
	}
	return fmt.Errorf("e2b %s: %w: %w", p.op, ErrTransient, err)
}

// Wait follows the process to its end and returns how it ended; a non-zero exit is a result,
// not an error. The context bounds the wait (the client's call timeout when it has no
// deadline: pass one for long commands). When it ends first, the stream is closed and the
// process keeps running.
func (p *Process) Wait(ctx context.Context) (ProcessResult, error) {
	p.mu.Lock()
	if p.result != nil || p.err != nil {
		defer p.mu.Unlock()
		return p.resultLocked(), p.err
	}
	p.mu.Unlock()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.CallTimeout)
		defer cancel()
	}
	return p.follow(ctx)
}

// Follow is Wait for a process that runs as long as it likes (a dev server): onData gets each
// chunk of its output as it arrives (stdout and stderr apart; called from Follow's goroutine,
// never at once), and only ctx bounds the wait. It must be called before any Wait.
func (p *Process) Follow(ctx context.Context, onData func(stdout, stderr []byte)) (ProcessResult, error) {
	p.onData = onData
	return p.follow(ctx)
}

func (p *Process) follow(ctx context.Context) (ProcessResult, error) {
	p.mu.Lock()
	if p.result != nil || p.err != nil {
		defer p.mu.Unlock()
		return p.resultLocked(), p.err
	}
	p.mu.Unlock()
	stop := context.AfterFunc(ctx, p.cancel)
	defer stop()
	var err error
	for {
		var done bool
		done, err = p.readFrame()
		if done || err != nil {
			break
		}
	}
	p.body.Close()
	p.cancel()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.result != nil:
		// The end event arrived; whatever followed does not change how the process ended.
		p.err = nil
	case err != nil:
		p.err = p.streamError(ctx, err)
	default:
		p.err = fmt.Errorf("e2b %s: %w: stream ended without the process's end", p.op, ErrTransient)
	}
	return p.resultLocked(), p.err
}

func (p *Process) resultLocked() ProcessResult {
	var r ProcessResult
	if p.result != nil {
		r = *p.result
	}
	r.Stdout, r.Stderr = string(p.stdout), string(p.stderr)
	return r
}

// Detach closes the output stream and leaves the process running, as a dev server must.
func (p *Process) Detach() {
	p.cancel()
	p.body.Close()
}
