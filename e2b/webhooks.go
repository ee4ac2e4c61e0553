package e2b

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Webhook is a webhook registration. The provider never returns its secret.
type Webhook struct {
	ID        string    `json:"id"`
	TeamID    string    `json:"teamID"` // the docs also spell it teamId; json matches both
	Name      string    `json:"name"`
	URL       string    `json:"url"`
	Enabled   bool      `json:"enabled"`
	Events    []string  `json:"events"`
	CreatedAt time.Time `json:"createdAt"`
}

// WebhookParams registers a webhook.
type WebhookParams struct {
	Name            string   `json:"name"`
	URL             string   `json:"url"`
	Enabled         bool     `json:"enabled"`
	Events          []string `json:"events"`
	SignatureSecret string   `json:"signatureSecret"`
}

// WebhookUpdate changes the fields that are set (non-nil).
type WebhookUpdate struct {
	Name            *string  `json:"name,omitempty"`
	URL             *string  `json:"url,omitempty"`
	Enabled         *bool    `json:"enabled,omitempty"`
	Events          []string `json:"events,omitempty"`
	SignatureSecret *string  `json:"signatureSecret,omitempty"`
}

// WebhookName is the name EnsureWebhook registers under.
const WebhookName = "sandman"

func webhookPath(id string) (string, error) {
	if id == "" || strings.ContainsAny(id, "/?#") {
		return "", fmt.Errorf("e2b: %w: bad webhook ID %q", ErrInvalid, id)
	}
	return "/events/webhooks/" + url.PathEscape(id), nil
}

// CreateWebhook registers a webhook. It is not retried after ambiguous failures (a repeat
// could register it twice); EnsureWebhook is the idempotent way.
func (c *Client) CreateWebhook(ctx context.Context, p WebhookParams) (Webhook, error) {
	if p.Events == nil {
		p.Events = []string{}
	}
	body, err := json.Marshal(p)
	if err != nil {
		return Webhook{}, err
	}
	resp, err := c.do(ctx, &request{op: "webhook_create", method: http.MethodPost, url: c.apiURL("/events/webhooks", nil),
		body: body, contentType: "application/json", api: true})
	if err != nil {
		return Webhook{}, err
	}
	return decodeWebhook("webhook_create", resp.body)
}

// ListWebhooks lists the team's webhooks.
func (c *Client) ListWebhooks(ctx context.Context) ([]Webhook, error) {
	resp, err := c.do(ctx, &request{op: "webhook_list", method: http.MethodGet, url: c.apiURL("/events/webhooks", nil),
		api: true, idempotent: true})
	if err != nil {
		return nil, err
	}
	return decodeWebhooks(resp.body)
}

// decodeWebhooks takes a bare array (as assumed) or an object wrapping one, since the
// wrapper is unconfirmed.
func decodeWebhooks(body []byte) ([]Webhook, error) {
	body = bytes.TrimSpace(body)
	var hooks []Webhook
	if len(body) > 0 && body[0] == '{' {
		var wrapped map[string]json.RawMessage
		if err := json.Unmarshal(body, &wrapped); err != nil {
			return nil, fmt.Errorf("e2b webhook_list: decode answer: %w", err)
		}
		for _, k := range []string{"webhooks", "data", "items"} {
			if raw, ok := wrapped[k]; ok {
				body = raw
				break
			}
		}
	}
	if err := json.Unmarshal(body, &hooks); err != nil {
		return nil, fmt.Errorf("e2b webhook_list: decode answer: %w", err)
	}
	return hooks, nil
}

func decodeWebhook(op string, body []byte) (Webhook, error) {
	var w Webhook
	if err := json.Unmarshal(body, &w); err != nil {
		return Webhook{}, fmt.Errorf("e2b %s: decode answer: %w", op, err)
	}
	if w.ID == "" {
		return Webhook{}, fmt.Errorf("e2b %s: answer has no webhook id", op)
	}
	return w, nil
}

