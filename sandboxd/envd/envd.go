// Package envd emulates envd, the daemon inside each of the provider's
// sandboxes, on port 49983 of sandbox traffic: file reads and writes, the
// process and filesystem services (Connect RPC), environment and metrics.
// It reaches sandboxes through Sandboxes, which sandboxd's lifecycle
// implements; the machine package runs what a request starts.
package envd

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sandman/sandboxd/machine"
	"sandman/sandboxd/store"
	"sandman/sandboxd/wire"
)

// Sandboxes is what envd needs of sandboxd's sandboxes.
type Sandboxes interface {
	// Record is sandbox id's record; false when there is none.
	Record(id string) (store.Record, bool)
	// Running is the machine of running sandbox id, booted if nothing ran
	// in it yet; the error is ErrNotFound, ErrPaused, or why it did not boot.
	Running(id string) (*machine.Machine, store.Record, error)
	// Current is sandbox id's machine if one runs, without booting.
	Current(id string) *machine.Machine
}

// What Sandboxes.Running answers for a sandbox that has no running machine.
var (
	ErrNotFound = errors.New("sandbox not found")
	ErrPaused   = errors.New("sandbox paused")
)

// Config is envd's share of sandboxd's configuration.
type Config struct {
	// KeepaliveMax caps the interval between keepalive messages on process
	// streams whatever the client asks.
	KeepaliveMax time.Duration
	// MemoryMB and DiskMB are a sandbox's size, as its metrics report it.
	MemoryMB, DiskMB int
	Logger           *slog.Logger
}

// Server is the envd of every sandbox of one sandboxd.
type Server struct {
	sbx Sandboxes
	cfg Config
	log *slog.Logger
	mux http.Handler
}

// New makes the envd of sbx's sandboxes.
func New(sbx Sandboxes, cfg Config) *Server {
	s := &Server{sbx: sbx, cfg: cfg, log: cfg.Logger}
	s.mux = s.envdHandler()
	return s
}

type sandboxKey struct{}

// ServeSandbox answers r, a request the proxy routed to envd's port of
// sandbox id.
func (s *Server) ServeSandbox(w http.ResponseWriter, r *http.Request, id string) {
	s.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sandboxKey{}, id)))
}

// envdRequest is what every envd handler works on: the sandbox the request
// was routed to, with the user it authenticated as. An isolated sandbox
// has one user, so "root" gets the same rights as "user".
type envdRequest struct {
	rec  store.Record
	user string
}

type envdHandlerFunc func(w http.ResponseWriter, r *http.Request, er *envdRequest)

// envdHandler emulates envd, the daemon inside each sandbox, on port 49983.
func (s *Server) envdHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	handle := func(pattern string, h envdHandlerFunc, signable bool) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			er, ok := s.envdAuth(w, r, signable)
			if ok {
				h(w, r, er)
			}
		})
	}
	handle("GET /files", s.handleFileRead, true)
	handle("POST /files", s.handleFileWrite, true)
	handle("GET /envs", s.handleEnvs, false)
	handle("GET /metrics", s.handleEnvdMetrics, false)
	for _, m := range []string{"Start", "Connect", "List", "SendSignal", "SendInput", "StreamInput", "CloseStdin", "Update"} {
		handle("POST /process.Process/"+m, s.processMethod(m), false)
	}
	for _, m := range []string{"Stat", "MakeDir", "Move", "ListDir", "Remove", "WatchDir", "CreateWatcher", "GetWatcherEvents", "RemoveWatcher"} {
		handle("POST /filesystem.Filesystem/"+m, s.filesystemMethod(m), false)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		wire.WriteError(w, http.StatusNotFound, "not found")
	})
	return mux
}

const envdUnauthorized = "unauthorized access, please provide a valid access token or method signing if supported"

