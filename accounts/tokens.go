package accounts

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"sandman/apperr"
	"sandman/db"
)

// An API token is TokenPrefix, tokenRandom random base62 characters and the base62 CRC32 of
// them in tokenChecksum characters (GitHub's scheme): a secret scanner tells a real token from
// noise offline, and a request whose token fails its checksum is refused before any lookup.
const (
	TokenPrefix   = "sm_"
	tokenRandom   = 30 // about 178 bits
	tokenChecksum = 6  // a CRC32 is below 62^6
	// TokenLength is the length of every token.
	TokenLength = len(TokenPrefix) + tokenRandom + tokenChecksum
	// shownPrefix is how many of its first characters a token is listed with, to be recognised.
	shownPrefix = len(TokenPrefix) + 5
)

// The limits of API tokens (README, "For the builder's backend").
const (
	// MaxLiveTokens is how many tokens, neither revoked nor expired, a founder may have.
	MaxLiveTokens = 20
	// MaxTokenDays is the longest expiry a token can be made with, short of never.
	MaxTokenDays      = 365
	maxTokenNameRunes = 100
)

// Limit is a rate: at most N requests in any Window (in a burst of N at most, and one every
// Window/N when they keep coming).
type Limit struct {
	N      int
	Window time.Duration
}

func (l Limit) every() float64  { return l.Window.Seconds() / float64(l.N) }
func (l Limit) window() float64 { return l.Window.Seconds() }

// DefaultTokenLimit is the requests one token may make (Options.TokenLimit).
var DefaultTokenLimit = Limit{N: 600, Window: time.Minute}

// DefaultBearerFailureLimit is the failed bearer attempts one client address may make
// (Options.BearerFailureLimit); past it, every bearer request from the address is refused until
// its attempts are within the limit again.
var DefaultBearerFailureLimit = Limit{N: 30, Window: 15 * time.Minute}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// checksum is the base62 CRC32 (IEEE) of a token's random part, left-padded with zeros.
func checksum(random string) string {
	n := crc32.ChecksumIEEE([]byte(random))
	var out [tokenChecksum]byte
	for i := tokenChecksum - 1; i >= 0; i-- {
		out[i] = base62[n%62]
		n /= 62
	}
	return string(out[:])
}

// newTokenSecret makes a token: random base62 characters, each drawn uniformly (bytes at 248 and
// over are dropped, so no character is likelier than another), and their checksum.
func newTokenSecret() (string, error) {
	random := make([]byte, 0, tokenRandom)
	buf := make([]byte, 2*tokenRandom)
	for len(random) < tokenRandom {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if b < 248 && len(random) < tokenRandom {
				random = append(random, base62[b%62])
			}
		}
	}
	return TokenPrefix + string(random) + checksum(string(random)), nil
}

// ErrMalformedToken is what ParseToken says of anything that is not a token of ours, or one
// whose checksum does not match (a typo, a token cut short, noise).
var ErrMalformedToken = errors.New("not a Sandman API token")

// ParseToken checks that s is shaped like a token and that its checksum matches, with no
// database: only a token that passes is looked up.
func ParseToken(s string) error {
	random, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(s) != TokenLength {
		return ErrMalformedToken
	}
	for i := 0; i < len(random); i++ {
		if strings.IndexByte(base62, random[i]) < 0 {
			return ErrMalformedToken
		}
	}
	if checksum(random[:tokenRandom]) != random[tokenRandom:] {
		return ErrMalformedToken
	}
	return nil
}

func tokenHash(secret string) []byte {
	sum := sha256.Sum256([]byte(secret))
	return sum[:]
}

// Principal is who a request acts for: the founder, and how they came (their browser session,
// or one of their API tokens).
type Principal struct {
	Founder Founder
	// TokenID and TokenName are the API token's the request came with; uuid.Nil and "" for a
	// browser session.
	TokenID   uuid.UUID
	TokenName string
}

// ViaToken reports whether the request came with an API token.
func (p *Principal) ViaToken() bool { return p.TokenID != uuid.Nil }

// Token is an API token as its founder sees it: never its secret.
type Token struct {
	ID        uuid.UUID
	Name      string
	Prefix    string
	CreatedAt time.Time
	// ExpiresAt is nil for a token that never expires; LastUsedAt for one never used.
	ExpiresAt, LastUsedAt *time.Time
	LastUsedFrom          string
	// Expired tokens are listed (until revoked) but no longer work.
	Expired bool
}

// NewToken is a token just made, with its secret: the only time anyone sees it.
type NewToken struct {
	Token
	Secret string
}

