package sandboxd

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"sandman/sandboxd/store"
)

// staticWebhookID names the webhook configured by Config.WebhookURL in the
// e2b-webhook-id header. It is not listed by the API.
const staticWebhookID = "sandboxd-static"

// webhook is a registration, persisted in webhooks.json.
type webhook struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Enabled   bool      `json:"enabled"`
	Events    []string  `json:"events"`
	Secret    string    `json:"signatureSecret"`
	CreatedAt time.Time `json:"createdAt"`
}

func (w *webhook) wants(eventType string) bool {
	return w.Enabled && (len(w.Events) == 0 || slices.Contains(w.Events, eventType))
}

// webhookView is what the API shows: never the secret. The team id is
// written under both spellings the provider's docs have used, so clients
// written against either read it.
type webhookView struct {
	ID        string    `json:"id"`
	TeamID    string    `json:"teamID"`
	TeamId    string    `json:"teamId"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	Enabled   bool      `json:"enabled"`
	URL       string    `json:"url"`
	Events    []string  `json:"events"`
}

type webhookRegistry struct {
	path   string
	mu     sync.Mutex
	hooks  map[string]*webhook
	static *webhook
}

func openWebhookRegistry(dir string, static *webhook) (*webhookRegistry, error) {
	r := &webhookRegistry{path: filepath.Join(dir, "webhooks.json"), hooks: map[string]*webhook{}, static: static}
	var list []*webhook
	if err := store.ReadJSON(r.path, &list); err != nil {
		return nil, err
	}
	for _, w := range list {
		r.hooks[w.ID] = w
	}
	return r, nil
}

func (r *webhookRegistry) saveLocked() error {
	list := make([]*webhook, 0, len(r.hooks))
	for _, w := range r.hooks {
		list = append(list, w)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].CreatedAt.Before(list[j].CreatedAt) })
	return store.WriteJSONAtomic(r.path, list)
}

// get returns a copy of a webhook, the static one included.
func (r *webhookRegistry) get(id string) (webhook, bool) {
	if r.static != nil && id == staticWebhookID {
		return *r.static, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.hooks[id]
	if !ok {
		return webhook{}, false
	}
	return *w, true
}

func (r *webhookRegistry) list() []webhook {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]webhook, 0, len(r.hooks))
	for _, w := range r.hooks {
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out
}

// subscribers lists the ids of webhooks that want an event type.
func (r *webhookRegistry) subscribers(eventType string) []string {
	var ids []string
	if r.static != nil {
		ids = append(ids, staticWebhookID)
	}
	for _, w := range r.list() {
		if w.wants(eventType) {
			ids = append(ids, w.ID)
		}
	}
	return ids
}

func (r *webhookRegistry) put(w *webhook) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, existed := r.hooks[w.ID]
	r.hooks[w.ID] = w
	if err := r.saveLocked(); err != nil {
		if existed {
			r.hooks[w.ID] = old
		} else {
			delete(r.hooks, w.ID)
		}
		return err
	}
	return nil
}

func (r *webhookRegistry) delete(id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.hooks[id]
	if !ok {
		return false, nil
	}
	delete(r.hooks, id)
	if err := r.saveLocked(); err != nil {
		r.hooks[id] = w
		return false, err
	}
	return true, nil
}

// validateWebhookURL accepts absolute http(s) URLs only: anything else could
// never be delivered to.
func validateWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("url must be an absolute http or https URL")
	}
	return nil
}

// Sign computes the provider's webhook signature: SHA-256 (not HMAC) over the
// secret followed directly by the raw body, base64 without padding. urlSafe
// picks the alphabet the docs describe; false picks the standard alphabet
// production was observed to send.
func Sign(secret string, body []byte, urlSafe bool) string {
	h := sha256.New()
	h.Write([]byte(secret))
	h.Write(body)
	sum := h.Sum(nil)
	if urlSafe {
		return base64.RawURLEncoding.EncodeToString(sum)
	}
	return base64.RawStdEncoding.EncodeToString(sum)
}