// envdAuth checks X-Access-Token for secure sandboxes (file transfers may
// carry a signature instead) and reads the user from Basic auth or the
// username parameter.
func (s *Server) envdAuth(w http.ResponseWriter, r *http.Request, signable bool) (*envdRequest, bool) {
	id := r.Context().Value(sandboxKey{}).(string)
	rec, ok := s.sbx.Record(id)
	if !ok {
		wire.ProxyFailure(w, r, http.StatusBadGateway, id, "The sandbox was not found", nil)
		return nil, false
	}
	user := r.URL.Query().Get("username")
	if u, _, ok := r.BasicAuth(); ok {
		user = u
	}
	if user != "" && user != "user" && user != "root" {
		wire.WriteError(w, http.StatusUnauthorized, fmt.Sprintf("user %q does not exist", user))
		return nil, false
	}
	if rec.AccessToken != "" {
		token := r.Header.Get("X-Access-Token")
		okToken := subtle.ConstantTimeCompare([]byte(token), []byte(rec.AccessToken)) == 1
		switch {
		case okToken:
		case !signable:
			wire.WriteError(w, http.StatusUnauthorized, envdUnauthorized)
			return nil, false
		case token != "":
			wire.WriteError(w, http.StatusUnauthorized, "access token present in header but does not match")
			return nil, false
		default:
			if msg := fileSignatureError(r, rec.AccessToken); msg != "" {
				wire.WriteError(w, http.StatusUnauthorized, msg)
				return nil, false
			}
		}
	}
	return &envdRequest{rec: rec, user: user}, true
}

// fileSignature is envd's signature for uploadUrl/downloadUrl:
// "v1_" + unpadded standard base64 of SHA-256 over
// "path:operation:username:accessToken[:expiration]".
func fileSignature(p, operation, user, token string, expiration int64) string {
	raw := p + ":" + operation + ":" + user + ":" + token
	if expiration != 0 {
		raw += ":" + strconv.FormatInt(expiration, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// fileSignatureError checks a file transfer's signature as envd does, in envd's order and
// words ("" when it is good): its absence, its match, then its expiry.
func fileSignatureError(r *http.Request, token string) string {
	q := r.URL.Query()
	sig := q.Get("signature")
	if sig == "" {
		return "missing signature query parameter"
	}
	var exp int64
	if v := q.Get("signature_expiration"); v != "" {
		var err error
		if exp, err = strconv.ParseInt(v, 10, 64); err != nil {
			return "invalid signature"
		}
	}
	op := "read"
	if r.Method == http.MethodPost {
		op = "write"
	}
	want := fileSignature(q.Get("path"), op, q.Get("username"), token, exp)
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return "invalid signature"
	}
	if exp != 0 && exp < time.Now().Unix() {
		return "signature is already expired"
	}
	return ""
}

// fileError answers a file operation's error with envd's statuses.
func fileError(w http.ResponseWriter, p string, err error) {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		wire.WriteError(w, http.StatusNotFound, err.Error())
	case machine.IsErrno(err, syscall.EROFS), errors.Is(err, fs.ErrPermission):
		wire.WriteError(w, http.StatusForbidden, err.Error())
	case machine.IsErrno(err, syscall.ENOSPC):
		wire.WriteError(w, http.StatusInsufficientStorage, err.Error())
	case machine.IsErrno(err, syscall.EISDIR):
		wire.WriteError(w, http.StatusBadRequest, fmt.Sprintf("path '%s' is a directory", p))
	case errors.As(err, &pe), errors.As(err, &le):
		wire.WriteError(w, http.StatusBadRequest, err.Error())
	default:
		wire.WriteError(w, http.StatusInternalServerError, err.Error())
	}
}

// files is the file access of a running sandbox, booted if nothing ran in
// it yet; the error is envd's answer when there is none.
func (s *Server) files(w http.ResponseWriter, id string) (machine.FileOps, bool) {
	m, _, e := s.runningMachine(id)
	if e != nil {
		status, ok := connectHTTPStatus[e.Code]
		if !ok {
			status = http.StatusInternalServerError
		}
		wire.WriteError(w, status, e.Message)
		return nil, false
	}
	return m.Files(), true
}

func (s *Server) handleFileRead(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	files, ok := s.files(w, er.rec.ID)
	if !ok {
		return
	}
	p := machine.CleanSandboxPath(r.URL.Query().Get("path"))
	f, size, err := files.Open(p)
	if err != nil {
		fileError(w, p, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(p)}))
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	_, _ = io.Copy(w, f)
}

