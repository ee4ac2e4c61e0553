// Package accounts owns founders: sign-up, password checks and the login rate limit.
package accounts

import (
	"context"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/bcrypt"

	"sandman/apperr"
	"sandman/db"
)

// Limits on logins; failures older than Window no longer count.
const (
	Window            = 15 * time.Minute
	MaxFailuresEmail  = 5
	MaxFailuresIP     = 20
	MinPasswordLength = 8
	// bcrypt ignores bytes past 72; a longer password would give a false sense of strength.
	MaxPasswordLength = 72
)

// Service signs founders up and in.
type Service struct {
	pool         *pgxpool.Pool
	q            *db.Queries
	startCredits int32
	bcryptCost   int
	now          func() time.Time
}

// Options tune a Service.
type Options struct {
	StartCredits int32
	// BcryptCost defaults to bcrypt.DefaultCost; tests lower it.
	BcryptCost int
}

// New returns a Service.
func New(pool *pgxpool.Pool, opts Options) *Service {
	cost := opts.BcryptCost
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	return &Service{pool: pool, q: db.New(pool), startCredits: opts.StartCredits, bcryptCost: cost, now: time.Now}
}

// Credentials are what a founder types.
type Credentials struct {
	Email    string
	Password string
}

// NormalizeEmail lower-cases and trims an address so lookups match what sign-up stored.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// Validate returns a message per field that breaks a rule.
func (c Credentials) Validate() map[string]string {
	errs := map[string]string{}
	email := NormalizeEmail(c.Email)
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email || len(email) > 254 {
		errs["email"] = "Enter an email address like name@example.com."
	}
	switch {
	case len(c.Password) < MinPasswordLength:
		errs["password"] = fmt.Sprintf("Use at least %d characters.", MinPasswordLength)
	case len(c.Password) > MaxPasswordLength:
		errs["password"] = fmt.Sprintf("Use at most %d characters.", MaxPasswordLength)
	}
	return errs
}

// SignUp creates a founder with the starting credits.
func (s *Service) SignUp(ctx context.Context, c Credentials) (db.User, error) {
	if errs := c.Validate(); len(errs) > 0 {
		return db.User{}, apperr.Invalid(errs)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(c.Password), s.bcryptCost)
	if err != nil {
		return db.User{}, err
	}
	u, err := s.q.InsertUser(ctx, db.InsertUserParams{
		Email: NormalizeEmail(c.Email), PasswordHash: string(hash), Credits: s.startCredits,
	})
	if err != nil {
		if db.IsConstraint(err, "users_email_key") {
			return db.User{}, apperr.Invalid(map[string]string{"email": "An account with this email already exists. Log in instead."})
		}
		return db.User{}, err
	}
	return u, nil
}

// ErrBadCredentials is the one answer for an unknown email or a wrong password, so the form
// does not reveal which emails have accounts.
var ErrBadCredentials = &apperr.Error{Kind: apperr.KindUnauthorized, Code: "bad_credentials", Message: "Email or password is incorrect."}

// LogIn checks a founder's password, counting failures per email and per address.
func (s *Service) LogIn(ctx context.Context, c Credentials, ip string) (db.User, error) {
	email := NormalizeEmail(c.Email)
	counts, err := s.q.CountLoginFailures(ctx, db.CountLoginFailuresParams{Email: email, IP: ip, Since: s.now().Add(-Window)})
	if err != nil {
		return db.User{}, err
	}
	if counts.ByEmail >= MaxFailuresEmail || counts.ByIP >= MaxFailuresIP {
		return db.User{}, &apperr.Error{Kind: apperr.KindRateLimited, Code: "rate_limited",
			Message:    "Too many failed logins. Wait 15 minutes and try again.",
			RetryAfter: Window}
	}
	u, err := s.q.GetUserByEmail(ctx, email)
	if err != nil && !db.IsNotFound(err) {
		return db.User{}, err
	}
	hash := u.PasswordHash
	if hash == "" {
		// Compare against a fixed hash anyway so an unknown email takes as long as a known one.
		hash = dummyHash()
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(c.Password)) != nil || u.ID == uuid.Nil {
		if err := s.q.InsertLoginFailure(ctx, db.InsertLoginFailureParams{Email: email, IP: ip}); err != nil {
			return db.User{}, err
		}
		return db.User{}, ErrBadCredentials
	}
	if err := s.q.DeleteLoginFailuresByEmail(ctx, email); err != nil {
		return db.User{}, err
	}
	return u, nil
}

// dummyHash is a bcrypt hash of a random string at the default cost, made on first use.
var dummyHash = sync.OnceValue(func() string {
	h, err := bcrypt.GenerateFromPassword([]byte(uuid.NewString()), bcrypt.DefaultCost)
	if err != nil {
		panic(err)
	}
	return string(h)
})

// Get returns a founder by id.
func (s *Service) Get(ctx context.Context, id uuid.UUID) (db.User, error) {
	u, err := s.q.GetUserByID(ctx, id)
	return u, db.MapError(err)
}

// PruneLoginFailures forgets failures that no longer count.
func (s *Service) PruneLoginFailures(ctx context.Context) error {
	return s.q.DeleteLoginFailuresBefore(ctx, s.now().Add(-Window))
}

// EnsureUser creates the founder if the email is new and returns it either way; `make run` uses it
// for the demo founder.
func (s *Service) EnsureUser(ctx context.Context, c Credentials) (db.User, error) {
	u, err := s.q.GetUserByEmail(ctx, NormalizeEmail(c.Email))
	if err == nil {
		return u, nil
	}
	if !db.IsNotFound(err) {
		return db.User{}, err
	}
	return s.SignUp(ctx, c)
}
