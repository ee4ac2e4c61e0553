package outbox

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/apperr"
	"sandman/db"
	"sandman/keyring"
)

// MaxEndpoints is the most endpoints one founder may have.
const MaxEndpoints = 10

// MaxDescription is the longest description of an endpoint.
const MaxDescription = 500

// rotationOverlap is how long a rotated-out secret keeps signing beside the new one.
const rotationOverlap = 24 * time.Hour

// Config is the outbox's timings and rules; DefaultConfig is production's.
type Config struct {
	// AllowPrivate lets endpoints be on loopback and private addresses
	// (SANDMAN_WEBHOOKS_ALLOW_PRIVATE), never link-local or metadata ones.
	AllowPrivate bool
	// Retries are the waits before each attempt after the first; after the last, the delivery
	// has failed.
	Retries []time.Duration
	// Timeout bounds one attempt, the answer's reading included.
	Timeout time.Duration
	// DisableAfter turns off an endpoint whose deliveries have all failed this long.
	DisableAfter time.Duration
	// Keep is how long events stay in the feed.
	Keep time.Duration
}

// DefaultConfig is the schedule of docs/api.md, "Webhooks".
func DefaultConfig() Config {
	return Config{
		Retries: []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 15 * time.Minute,
			time.Hour, 4 * time.Hour, 10 * time.Hour, 24 * time.Hour},
		Timeout:      10 * time.Second,
		DisableAfter: 3 * 24 * time.Hour,
		Keep:         7 * 24 * time.Hour,
	}
}

// Service is the founders' endpoints, their deliveries and the feed, and the sender (Run).
type Service struct {
	pool *pgxpool.Pool
	keys *keyring.Keyring
	cfg  Config
	log  *slog.Logger
	send *sender
}

// New makes the outbox over pool, sealing secrets with keys (nil: no endpoint can be made).
func New(pool *pgxpool.Pool, keys *keyring.Keyring, cfg Config, log *slog.Logger) *Service {
	s := &Service{pool: pool, keys: keys, cfg: cfg, log: log}
	s.send = newSender(s)
	return s
}

// Endpoint is an endpoint as the founder sees it. Secret is set only in the answer that made
// it (a creation, a rotation).
type Endpoint struct {
	ID             uuid.UUID
	URL            string
	Events         []Type
	Description    string
	Enabled        bool
	DisabledReason string // "failing": Sandman turned it off after 3 days of failures
	CreatedAt      time.Time
	Secret         string
}

func endpointOf(r db.WebhookEndpoint) Endpoint {
	e := Endpoint{ID: r.ID, URL: r.URL, Description: r.Description, Enabled: r.Enabled, CreatedAt: r.CreatedAt,
		Events: make([]Type, 0, len(r.EventTypes))}
	for _, t := range r.EventTypes {
		e.Events = append(e.Events, Type(t))
	}
	if r.DisabledReason != nil {
		e.DisabledReason = *r.DisabledReason
	}
	return e
}

// EndpointInput is what a founder sends to make or change an endpoint.
type EndpointInput struct {
	URL         string
	Events      []string
	Description string
	Enabled     bool
}

// validate checks an endpoint's fields: the URL's refusal is CodeURLRefused's, naming why. An
// unchanged URL (newURL false) is not resolved again: turning an endpoint off must work while
// its host does not resolve (the dialer checks every connection anyway).
func (s *Service) validate(ctx context.Context, in *EndpointInput, newURL bool) error {
	in.URL = strings.TrimSpace(in.URL)
	in.Description = strings.TrimSpace(in.Description)
	if in.URL == "" {
		return apperr.Invalid(map[string]string{"url": "Enter the URL your backend listens on."})
	}
	if newURL {
		if why := checkURL(ctx, in.URL, s.cfg.AllowPrivate); why != "" {
			e := apperr.Invalid(map[string]string{"url": why})
			e.Code, e.Message = CodeURLRefused, why
			return e
		}
	}
	if len(in.Description) > MaxDescription {
		return apperr.Invalid(map[string]string{"description": fmt.Sprintf("Keep the description under %d characters.", MaxDescription)})
	}
	seen := map[string]bool{}
	var events []string
	for _, t := range in.Events {
		t = strings.TrimSpace(t)
		if t == "" || seen[t] {
			continue
		}
		if !slices.Contains(Types, Type(t)) {
			return apperr.Invalid(map[string]string{"events": fmt.Sprintf("%q is no event type; see the list in the API's documentation.", t)})
		}
		seen[t] = true
		events = append(events, t)
	}
	in.Events = events
	if in.Events == nil {
		in.Events = []string{}
	}
	return nil
}

