package sandboxd

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sandman/sandboxd/envd"
	"sandman/sandboxd/machine"
	"sandman/sandboxd/store"
	"sandman/sandboxd/wire"
)

// errRoute is a request whose target cannot be read from its host or headers.
var errRoute = errors.New("cannot tell the sandbox from the host or the E2b-Sandbox-Id/E2b-Sandbox-Port headers")

// routeRequest finds the sandbox and port a request is for, like the
// provider's proxy: the routing headers when the host is localhost, an IP or
// sandbox.<domain>; otherwise the leftmost label "<port>-<sandboxID>".
func routeRequest(host string, h http.Header) (id string, port int, err error) {
	hostname := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		hostname = hn
	}
	hostname = strings.ToLower(strings.TrimSuffix(hostname, "."))
	var idPart, portPart string
	if hostname == "localhost" || net.ParseIP(strings.Trim(hostname, "[]")) != nil || strings.HasPrefix(hostname, "sandbox.") {
		idPart, portPart = h.Get("E2b-Sandbox-Id"), h.Get("E2b-Sandbox-Port")
	} else {
		label, _, _ := strings.Cut(hostname, ".")
		var ok bool
		if portPart, idPart, ok = strings.Cut(label, "-"); !ok {
			return "", 0, errRoute
		}
	}
	port, err = strconv.Atoi(portPart)
	if err != nil || port < 1 || port > 65535 {
		return "", 0, errRoute
	}
	id, ok := parseSandboxID(idPart)
	if !ok {
		return "", 0, errRoute
	}
	return id, port, nil
}

type targetKey struct{}

type target struct {
	id   string
	port int
}

// sandboxProxy serves sandbox traffic: envd (port 49983) in process, every
// other port by a reverse proxy into the sandbox's network.
type sandboxProxy struct {
	s         *Server
	transport *http.Transport
	rp        *httputil.ReverseProxy
	envd      *envd.Server
}

func newSandboxProxy(s *Server) *sandboxProxy {
	p := &sandboxProxy{s: s}
	p.transport = &http.Transport{
		DialContext:         p.dial,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     30 * time.Second,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			t := pr.In.Context().Value(targetKey{}).(target)
			pr.Out.URL.Scheme = "http"
			// The dialer reads the sandbox and port from this address; the
			// app still sees the Host the client used, as behind the provider.
			pr.Out.URL.Host = net.JoinHostPort(t.id, strconv.Itoa(t.port))
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport:     p.transport,
		FlushInterval: -1,
		ErrorHandler:  p.proxyError,
	}
	p.envd = envd.New(envdSandboxes{s}, envd.Config{KeepaliveMax: s.cfg.KeepaliveMax,
		MemoryMB: s.iso.MemoryMB(), DiskMB: s.iso.DiskMB(), Logger: s.log})
	return p
}

// forget drops pooled connections after a pause or kill, so none outlives
// the state that made it valid.
func (p *sandboxProxy) forget() { p.transport.CloseIdleConnections() }

func (p *sandboxProxy) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	id, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(portStr)
	p.s.mu.Lock()
	sb := p.s.sandboxes[id]
	p.s.mu.Unlock()
	if sb == nil {
		return nil, syscall.ECONNREFUSED
	}
	sb.op.Lock()
	m := sb.vm
	sb.op.Unlock()
	if m == nil || !m.Alive() {
		// Nothing has run in this sandbox, so nothing listens.
		return nil, syscall.ECONNREFUSED
	}
	return m.Dial(ctx, port)
}

func (p *sandboxProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, port, err := routeRequest(r.Host, r.Header)
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	rec, ok := p.s.get(id)
	if !ok {
		wire.ProxyFailure(w, r, http.StatusBadGateway, id, "The sandbox was not found", nil)
		return
	}
	if rec.State == store.StatePaused {
		canResume := rec.AutoResume && rec.Snapshot == store.SnapshotMemory
		if !canResume {
			// The provider's proxy answers a paused sandbox it may not resume with its
			// not-found error: the SDKs' isRunning reads only a 502 as "not running".
			wire.ProxyFailure(w, r, http.StatusBadGateway, id, "The sandbox was not found", nil)
			return
		}
		timeout := time.Duration(max(rec.ResumeTimeout, 1)) * time.Second
		if _, _, err := p.s.connect(id, timeout, true); err != nil {
			var oe *opError
			if errors.As(err, &oe) && oe.Status == http.StatusTooManyRequests {
				wire.ProxyFailure(w, r, oe.Status, id, oe.Message, nil)
				return
			}
			wire.ProxyFailure(w, r, http.StatusBadGateway, id, "The sandbox was not found", nil)
			return
		}
		p.s.log.Info("sandbox auto-resumed by traffic", "sandbox_id", id)
	}
	ctx := context.WithValue(r.Context(), targetKey{}, target{id: id, port: port})
	if port == envdPort {
		p.envd.ServeSandbox(w, r, id)
		return
	}
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

func (p *sandboxProxy) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	t := r.Context().Value(targetKey{}).(target)
	if r.Context().Err() != nil {
		return // the client left
	}
	p.s.log.Debug("sandbox port unreachable", "sandbox_id", t.id, "port", t.port, "err", err)
	wire.ProxyFailure(w, r, http.StatusBadGateway, t.id, "The sandbox is running but port is not open",
		map[string]any{"port": strconv.Itoa(t.port)})
}

// envdSandboxes is the Server as envd reaches its sandboxes.
type envdSandboxes struct{ s *Server }

func (e envdSandboxes) Record(id string) (store.Record, bool) { return e.s.get(id) }

func (e envdSandboxes) Running(id string) (*machine.Machine, store.Record, error) {
	sb, err := e.s.acquire(id)
	if err != nil {
		return nil, store.Record{}, envd.ErrNotFound
	}
	defer sb.op.Unlock()
	rec := e.s.snapshot(sb)
	if rec.State != store.StateRunning {
		return nil, rec, envd.ErrPaused
	}
	m, err := e.s.machineFor(sb)
	return m, rec, err
}

func (e envdSandboxes) Current(id string) *machine.Machine {
	sb, err := e.s.acquire(id)
	if err != nil {
		return nil
	}
	defer sb.op.Unlock()
	if sb.vm != nil && sb.vm.Alive() {
		return sb.vm
	}
	return nil
}
