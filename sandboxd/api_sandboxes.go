package sandboxd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"sandman/sandboxd/machine"
	"sandman/sandboxd/store"
	"sandman/sandboxd/wire"
)

// sandboxBody is the provider's Sandbox schema (create, connect, resume).
type sandboxBody struct {
	TemplateID         string  `json:"templateID"`
	SandboxID          string  `json:"sandboxID"`
	Alias              string  `json:"alias"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken,omitempty"`
	TrafficAccessToken *string `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

type lifecycleBody struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// sandboxDetail is the provider's SandboxDetail schema (get one).
type sandboxDetail struct {
	TemplateID          string            `json:"templateID"`
	Alias               string            `json:"alias"`
	SandboxID           string            `json:"sandboxID"`
	ClientID            string            `json:"clientID"`
	StartedAt           time.Time         `json:"startedAt"`
	EndAt               time.Time         `json:"endAt"`
	CPUCount            int               `json:"cpuCount"`
	MemoryMB            int               `json:"memoryMB"`
	DiskSizeMB          int               `json:"diskSizeMB"`
	State               store.State       `json:"state"`
	EnvdVersion         string            `json:"envdVersion"`
	EnvdAccessToken     string            `json:"envdAccessToken,omitempty"`
	AllowInternetAccess *bool             `json:"allowInternetAccess,omitempty"`
	Domain              *string           `json:"domain"`
	Metadata            map[string]string `json:"metadata"`
	Lifecycle           lifecycleBody     `json:"lifecycle"`
}

// listedSandbox is the provider's ListedSandbox schema.
type listedSandbox struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	DiskSizeMB  int               `json:"diskSizeMB"`
	State       store.State       `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
	Metadata    map[string]string `json:"metadata"`
}

func (s *Server) sandboxBody(rec store.Record) sandboxBody {
	domain := s.SandboxDomain()
	return sandboxBody{
		TemplateID: rec.TemplateID, SandboxID: rec.ID, Alias: rec.TemplateID, ClientID: pausedClientID,
		EnvdVersion: s.envdVersionOf(rec), EnvdAccessToken: rec.AccessToken, Domain: &domain,
	}
}

func (s *Server) detail(rec store.Record) sandboxDetail {
	d := sandboxDetail{
		TemplateID: rec.TemplateID, Alias: rec.TemplateID, SandboxID: rec.ID, ClientID: pausedClientID,
		StartedAt: rec.StartedAt, EndAt: rec.EndAt, CPUCount: machine.CPUCount, MemoryMB: s.iso.MemoryMB(), DiskSizeMB: s.iso.DiskMB(),
		State: rec.State, EnvdVersion: s.envdVersionOf(rec), EnvdAccessToken: rec.AccessToken,
		AllowInternetAccess: rec.AllowInternet, Metadata: wire.NonNil(rec.Metadata),
		Lifecycle: lifecycleBody{AutoResume: rec.AutoResume, OnTimeout: "kill"},
	}
	if rec.AutoPause {
		d.Lifecycle.OnTimeout = "pause"
	}
	if rec.State == store.StateRunning {
		domain := s.SandboxDomain()
		d.Domain = &domain
	}
	return d
}

func (s *Server) listed(rec store.Record) listedSandbox {
	return listedSandbox{
		TemplateID: rec.TemplateID, Alias: rec.TemplateID, SandboxID: rec.ID, ClientID: pausedClientID,
		StartedAt: rec.StartedAt, EndAt: rec.EndAt, CPUCount: machine.CPUCount, MemoryMB: s.iso.MemoryMB(), DiskSizeMB: s.iso.DiskMB(),
		State: rec.State, EnvdVersion: s.envdVersionOf(rec), Metadata: wire.NonNil(rec.Metadata),
	}
}

// envdVersionOf is the envd version the sandbox got when it last started.
func (s *Server) envdVersionOf(rec store.Record) string {
	if rec.EnvdVersion != "" {
		return rec.EnvdVersion
	}
	return s.cfg.EnvdVersion
}

// validTimeout applies the provider's rules: seconds, positive unless zero
// is allowed, at most the plan's maximum.
func (s *Server) validTimeout(secs int64, allowZero bool) (time.Duration, error) {
	if secs < 0 || (secs == 0 && !allowZero) {
		return 0, &opError{http.StatusBadRequest, "Timeout must be greater than 0"}
	}
	d := time.Duration(secs) * time.Second
	if d > s.cfg.MaxTimeout {
		return 0, &opError{http.StatusBadRequest, fmt.Sprintf("Timeout cannot be greater than %d hours", int(s.cfg.MaxTimeout.Hours()))}
	}
	return d, nil
}

