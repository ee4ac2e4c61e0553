package sandboxd

import (
	"net/http"

	"sandman/sandboxd/faults"
	"sandman/sandboxd/machine"
	"sandman/sandboxd/wire"
)

// Fault is one injected misbehaviour; the admin endpoints that take it are
// documented there. Only a sandboxd with Config.FaultInjection has them.
type Fault = faults.Fault

// File damage and webhook fault kinds (Fault.Damage, Fault.Webhook).
const (
	DamageDelete  = faults.DamageDelete
	DamageCorrupt = faults.DamageCorrupt
	WebhookDrop   = faults.WebhookDrop
	WebhookDelay  = faults.WebhookDelay
)

// damageFiles applies a files fault to a sandbox that has just been resumed (the caller holds
// sb.op): it boots the sandbox if nothing runs yet (a filesystem snapshot), then deletes or
// corrupts each path through the sandbox's own file access, as its processes would see it.
func (s *Server) damageFiles(sb *sandbox, f Fault) {
	m, err := s.machineFor(sb)
	if err != nil {
		s.log.Error("files fault: boot sandbox", "sandbox_id", sb.id, "err", err)
		return
	}
	faults.Damage(m.Files(), f, machine.CleanSandboxPath, func(p string, err error) {
		if err != nil {
			s.log.Warn("files fault: path skipped", "sandbox_id", sb.id, "path", p, "damage", f.Damage, "err", err)
			return
		}
		s.log.Info("files fault: damaged", "sandbox_id", sb.id, "path", p, "damage", f.Damage)
	})
}

// faultFile says whether a files fault may damage sandbox path p.
func faultFile(p string) bool {
	_, _, ok := machine.SplitSandboxPath(p)
	return ok && !machine.IsProtectedPath(machine.CleanSandboxPath(p))
}

func (s *Server) handleFaultAdd(w http.ResponseWriter, r *http.Request) {
	var f Fault
	if err := wire.DecodeBody(r, &f); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "Invalid request body: "+err.Error())
		return
	}
	if err := f.Validate(faultFile); err != nil {
		wire.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	a := s.faults.Add(f, newUUID())
	s.log.Info("fault added", "fault_id", a.ID, "route", f.Route, "webhook", f.Webhook, "files", f.Files, "damage", f.Damage,
		"status", f.Status, "latency_ms", f.LatencyMs, "count", f.Count)
	wire.WriteJSON(w, http.StatusCreated, map[string]string{"id": a.ID})
}

func (s *Server) handleFaultList(w http.ResponseWriter, r *http.Request) {
	wire.WriteJSON(w, http.StatusOK, s.faults.List())
}

func (s *Server) handleFaultClear(w http.ResponseWriter, r *http.Request) {
	if !s.faults.Clear(r.PathValue("faultID")) {
		wire.WriteError(w, http.StatusNotFound, "fault not found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleDashboardKill kills a sandbox the way the provider's dashboard does:
// the client sees no API call of its own, only the sandbox gone and the
// killed event.
func (s *Server) handleDashboardKill(w http.ResponseWriter, r *http.Request) {
	id, ok := sandboxIDParam(w, r)
	if !ok {
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if err := wire.DecodeBody(r, &req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "Invalid request body: "+err.Error())
		return
	}
	if req.Reason == "" {
		req.Reason = KillReasonRequest
	}
	if err := s.kill(id, req.Reason); err != nil {
		writeOpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// handleLose removes a sandbox as the provider sometimes loses one: it is simply gone, with no
// killed event and no webhook.
func (s *Server) handleLose(w http.ResponseWriter, r *http.Request) {
	id, ok := sandboxIDParam(w, r)
	if !ok {
		return
	}
	if err := s.lose(id); err != nil {
		writeOpError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
