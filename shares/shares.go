// Package shares owns share links (docs/architecture.md, "Share links"): the one link per
// project that lets anyone see its preview without an account, its token and the key the token
// is made with, and the rate limits of the link's visitors. What a visitor sees and may do to
// the preview (wake it, keep it awake) is the lifecycle's.
package shares

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"sandman/apperr"
	"sandman/db"
)

// MinKeyLength is the shortest SANDMAN_SHARE_KEY accepted.
const MinKeyLength = 32

// tokenBytes is how much of the HMAC a token keeps: 192 bits, 32 characters of base64url.
const tokenBytes = 24

// TokenLength is the length of a token in a link.
const TokenLength = 32

// Service makes, shows and ends share links, and opens them for visitors.
type Service struct {
	pool      *pgxpool.Pool
	q         *db.Queries
	key       []byte // nil: founders cannot share (links made before keep working)
	publicURL func() string
	now       func() time.Time
}

// Options configure a Service.
type Options struct {
	// Key is SANDMAN_SHARE_KEY: tokens are HMAC-SHA256(Key, the link's nonce). Empty: sharing is
	// off, though links made with a key before still open for their visitors.
	Key string
	// PublicURL is SANDMAN_PUBLIC_URL (or what it defaults to), without a trailing slash: links
	// are PublicURL + "/s/" + token.
	PublicURL func() string
}

// New returns a Service.
func New(pool *pgxpool.Pool, opts Options) *Service {
	s := &Service{pool: pool, q: db.New(pool), publicURL: opts.PublicURL, now: time.Now}
	if opts.Key != "" {
		s.key = []byte(opts.Key)
	}
	return s
}

// Enabled reports whether founders can share (a key is configured).
func (s *Service) Enabled() bool { return s.key != nil }

// Link is a project's share link as its founder sees it.
type Link struct {
	ID        uuid.UUID
	ProjectID uuid.UUID
	// URL is the link to send. Empty when it cannot be shown again: it was made with another
	// SANDMAN_SHARE_KEY, or none is set now. It still opens for whoever has it.
	URL       string
	CreatedAt time.Time
}

// ErrSharingOff refuses to make a link on a Sandman without SANDMAN_SHARE_KEY.
var ErrSharingOff = apperr.New(apperr.KindUnavailable, codeSharingOff,
	"Sharing is off on this Sandman: its operator turns it on by setting SANDMAN_SHARE_KEY.")

// Current returns the founder's project's link; ok is false when it has none.
func (s *Service) Current(ctx context.Context, owner, projectID uuid.UUID) (link Link, ok bool, err error) {
	if err := s.ownProject(ctx, s.q, owner, projectID); err != nil {
		return Link{}, false, err
	}
	row, err := s.q.GetShareLinkByProject(ctx, projectID)
	if db.IsNotFound(err) {
		return Link{}, false, nil
	}
	if err != nil {
		return Link{}, false, err
	}
	return s.link(row), true, nil
}

// Share turns the project's link on: it returns the current link, or makes one (created).
func (s *Service) Share(ctx context.Context, owner, projectID uuid.UUID) (link Link, created bool, err error) {
	if !s.Enabled() {
		return Link{}, false, ErrSharingOff
	}
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if err := s.ownProject(ctx, tx, owner, projectID); err != nil {
			return err
		}
		nonce, hash := s.newToken()
		row, err := tx.InsertShareLinkIfNone(ctx, db.InsertShareLinkIfNoneParams{ProjectID: projectID, Nonce: nonce, TokenHash: hash})
		if db.IsNotFound(err) { // it has one
			row, err = tx.GetShareLinkByProject(ctx, projectID)
			link = s.link(row)
			return err
		}
		if err != nil {
			return err
		}
		link, created = s.link(row), true
		return announce(ctx, tx, owner, projectID, nil)
	})
	return link, created, err
}

// Renew replaces the project's link with a new one: the old link stops working at once, and
// its visitors' pages say so.
func (s *Service) Renew(ctx context.Context, owner, projectID uuid.UUID) (Link, error) {
	if !s.Enabled() {
		return Link{}, ErrSharingOff
	}
	var link Link
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if err := s.ownProject(ctx, tx, owner, projectID); err != nil {
			return err
		}
		old, err := tx.GetShareLinkByProject(ctx, projectID)
		if err != nil && !db.IsNotFound(err) {
			return err
		}
		nonce, hash := s.newToken()
		row, err := tx.ReplaceShareLink(ctx, db.ReplaceShareLinkParams{ProjectID: projectID, Nonce: nonce, TokenHash: hash})
		if err != nil {
			return err
		}
		link = s.link(row)
		var ended *uuid.UUID
		if old.ID != uuid.Nil {
			ended = &old.ID
		}
		return announce(ctx, tx, owner, projectID, ended)
	})
	return link, err
}