type writtenFile struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// metadataHeaderPrefix marks the request headers that carry a file's metadata, as envd reads
// them: the rest of the name, lowercased, is the key; the first value counts.
const metadataHeaderPrefix = "X-Metadata-"

func uploadMetadata(h http.Header) map[string]string {
	var md map[string]string
	for name, values := range h {
		if len(values) == 0 || len(name) < len(metadataHeaderPrefix) || !strings.EqualFold(name[:len(metadataHeaderPrefix)], metadataHeaderPrefix) {
			continue
		}
		if md == nil {
			md = map[string]string{}
		}
		md[strings.ToLower(name[len(metadataHeaderPrefix):])] = values[0]
	}
	return md
}

func (s *Server) handleFileWrite(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	files, ok := s.files(w, er.rec.ID)
	if !ok {
		return
	}
	queryPath := r.URL.Query().Get("path")
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	md := uploadMetadata(r.Header)
	if err := machine.ValidateMetadata(md); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "invalid metadata: "+err.Error())
		return
	}
	var out []writtenFile
	// write answers the request itself when it fails.
	write := func(raw string, body io.Reader) bool {
		p := machine.CleanSandboxPath(raw)
		f, err := files.Create(p)
		var stored map[string]string
		if err == nil {
			_, err = io.Copy(f, body)
			if err == nil {
				// Every upload replaces the file's metadata, none included.
				err = machine.WriteMetadata(f, md)
			}
			stored = machine.FileMetadata(f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fileError(w, p, err)
			return false
		}
		out = append(out, writtenFile{Path: p, Name: path.Base(p), Type: "file", Metadata: stored})
		return true
	}
	switch ct {
	case "multipart/form-data":
		mr, err := r.MultipartReader()
		if err != nil {
			wire.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				wire.WriteError(w, http.StatusBadRequest, err.Error())
				return
			}
			if part.FormName() != "file" {
				continue
			}
			// Part.FileName strips directories; the SDK puts whole paths there.
			_, params, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			p := queryPath
			if p == "" {
				p = params["filename"]
			}
			if p == "" {
				wire.WriteError(w, http.StatusBadRequest, "no path for the uploaded file")
				return
			}
			if !write(p, part) {
				return
			}
		}
	case "application/octet-stream":
		if queryPath == "" {
			wire.WriteError(w, http.StatusBadRequest, "path is required for an octet-stream upload")
			return
		}
		var body io.Reader = r.Body
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			gz, err := gzip.NewReader(r.Body)
			if err != nil {
				wire.WriteError(w, http.StatusBadRequest, err.Error())
				return
			}
			defer gz.Close()
			body = gz
		}
		if !write(queryPath, body) {
			return
		}
	default:
		wire.WriteError(w, http.StatusBadRequest, "upload as multipart/form-data or application/octet-stream")
		return
	}
	if len(out) == 0 {
		wire.WriteError(w, http.StatusBadRequest, "no file in the request")
		return
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleEnvs(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	wire.WriteJSON(w, http.StatusOK, wire.NonNil(er.rec.EnvVars))
}

// handleEnvdMetrics reports the sandbox's size (its limits where they are in force) and what
// it uses now, as its cgroup and disk count it (docs/sandboxd.md); envd's CPU share needs two
// readings, which the control plane's metrics have.
func (s *Server) handleEnvdMetrics(w http.ResponseWriter, r *http.Request, er *envdRequest) {
	var u machine.Usage
	if m := s.sbx.Current(er.rec.ID); m != nil {
		u = m.Usage()
	}
	diskTotal := int64(s.cfg.DiskMB) << 20
	if u.DiskSize > 0 {
		diskTotal = u.DiskSize
	}
	wire.WriteJSON(w, http.StatusOK, map[string]any{
		"ts": time.Now().Unix(), "cpu_count": machine.CPUCount, "cpu_used_pct": 0,
		"mem_total": s.cfg.MemoryMB << 20, "mem_used": u.MemUsed, "mem_cache": u.MemCache,
		"mem_total_mib": s.cfg.MemoryMB, "mem_used_mib": u.MemUsed >> 20,
		"disk_used": u.DiskUsed, "disk_total": diskTotal,
	})
}