// newSecret is a Standard Webhooks secret: whsec_ and the base64 of 24 random bytes.
func newSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(b), nil
}

// ad binds a sealed secret to its endpoint: copied to another row, it does not open.
func ad(endpoint uuid.UUID) []byte { return []byte("webhook:" + endpoint.String()) }

func (s *Service) seal(endpoint uuid.UUID) (secret, keyID string, sealed []byte, err error) {
	if !s.keys.Enabled() {
		return "", "", nil, apperr.New(apperr.KindUnavailable, CodeWebhooksOff,
			"Webhooks are off on this Sandman: its operator must set SANDMAN_SECRETS_KEY to keep their signing secrets.")
	}
	if secret, err = newSecret(); err != nil {
		return "", "", nil, err
	}
	keyID, sealed, err = s.keys.Seal([]byte(secret), ad(endpoint))
	return secret, keyID, sealed, err
}

// Create makes an endpoint; its secret is in this answer only.
func (s *Service) Create(ctx context.Context, owner uuid.UUID, in EndpointInput) (Endpoint, error) {
	if err := s.validate(ctx, &in, true); err != nil {
		return Endpoint{}, err
	}
	id := uuid.New()
	secret, keyID, sealed, err := s.seal(id)
	if err != nil {
		return Endpoint{}, err
	}
	var row db.WebhookEndpoint
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if err := tx.LockWebhookOwner(ctx, owner); err != nil {
			return err
		}
		n, err := tx.CountWebhookEndpoints(ctx, owner)
		if err != nil {
			return err
		}
		if n >= MaxEndpoints {
			return apperr.New(apperr.KindConflict, CodeEndpointLimit,
				fmt.Sprintf("You have %d webhook endpoints, the most an account may have: delete one first.", MaxEndpoints))
		}
		row, err = tx.InsertWebhookEndpoint(ctx, db.InsertWebhookEndpointParams{ID: id, OwnerID: owner, URL: in.URL,
			Description: in.Description, EventTypes: in.Events, SecretKeyID: keyID, SecretSealed: sealed})
		return err
	})
	if err != nil {
		return Endpoint{}, err
	}
	e := endpointOf(row)
	e.Secret = secret
	return e, nil
}

// List is the founder's endpoints, oldest first.
func (s *Service) List(ctx context.Context, owner uuid.UUID) ([]Endpoint, error) {
	rows, err := db.New(s.pool).ListWebhookEndpoints(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([]Endpoint, 0, len(rows))
	for _, r := range rows {
		out = append(out, endpointOf(r))
	}
	return out, nil
}

var errNoEndpoint = apperr.NotFound("Webhook endpoint")

// Get is one of the founder's endpoints; another founder's is not found.
func (s *Service) Get(ctx context.Context, owner, id uuid.UUID) (Endpoint, error) {
	r, err := db.New(s.pool).GetWebhookEndpoint(ctx, db.GetWebhookEndpointParams{ID: id, OwnerID: owner})
	if db.IsNotFound(err) {
		return Endpoint{}, errNoEndpoint
	}
	if err != nil {
		return Endpoint{}, err
	}
	return endpointOf(r), nil
}

// Patch is a change of some of an endpoint's fields (nil: unchanged).
type Patch struct {
	URL         *string
	Events      *[]string
	Description *string
	Enabled     *bool
}

// Update changes the fields of p; turning an endpoint on again gives it 3 more days.
func (s *Service) Update(ctx context.Context, owner, id uuid.UUID, p Patch) (Endpoint, error) {
	cur, err := s.Get(ctx, owner, id)
	if err != nil {
		return Endpoint{}, err
	}
	in := EndpointInput{URL: cur.URL, Description: cur.Description, Enabled: cur.Enabled}
	for _, t := range cur.Events {
		in.Events = append(in.Events, string(t))
	}
	if p.URL != nil {
		in.URL = *p.URL
	}
	if p.Events != nil {
		in.Events = *p.Events
	}
	if p.Description != nil {
		in.Description = *p.Description
	}
	if p.Enabled != nil {
		in.Enabled = *p.Enabled
	}
	if err := s.validate(ctx, &in, p.URL != nil && strings.TrimSpace(*p.URL) != cur.URL); err != nil {
		return Endpoint{}, err
	}
	r, err := db.New(s.pool).UpdateWebhookEndpoint(ctx, db.UpdateWebhookEndpointParams{ID: id, OwnerID: owner, URL: in.URL,
		Description: in.Description, EventTypes: in.Events, Enabled: in.Enabled})
	if db.IsNotFound(err) {
		return Endpoint{}, errNoEndpoint
	}
	if err != nil {
		return Endpoint{}, err
	}
	return endpointOf(r), nil
}

// Delete removes an endpoint with its deliveries.
func (s *Service) Delete(ctx context.Context, owner, id uuid.UUID) error {
	n, err := db.New(s.pool).DeleteWebhookEndpoint(ctx, db.DeleteWebhookEndpointParams{ID: id, OwnerID: owner})
	if err != nil {
		return err
	}
	if n == 0 {
		return errNoEndpoint
	}
	return nil
}

// Rotate gives an endpoint a new secret (in this answer only); the old one keeps signing beside
// it, as a second signature, for a day, so the founder's backend can change without a gap.
func (s *Service) Rotate(ctx context.Context, owner, id uuid.UUID) (Endpoint, error) {
	secret, keyID, sealed, err := s.seal(id)
	if err != nil {
		return Endpoint{}, err
	}
	until := time.Now().Add(rotationOverlap)
	r, err := db.New(s.pool).RotateWebhookSecret(ctx, db.RotateWebhookSecretParams{ID: id, OwnerID: owner,
		PreviousUntil: &until, SecretKeyID: keyID, SecretSealed: sealed})
	if db.IsNotFound(err) {
		return Endpoint{}, errNoEndpoint
	}
	if err != nil {
		return Endpoint{}, err
	}
	e := endpointOf(r)
	e.Secret = secret
	return e, nil
}

// Test sends webhook.test to one endpoint (and to no other, nor to the feed).
func (s *Service) Test(ctx context.Context, owner, id uuid.UUID) error {
	if _, err := s.Get(ctx, owner, id); err != nil {
		return err
	}
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		_, err := record(ctx, tx, Event{Owner: owner, Type: WebhookTest}, &id)
		return err
	})
}