// TurnOff ends the project's link, if it has one: it stops working at once, and its visitors'
// pages say so.
func (s *Service) TurnOff(ctx context.Context, owner, projectID uuid.UUID) error {
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if err := s.ownProject(ctx, tx, owner, projectID); err != nil {
			return err
		}
		id, err := tx.DeleteShareLink(ctx, projectID)
		if db.IsNotFound(err) {
			return nil // already off
		}
		if err != nil {
			return err
		}
		return announce(ctx, tx, owner, projectID, &id)
	})
}

// Visit is an open share link: what a visitor's requests act on.
type Visit struct {
	LinkID    uuid.UUID
	ProjectID uuid.UUID
	OwnerID   uuid.UUID
}

// ErrLinkGone is every bad token's answer: turned off, replaced, or never made.
var ErrLinkGone = apperr.New(apperr.KindNotFound, codeLinkGone, "This link doesn't work anymore.")

// Open finds the link a visitor's token belongs to, by the token's hash.
func (s *Service) Open(ctx context.Context, token string) (Visit, error) {
	if !wellFormed(token) {
		return Visit{}, ErrLinkGone
	}
	row, err := s.q.GetShareLinkByTokenHash(ctx, hashOf(token))
	if db.IsNotFound(err) {
		return Visit{}, ErrLinkGone
	}
	if err != nil {
		return Visit{}, err
	}
	return Visit{LinkID: row.ID, ProjectID: row.ProjectID, OwnerID: row.OwnerID}, nil
}

// link is a row as its founder sees it: with its URL when this key made its token.
func (s *Service) link(row db.ShareLink) Link {
	l := Link{ID: row.ID, ProjectID: row.ProjectID, CreatedAt: row.CreatedAt}
	if s.key != nil {
		if token := s.token(row.Nonce); hmac.Equal(hashOf(token), row.TokenHash) {
			l.URL = s.publicURL() + "/s/" + token
		}
	}
	return l
}

// newToken makes a fresh nonce and the hash of the token it gives.
func (s *Service) newToken() (nonce, hash []byte) {
	nonce = make([]byte, 32)
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return nonce, hashOf(s.token(nonce))
}

// token is the link's token: HMAC-SHA256(key, nonce), cut to 192 bits, in base64url.
func (s *Service) token(nonce []byte) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("sandman share link\x00"))
	m.Write(nonce)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:tokenBytes])
}

func hashOf(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// wellFormed reports whether token could be one of ours (anything else is not looked up).
func wellFormed(token string) bool {
	if len(token) != TokenLength {
		return false
	}
	for _, r := range token {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// projectGetter is what ownProject reads with: the pool's queries or a transaction.
type projectGetter interface {
	GetProjectByOwner(context.Context, db.GetProjectByOwnerParams) (db.Project, error)
}

// ownProject refuses another founder's project (and one that does not exist) alike.
func (s *Service) ownProject(ctx context.Context, q projectGetter, owner, projectID uuid.UUID) error {
	if _, err := q.GetProjectByOwner(ctx, db.GetProjectByOwnerParams{ID: projectID, OwnerID: owner}); err != nil {
		if db.IsNotFound(err) {
			return apperr.NotFound("Project")
		}
		return err
	}
	return nil
}

// announce tells, at commit, the founder's pages that the project's link changed (its card
// says "Shared"), and every instance that the link ended stopped working (its visitors' streams
// end).
func announce(ctx context.Context, tx db.Tx, owner, projectID uuid.UUID, ended *uuid.UUID) error {
	if ended != nil {
		if err := tx.Notify(ctx, db.NotifyParams{Channel: db.ShareEndChannel, Payload: ended.String()}); err != nil {
			return err
		}
	}
	sb, err := tx.GetCurrentSandboxByProject(ctx, projectID)
	if db.IsNotFound(err) {
		return nil // no card shows a state yet
	}
	if err != nil {
		return err
	}
	return db.NotifySandbox(ctx, tx, sb.ID, owner)
}