// GetWebhook returns one webhook, or ErrNotFound.
func (c *Client) GetWebhook(ctx context.Context, id string) (Webhook, error) {
	path, err := webhookPath(id)
	if err != nil {
		return Webhook{}, err
	}
	resp, err := c.do(ctx, &request{op: "webhook_get", method: http.MethodGet, url: c.apiURL(path, nil), api: true, idempotent: true})
	if err != nil {
		return Webhook{}, err
	}
	return decodeWebhook("webhook_get", resp.body)
}

// UpdateWebhook changes the set fields of a webhook.
func (c *Client) UpdateWebhook(ctx context.Context, id string, u WebhookUpdate) error {
	path, err := webhookPath(id)
	if err != nil {
		return err
	}
	body, err := json.Marshal(u)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, &request{op: "webhook_update", method: http.MethodPatch, url: c.apiURL(path, nil), body: body,
		contentType: "application/json", api: true, idempotent: true})
	return err
}

// DeleteWebhook removes a webhook; ErrNotFound when there is none.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	path, err := webhookPath(id)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, &request{op: "webhook_delete", method: http.MethodDelete, url: c.apiURL(path, nil), api: true, idempotent: true})
	return err
}

// EnsureWebhook makes the provider deliver eventTypes (nil: AllEventTypes) to hookURL signed
// with secret, whatever was registered before: it updates the webhook registered for
// hookURL, or creates one. Several Sandman instances starting together may each create one;
// every instance then keeps the oldest and deletes the others, so they converge on one.
func (c *Client) EnsureWebhook(ctx context.Context, hookURL, secret string, eventTypes []string) (Webhook, error) {
	if hookURL == "" || secret == "" {
		return Webhook{}, fmt.Errorf("e2b ensure webhook: %w: URL and secret are required", ErrInvalid)
	}
	if eventTypes == nil {
		eventTypes = AllEventTypes
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	mine, err := c.webhooksFor(ctx, hookURL)
	if err != nil {
		return Webhook{}, err
	}
	if len(mine) == 0 {
		if _, err := c.CreateWebhook(ctx, WebhookParams{Name: WebhookName, URL: hookURL, Enabled: true,
			Events: eventTypes, SignatureSecret: secret}); err != nil {
			return Webhook{}, err
		}
		if mine, err = c.webhooksFor(ctx, hookURL); err != nil {
			return Webhook{}, err
		}
		if len(mine) == 0 {
			return Webhook{}, errors.New("e2b ensure webhook: created, but the list does not show it")
		}
	}
	keep := mine[0]
	for _, extra := range mine[1:] {
		if err := c.DeleteWebhook(ctx, extra.ID); err != nil && !errors.Is(err, ErrNotFound) {
			return Webhook{}, err
		}
	}
	// The secret is never returned, so it cannot be compared: always set it, with the rest.
	enabled := true
	if err := c.UpdateWebhook(ctx, keep.ID, WebhookUpdate{URL: &hookURL, Enabled: &enabled, Events: eventTypes,
		SignatureSecret: &secret}); err != nil {
		return Webhook{}, err
	}
	return c.GetWebhook(ctx, keep.ID)
}

// webhooksFor lists the webhooks for hookURL, oldest first.
func (c *Client) webhooksFor(ctx context.Context, hookURL string) ([]Webhook, error) {
	all, err := c.ListWebhooks(ctx)
	if err != nil {
		return nil, err
	}
	var mine []Webhook
	for _, w := range all {
		if w.URL == hookURL {
			mine = append(mine, w)
		}
	}
	slices.SortFunc(mine, func(a, b Webhook) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return mine, nil
}

// VerifyWebhookSignature reports whether signatureHeader (the e2b-signature header) signs body
// with secret: base64 of SHA-256(secret ‖ body), in the standard or URL-safe alphabet, padded
// or not (the docs and the live service disagree: docs/provider.md, "Webhooks"). The comparison is constant
// time. An empty secret never verifies, since anyone could compute that signature.
func VerifyWebhookSignature(secret string, body []byte, signatureHeader string) bool {
	if secret == "" {
		return false
	}
	h := sha256.New()
	h.Write([]byte(secret))
	h.Write(body)
	want := base64.RawStdEncoding.EncodeToString(h.Sum(nil))
	got := strings.TrimRight(strings.TrimSpace(signatureHeader), "=")
	got = strings.NewReplacer("-", "+", "_", "/").Replace(got)
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