func (s *Service) toToken(t db.APIToken) Token {
	return Token{ID: t.ID, Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt,
		ExpiresAt: t.ExpiresAt, LastUsedFrom: t.LastUsedFrom, Expired: t.ExpiresAt != nil && !t.ExpiresAt.After(s.now())}
}

// TokenRequest is what a founder asks a token to be made with.
type TokenRequest struct {
	Name string
	// ExpiresInDays is nil for a token that never expires.
	ExpiresInDays *int
}

// Validate returns a message per field that breaks a rule.
func (r TokenRequest) Validate() map[string]string {
	errs := map[string]string{}
	name := strings.TrimSpace(r.Name)
	switch {
	case name == "":
		errs["name"] = "Name the token after what will use it (\"ci\", \"staging backend\")."
	case utf8.RuneCountInString(name) > maxTokenNameRunes || !utf8.ValidString(name):
		errs["name"] = fmt.Sprintf("Use at most %d characters.", maxTokenNameRunes)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		errs["name"] = "Use letters, digits, spaces and punctuation only."
	}
	if d := r.ExpiresInDays; d != nil && (*d < 1 || *d > MaxTokenDays) {
		errs["expiresInDays"] = fmt.Sprintf("Choose from 1 to %d days, or leave it out for a token that never expires.", MaxTokenDays)
	}
	return errs
}

// errTooManyTokens refuses a token past MaxLiveTokens.
var errTooManyTokens = apperr.New(apperr.KindConflict, codeTooManyTokens,
	fmt.Sprintf("You already have %d API tokens that work. Revoke one you no longer use, then make a new one.", MaxLiveTokens))

// CreateToken makes a token for the founder and returns it with its secret, which is kept
// nowhere: only its SHA-256 is stored. The count of live tokens and the new one hold the
// founder's lock (on every instance), so no race makes more than MaxLiveTokens.
func (s *Service) CreateToken(ctx context.Context, owner uuid.UUID, r TokenRequest) (NewToken, error) {
	if errs := r.Validate(); len(errs) > 0 {
		return NewToken{}, apperr.Invalid(errs)
	}
	secret, err := newTokenSecret()
	if err != nil {
		return NewToken{}, err
	}
	var made db.APIToken
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if err := tx.LockRateLimit(ctx, "api tokens "+owner.String()); err != nil {
			return err
		}
		now := s.now()
		n, err := tx.CountLiveAPITokens(ctx, db.CountLiveAPITokensParams{OwnerID: owner, Now: now})
		if err != nil {
			return err
		}
		if n >= MaxLiveTokens {
			return errTooManyTokens
		}
		p := db.InsertAPITokenParams{OwnerID: owner, Name: strings.TrimSpace(r.Name), Prefix: secret[:shownPrefix], TokenHash: tokenHash(secret)}
		if r.ExpiresInDays != nil {
			p.ExpiresAt = ptr(now.AddDate(0, 0, *r.ExpiresInDays))
		}
		made, err = tx.InsertAPIToken(ctx, p)
		return err
	})
	if err != nil {
		return NewToken{}, err
	}
	return NewToken{Token: s.toToken(made), Secret: secret}, nil
}

func ptr[T any](v T) *T { return &v }

// Tokens lists the founder's tokens that are not revoked, newest first.
func (s *Service) Tokens(ctx context.Context, owner uuid.UUID) ([]Token, error) {
	rows, err := s.q.ListAPITokensByOwner(ctx, owner)
	if err != nil {
		return nil, err
	}
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = s.toToken(r)
	}
	return out, nil
}

// RevokeToken ends the founder's token: the next request with it, on any instance, is refused
// (every request looks its token up). Another founder's token, or one revoked already, is not
// found.
func (s *Service) RevokeToken(ctx context.Context, owner, id uuid.UUID) error {
	n, err := s.q.RevokeAPIToken(ctx, db.RevokeAPITokenParams{ID: id, OwnerID: owner})
	if err != nil {
		return err
	}
	if n == 0 {
		return apperr.NotFound("API token")
	}
	return nil
}

// ErrInvalidToken is the one answer to a token that is wrong, revoked or expired: the caller
// learns nothing of which.
var ErrInvalidToken = apperr.New(apperr.KindUnauthorized, codeInvalidToken,
	"This API token is not valid: it is mistyped, revoked or expired. Make a new one on Sandman's API tokens page.")

// TokenRefusal is why a token was refused, for the metrics and logs; its client sees only
// ErrInvalidToken (or the limit's 429).
type TokenRefusal struct {
	Reason string // malformed, unknown, revoked, expired, address_limited, token_limited
	// TokenID is the refused token's, when it was found (for the request log); else uuid.Nil.
	TokenID uuid.UUID
	err     error
}

