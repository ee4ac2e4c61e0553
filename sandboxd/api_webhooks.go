package sandboxd

import (
	"errors"
	"net/http"

	"sandman/sandboxd/wire"
)

func (s *Server) webhookView(w webhook) webhookView {
	events := w.Events
	if events == nil {
		events = []string{}
	}
	return webhookView{ID: w.ID, TeamID: s.teamID, TeamId: s.teamID, Name: w.Name, CreatedAt: w.CreatedAt,
		Enabled: w.Enabled, URL: w.URL, Events: events}
}

// webhookRequest is the body of create (all fields) and update (any subset).
type webhookRequest struct {
	Name            *string   `json:"name"`
	URL             *string   `json:"url"`
	Enabled         *bool     `json:"enabled"`
	Events          *[]string `json:"events"`
	SignatureSecret *string   `json:"signatureSecret"`
}

// apply copies the given fields onto w, validating them.
func (req webhookRequest) apply(w *webhook) error {
	if req.Name != nil {
		w.Name = *req.Name
	}
	if req.URL != nil {
		if err := validateWebhookURL(*req.URL); err != nil {
			return err
		}
		w.URL = *req.URL
	}
	if req.Enabled != nil {
		w.Enabled = *req.Enabled
	}
	if req.Events != nil {
		for _, t := range *req.Events {
			if _, ok := eventLabels[t]; !ok {
				return errors.New("unknown event type: " + t)
			}
		}
		w.Events = append([]string(nil), *req.Events...)
	}
	if req.SignatureSecret != nil {
		if *req.SignatureSecret == "" {
			return errors.New("signatureSecret cannot be empty")
		}
		w.Secret = *req.SignatureSecret
	}
	return nil
}

func (s *Server) handleWebhookCreate(w http.ResponseWriter, r *http.Request) {
	var req webhookRequest
	if err := wire.DecodeBody(r, &req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "Invalid request body: "+err.Error())
		return
	}
	if req.URL == nil || req.SignatureSecret == nil {
		wire.WriteError(w, http.StatusBadRequest, "url and signatureSecret are required")
		return
	}
	hook := &webhook{ID: newUUID(), Enabled: true, CreatedAt: now()}
	if err := req.apply(hook); err != nil {
		wire.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := s.hooks.put(hook); err != nil {
		writeOpError(w, err)
		return
	}
	wire.WriteJSON(w, http.StatusCreated, s.webhookView(*hook))
}

func (s *Server) handleWebhookList(w http.ResponseWriter, r *http.Request) {
	hooks := s.hooks.list()
	out := make([]webhookView, 0, len(hooks))
	for _, h := range hooks {
		out = append(out, s.webhookView(h))
	}
	wire.WriteJSON(w, http.StatusOK, out)
}

// lookupWebhook finds a registered webhook, answering 404 itself. The
// static webhook of the command line is not the API's to manage.
func (s *Server) lookupWebhook(w http.ResponseWriter, r *http.Request) (webhook, bool) {
	id := r.PathValue("webhookID")
	hook, ok := s.hooks.get(id)
	if !ok || id == staticWebhookID {
		wire.WriteError(w, http.StatusNotFound, "Webhook "+id+" not found")
		return webhook{}, false
	}
	return hook, true
}

func (s *Server) handleWebhookGet(w http.ResponseWriter, r *http.Request) {
	if hook, ok := s.lookupWebhook(w, r); ok {
		wire.WriteJSON(w, http.StatusOK, s.webhookView(hook))
	}
}

func (s *Server) handleWebhookUpdate(w http.ResponseWriter, r *http.Request) {
	hook, ok := s.lookupWebhook(w, r)
	if !ok {
		return
	}
	var req webhookRequest
	if err := wire.DecodeBody(r, &req); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "Invalid request body: "+err.Error())
		return
	}
	if err := req.apply(&hook); err != nil {
		wire.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := s.hooks.put(&hook); err != nil {
		writeOpError(w, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, s.webhookView(hook))
}

func (s *Server) handleWebhookDelete(w http.ResponseWriter, r *http.Request) {
	hook, ok := s.lookupWebhook(w, r)
	if !ok {
		return
	}
	if _, err := s.hooks.delete(hook.ID); err != nil {
		writeOpError(w, err)
		return
	}
	wire.WriteJSON(w, http.StatusOK, s.webhookView(hook))
}