// Reseal seals again, under the current key, every secret sealed under another (a key
// rotation: SANDMAN_SECRETS_KEY_PREVIOUS still opens them meanwhile). It returns how many
// endpoints it changed; run it again after an error.
func (s *Service) Reseal(ctx context.Context) (int, error) {
	if !s.keys.Enabled() {
		return 0, keyring.ErrNoKey
	}
	q := db.New(s.pool)
	done := 0
	// By id, once each: a row a rotation changed meanwhile is left to that rotation (its new
	// secret is sealed under the current key), never looked at again in a loop.
	var after uuid.UUID
	for {
		rows, err := q.ListStaleWebhookSecrets(ctx, db.ListStaleWebhookSecretsParams{KeyID: s.keys.CurrentID(), After: after, Max: 100})
		if err != nil {
			return done, err
		}
		if len(rows) == 0 {
			return done, nil
		}
		for _, r := range rows {
			after = r.ID
			p, err := s.resealed(r)
			if err != nil {
				return done, fmt.Errorf("endpoint %s: %w", r.ID, err)
			}
			n, err := q.ResealWebhookSecrets(ctx, p)
			if err != nil {
				return done, err
			}
			done += int(n)
		}
	}
}

func (s *Service) resealed(r db.WebhookEndpoint) (db.ResealWebhookSecretsParams, error) {
	p := db.ResealWebhookSecretsParams{ID: r.ID, OldSealed: r.SecretSealed, OldPreviousSealed: r.PreviousSealed,
		SecretKeyID: r.SecretKeyID, SecretSealed: r.SecretSealed, PreviousKeyID: r.PreviousKeyID, PreviousSealed: r.PreviousSealed}
	again := func(keyID string, sealed []byte) (string, []byte, error) {
		plain, err := s.keys.Open(keyID, sealed, ad(r.ID))
		if err != nil {
			return "", nil, err
		}
		return s.keys.Seal(plain, ad(r.ID))
	}
	var err error
	if s.keys.Stale(r.SecretKeyID) {
		if p.SecretKeyID, p.SecretSealed, err = again(r.SecretKeyID, r.SecretSealed); err != nil {
			return p, err
		}
	}
	if r.PreviousKeyID != nil && (r.PreviousUntil == nil || r.PreviousUntil.Before(time.Now())) {
		// A rotated-out secret past its day signs nothing: it is dropped, not sealed again.
		p.PreviousKeyID, p.PreviousSealed = nil, nil
	} else if r.PreviousKeyID != nil && s.keys.Stale(*r.PreviousKeyID) {
		id, sealed, err := again(*r.PreviousKeyID, r.PreviousSealed)
		if err != nil {
			return p, err
		}
		p.PreviousKeyID, p.PreviousSealed = &id, sealed
	}
	return p, nil
}