func (e *TokenRefusal) Error() string { return "API token refused: " + e.Reason }
func (e *TokenRefusal) Unwrap() error { return e.err }

func refused(reason string, id uuid.UUID, err error) error {
	return &TokenRefusal{Reason: reason, TokenID: id, err: err}
}

// Authenticate returns who a request with the token secret, from the client address ip, acts
// for, and counts the request against the token's limit. A token that fails its
// checksum is refused with no database at all; any other is looked up by its SHA-256, once,
// with the address's failed attempts. An unknown, revoked or expired token counts as a failed
// attempt of the address; an address over its limit is refused whatever its token, so nobody
// can try tokens faster than the limit.
func (s *Service) Authenticate(ctx context.Context, secret, ip string) (Principal, error) {
	if ParseToken(secret) != nil {
		return Principal{}, refused("malformed", uuid.Nil, ErrInvalidToken)
	}
	fl, tl := s.bearerFailureLimit, s.tokenLimit
	row, err := s.q.GetAPITokenByHash(ctx, db.GetAPITokenByHashParams{IP: ip, TokenHash: tokenHash(secret),
		EverySeconds: fl.every(), WindowSeconds: fl.window()})
	switch {
	case db.IsNotFound(err):
		return Principal{}, s.fail(ctx, ip, "unknown", uuid.Nil)
	case err != nil:
		return Principal{}, err
	case row.FailuresWait > 0:
		return Principal{}, refused("address_limited", uuid.Nil, tooManyFailures(row.FailuresWait))
	case row.APIToken.RevokedAt != nil:
		return Principal{}, s.fail(ctx, ip, "revoked", row.APIToken.ID)
	case row.APIToken.ExpiresAt != nil && !row.APIToken.ExpiresAt.After(s.now()):
		return Principal{}, s.fail(ctx, ip, "expired", row.APIToken.ID)
	}
	t := row.APIToken
	n, err := s.q.TakeAPITokenRequest(ctx, db.TakeAPITokenRequestParams{ID: t.ID, IP: ip, EverySeconds: tl.every(), WindowSeconds: tl.window()})
	if err != nil {
		return Principal{}, err
	}
	if n == 0 {
		wait, err := s.q.GetAPITokenWait(ctx, db.GetAPITokenWaitParams{ID: t.ID, EverySeconds: tl.every(), WindowSeconds: tl.window()})
		if err != nil {
			return Principal{}, err
		}
		return Principal{}, refused("token_limited", t.ID, &apperr.Error{Kind: apperr.KindRateLimited, Code: apperr.CodeRateLimited, RetryAfter: waitOf(wait),
			Message: fmt.Sprintf("This API token made more than %d requests in %s. Try again in %s.", tl.N, humanWindow(tl.Window), secondsText(waitOf(wait)))})
	}
	return Principal{Founder: founderOf(row.User), TokenID: t.ID, TokenName: t.Name}, nil
}

// fail counts a failed attempt of the address, and refuses it as ErrInvalidToken, or as over
// the address's limit when it is.
func (s *Service) fail(ctx context.Context, ip, reason string, id uuid.UUID) error {
	fl := s.bearerFailureLimit
	_, err := s.q.TakeBearerFailure(ctx, db.TakeBearerFailureParams{IP: ip, EverySeconds: fl.every(), WindowSeconds: fl.window()})
	if db.IsNotFound(err) {
		wait, err := s.q.GetBearerFailuresWait(ctx, db.GetBearerFailuresWaitParams{IP: ip, EverySeconds: fl.every(), WindowSeconds: fl.window()})
		if err != nil {
			return err
		}
		return refused("address_limited", uuid.Nil, tooManyFailures(wait))
	}
	if err != nil {
		return err
	}
	return refused(reason, id, ErrInvalidToken)
}

func tooManyFailures(wait float64) error {
	return &apperr.Error{Kind: apperr.KindRateLimited, Code: apperr.CodeRateLimited, RetryAfter: waitOf(wait),
		Message: fmt.Sprintf("Too many requests with API tokens that are not valid came from your network. Try again in %s.", secondsText(waitOf(wait)))}
}

// waitOf is a wait the database computed, in whole seconds, at least one.
func waitOf(seconds float64) time.Duration {
	return time.Duration(max(math.Ceil(seconds), 1)) * time.Second
}

// secondsText says a wait in whole seconds, or minutes past two.
func secondsText(d time.Duration) string {
	switch n := int(d / time.Second); {
	case n == 1:
		return "a second"
	case n < 120:
		return fmt.Sprintf("%d seconds", n)
	}
	return humanWait(d)
}

func humanWindow(d time.Duration) string {
	if d == time.Minute {
		return "a minute"
	}
	return humanWait(d)
}