// resolveTemplate accepts the one template sandboxd has, by any reference
// form the provider accepts: alias, namespace/alias, with an optional :tag.
func resolveTemplate(ref string) (string, bool) {
	name, _, _ := strings.Cut(ref, ":")
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	return templateBase, name == templateBase
}

type newSandboxRequest struct {
	TemplateID      string `json:"templateID"`
	Timeout         *int64 `json:"timeout"`
	AutoPause       *bool  `json:"autoPause"`
	AutoPauseMemory *bool  `json:"autoPauseMemory"`
	AutoResume      *struct {
		Enabled bool `json:"enabled"`
	} `json:"autoResume"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Network             *struct {
		AllowPublicTraffic *bool           `json:"allowPublicTraffic"`
		AllowOut           []string        `json:"allowOut"`
		EgressProxy        json.RawMessage `json:"egressProxy"`
		MaskRequestHost    *string         `json:"maskRequestHost"`
		Rules              json.RawMessage `json:"rules"`
		// denyOut is served as it stands: a sandbox reaches nothing outside.
	} `json:"network"`
	// mcp is taken as the provider takes it: the SDK starts the gateway as a command, and
	// it fails where the template has none, as on the provider's base template.
	Iam *struct {
		Tokens map[string]json.RawMessage `json:"tokens"`
	} `json:"iam"`
	VolumeMounts []json.RawMessage `json:"volumeMounts"`
}

// unservedOption names the first create option sandboxd cannot honour, with why, so that a
// create asking for one is refused instead of getting a sandbox without it ("": none).
func (req *newSandboxRequest) unservedOption() string {
	set := func(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
	const noNet = "sandboxes have no outbound network"
	if n := req.Network; n != nil {
		switch {
		case n.AllowPublicTraffic != nil && !*n.AllowPublicTraffic:
			return "network.allowPublicTraffic=false: sandboxd does not check traffic tokens, so a sandbox's ports are open to whoever reaches its sandbox address"
		case len(n.AllowOut) > 0:
			return "network.allowOut: " + noNet + " to allow"
		case set(n.EgressProxy):
			return "network.egressProxy: " + noNet + " to send through a proxy"
		case n.MaskRequestHost != nil:
			return "network.maskRequestHost: sandboxd routes by host name and does not rewrite it"
		case set(n.Rules):
			return "network.rules: " + noNet + " to transform"
		}
	}
	switch {
	case req.Iam != nil && len(req.Iam.Tokens) > 0:
		return "iam.tokens: sandboxd issues no workload identity tokens"
	case len(req.VolumeMounts) > 0:
		return "volumeMounts: sandboxd has no volumes"
	}
	return ""
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	var req newSandboxRequest
	if err := wire.DecodeBody(r, &req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "Invalid request body: "+err.Error())
		return
	}
	if req.TemplateID == "" {
		wire.WriteError(w, http.StatusBadRequest, "templateID is required")
		return
	}
	templateID, ok := resolveTemplate(req.TemplateID)
	if !ok {
		wire.WriteError(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", req.TemplateID))
		return
	}
	secs := int64(15) // the spec's default
	if req.Timeout != nil {
		secs = *req.Timeout
	}
	timeout, err := s.validTimeout(secs, false)
	if err != nil {
		writeOpError(w, err)
		return
	}
	p := createParams{
		templateID: templateID, timeout: timeout, metadata: req.Metadata, envVars: req.EnvVars,
		secure: req.Secure != nil && *req.Secure, allowInternet: req.AllowInternetAccess,
		autoPause: req.AutoPause != nil && *req.AutoPause, autoPauseMemory: true,
		autoResume: req.AutoResume != nil && req.AutoResume.Enabled,
	}
	if req.AutoPauseMemory != nil {
		p.autoPauseMemory = *req.AutoPauseMemory
	}
	switch {
	case !p.autoPauseMemory && !p.autoPause:
		wire.WriteError(w, http.StatusBadRequest, "autoPauseMemory=false only applies when autoPause is true.")
		return
	case !p.autoPauseMemory && p.autoResume:
		wire.WriteError(w, http.StatusBadRequest, "autoPauseMemory=false (filesystem-only auto-pause) cannot be combined with autoResume: a filesystem-only snapshot must be resumed explicitly.")
		return
	}
	if opt := req.unservedOption(); opt != "" {
		wire.WriteError(w, http.StatusBadRequest, "sandboxd does not serve "+opt+"; create the sandbox without it, or use E2B.")
		return
	}
	rec, err := s.create(p)
	if err != nil {
		writeOpError(w, err)
		return
	}
	wire.WriteJSON(w, http.StatusCreated, s.sandboxBody(rec))
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	id, ok := sandboxIDParam(w, r)
	if !ok {
		return
	}
	rec, ok := s.get(id)
	if !ok {
		writeOpError(w, notFound(id))
		return
	}
	wire.WriteJSON(w, http.StatusOK, s.detail(rec))
}

func (s *Server) handleKill(w http.ResponseWriter, r *http.Request) {
	id, ok := sandboxIDParam(w, r)
	if !ok {
		return
	}
	if err := s.kill(id, KillReasonRequest); err != nil {
		writeOpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) {
	id, ok := sandboxIDParam(w, r)
	if !ok {
		return
	}
	var req struct {
		Memory *bool `json:"memory"`
	}
	if err := wire.DecodeBody(r, &req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "Invalid request body: "+err.Error())
		return
	}
	if err := s.pause(id, req.Memory == nil || *req.Memory); err != nil {
		writeOpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleConnect(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout *int64 `json:"timeout"`
		Memory  *bool  `json:"memory"`
	}
	// The spec requires timeout, but the JS SDK omits it when the caller
	// gave none; 300 s is the SDKs' default lifetime. Zero or less is refused,
	// as on create and resume since 2026 (infra#3419): it would resume a
	// paused sandbox with no time to live.
	id, timeout, ok := s.resumeRequest(w, r, &req, &req.Timeout, 300)
	if !ok {
		return
	}
	rec, resumed, err := s.connect(id, timeout, req.Memory == nil || *req.Memory)
	if err != nil {
		writeOpError(w, err)
		return
	}
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	wire.WriteJSON(w, status, s.sandboxBody(rec))
}

// resumeRequest reads a call that may resume a sandbox: the sandbox's id, the
// body into req, and the lifetime that *timeout asks (defSecs when absent).
// It has answered the error when ok is false.
func (s *Server) resumeRequest(w http.ResponseWriter, r *http.Request, req any, timeout **int64, defSecs int64) (id string, d time.Duration, ok bool) {
	id, ok = sandboxIDParam(w, r)
	if !ok {
		return "", 0, false
	}
	if err := wire.DecodeBody(r, req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "Invalid request body: "+err.Error())
		return "", 0, false
	}
	if *timeout != nil {
		defSecs = **timeout
	}
	d, err := s.validTimeout(defSecs, false)
	if err != nil {
		writeOpError(w, err)
		return "", 0, false
	}
	return id, d, true
}

// handleResume is the deprecated resume: paused only (409 when running).
func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Timeout   *int64 `json:"timeout"`
		AutoPause *bool  `json:"autoPause"`
	}
	id, timeout, ok := s.resumeRequest(w, r, &req, &req.Timeout, 15)
	if !ok {
		return
	}
	sb, err := s.acquire(id)
	if err != nil {
		writeOpError(w, err)
		return
	}
	defer sb.op.Unlock()
	if cur := s.snapshot(sb); cur.State == store.StateRunning {
		wire.WriteError(w, http.StatusConflict, fmt.Sprintf("Sandbox %s is already running", id))
		return
	} else if req.AutoPause != nil {
		cur.AutoPause = *req.AutoPause
		s.commit(sb, cur, "", nil)
	}
	rec, _, err := s.connectLocked(sb, timeout, true)
	if err != nil {
		writeOpError(w, err)
		return
	}
	wire.WriteJSON(w, http.StatusCreated, s.sandboxBody(rec))
}

func (s *Server) handleSetTimeout(w http.ResponseWriter, r *http.Request) {
	id, ok := sandboxIDParam(w, r)
	if !ok {
		return
	}
	var req struct {
		Timeout *int64 `json:"timeout"`
	}
	if err := wire.DecodeBody(r, &req); err != nil || req.Timeout == nil {
		wire.WriteError(w, http.StatusBadRequest, "Invalid request body: timeout is required")
		return
	}
	// A negative value means zero here, as the provider treats it.
	timeout, err := s.validTimeout(max(*req.Timeout, 0), true)
	if err != nil {
		wire.WriteError(w, http.StatusBadRequest, "Max instance length exceeded")
		return
	}
	if err := s.setTimeout(id, timeout); err != nil {
		writeOpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRefresh(w http.ResponseWriter, r *http.Request) {
	id, ok := sandboxIDParam(w, r)
	if !ok {
		return
	}
	var req struct {
		Duration *int64 `json:"duration"`
	}
	if err := wire.DecodeBody(r, &req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "Invalid request body: "+err.Error())
		return
	}
	secs := int64(15)
	if req.Duration != nil {
		if *req.Duration < 0 || *req.Duration > 3600 {
			wire.WriteError(w, http.StatusBadRequest, "duration must be between 0 and 3600 seconds")
			return
		}
		secs = max(*req.Duration, 15)
	}
	if err := s.refresh(id, time.Duration(secs)*time.Second); err != nil {
		writeOpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleMetrics answers like a fresh sandbox: sandboxd does not sample usage.
