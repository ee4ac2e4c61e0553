// Package accounts owns founders: sign-up, password checks, the login rate limit, and their API
// tokens (tokens.go).
package accounts

import (
	"context"
	"errors"
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

// Sign-ups per client address: at most Options.SignUpsPerHour in any SignUpWindow.
const (
	SignUpWindow          = time.Hour
	DefaultSignUpsPerHour = 10
)

// Service signs founders up and in.
type Service struct {
	pool           *pgxpool.Pool
	q              *db.Queries
	startCredits   int32
	bcryptCost     int
	signUpsPerHour int
	// The limits of API tokens' requests and of failed bearer attempts per address.
	tokenLimit, bearerFailureLimit Limit
	now                            func() time.Time

	foundersMu sync.Mutex
	founders   map[uuid.UUID]cachedFounder // read in the last SessionTTL (Founder)
}

// Options tune a Service.
type Options struct {
	StartCredits int32
	// BcryptCost defaults to bcrypt.DefaultCost; tests lower it.
	BcryptCost int
	// SignUpsPerHour is how many founders may sign up from one client address in an hour; 0
	// turns the limit off.
	SignUpsPerHour int
	// TokenLimit is the requests one API token may make; zero: DefaultTokenLimit.
	TokenLimit Limit
	// BearerFailureLimit is the failed bearer attempts one client address may make; zero:
	// DefaultBearerFailureLimit.
	BearerFailureLimit Limit
}

// New returns a Service.
func New(pool *pgxpool.Pool, opts Options) *Service {
	cost := opts.BcryptCost
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	s := &Service{pool: pool, q: db.New(pool), startCredits: opts.StartCredits, bcryptCost: cost,
		signUpsPerHour: opts.SignUpsPerHour, tokenLimit: opts.TokenLimit, bearerFailureLimit: opts.BearerFailureLimit, now: time.Now,
		founders: map[uuid.UUID]cachedFounder{}}
	if s.tokenLimit.N == 0 {
		s.tokenLimit = DefaultTokenLimit
	}
	if s.bearerFailureLimit.N == 0 {
		s.bearerFailureLimit = DefaultBearerFailureLimit
	}
	return s
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

// SignUp creates a founder with the starting credits. from is the client's address, which
// may sign up SignUpsPerHour founders an hour; the admin commands, which have none, pass "".
func (s *Service) SignUp(ctx context.Context, c Credentials, from string) (db.User, error) {
	if errs := c.Validate(); len(errs) > 0 {
		return db.User{}, apperr.Invalid(errs)
	}
	if from != "" && s.signUpsPerHour > 0 {
		slot, err := s.takeSignUpSlot(ctx, from)
		if err != nil {
			return db.User{}, err
		}
		u, err := s.signUp(ctx, c)
		if err != nil {
			// Refused (the address is taken, say): it created no account, so it does not count.
			if derr := s.q.DeleteSignup(context.WithoutCancel(ctx), slot); derr != nil {
				return db.User{}, errors.Join(err, derr)
			}
		}
		return u, err
	}
	return s.signUp(ctx, c)
}

// takeSignUpSlot records a sign-up from the address if it is within the limit. The check and
// the record hold the address's lock (on every instance), so of any number of sign-ups at once
// exactly the limit pass.
func (s *Service) takeSignUpSlot(ctx context.Context, from string) (int64, error) {
	var slot int64
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		if err := tx.LockRateLimit(ctx, "signup ip "+from); err != nil {
			return err
		}
		now := s.now()
		n, err := tx.CountSignups(ctx, db.CountSignupsParams{IP: from, Since: now.Add(-SignUpWindow)})
		if err != nil {
			return err
		}
		if n.N >= int64(s.signUpsPerHour) {
			wait := max(n.Oldest.Add(SignUpWindow).Sub(now), time.Second)
			return &apperr.Error{Kind: apperr.KindRateLimited, Code: apperr.CodeRateLimited, RetryAfter: wait,
				Message: fmt.Sprintf("Too many accounts were created from your network in the last hour. Try again in %s, or log in to the account you already have.",
					humanWait(wait))}
		}
		slot, err = tx.InsertSignup(ctx, from)
		return err
	})
	return slot, err
}

func (s *Service) signUp(ctx context.Context, c Credentials) (db.User, error) {
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

// humanWait says a wait in whole minutes, as a person reads it.
func humanWait(d time.Duration) string {
	m := int((d + time.Minute - 1) / time.Minute)
	if m == 1 {
		return "a minute"
	}
	return fmt.Sprintf("%d minutes", m)
}

// ErrBadCredentials is the one answer for an unknown email or a wrong password, so the form
// does not reveal which emails have accounts.
var ErrBadCredentials = &apperr.Error{Kind: apperr.KindUnauthorized, Code: codeBadCredentials, Message: "Email or password is incorrect."}

// LogIn checks a founder's password, counting attempts per email and per address. An attempt
// is recorded before its password is checked, under the email's and the address's locks (on
// every instance), so of any number of attempts at once exactly the limit get their password
// checked. A refused attempt is not counted; a success forgives the email's failures.
func (s *Service) LogIn(ctx context.Context, c Credentials, ip string) (db.User, error) {
	email := NormalizeEmail(c.Email)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error {
		// Always the email's lock first: two attempts never wait on each other crosswise.
		if err := tx.LockRateLimit(ctx, "login email "+email); err != nil {
			return err
		}
		if err := tx.LockRateLimit(ctx, "login ip "+ip); err != nil {
			return err
		}
		counts, err := tx.CountLoginFailures(ctx, db.CountLoginFailuresParams{Email: email, IP: ip, Since: s.now().Add(-Window)})
		if err != nil {
			return err
		}
		if counts.ByEmail >= MaxFailuresEmail || counts.ByIP >= MaxFailuresIP {
			return &apperr.Error{Kind: apperr.KindRateLimited, Code: apperr.CodeRateLimited,
				Message:    "Too many failed logins. Wait 15 minutes and try again.",
				RetryAfter: Window}
		}
		return tx.InsertLoginFailure(ctx, db.InsertLoginFailureParams{Email: email, IP: ip})
	})
	if err != nil {
		return db.User{}, err
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
		return db.User{}, ErrBadCredentials // the attempt stays recorded: a failure
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

// Founder is who a founder is: what never changes of their row. Their credits change with every
// build, so they are not here: whoever shows them reads them (credits.Ledger.Balance).
type Founder struct {
	ID    uuid.UUID
	Email string
}

func founderOf(u db.User) Founder { return Founder{ID: u.ID, Email: u.Email} }

// Founder returns a founder by id: from memory if read in the last SessionTTL, so that a request
// of a logged-in browser costs no round trip for it. Nothing of a Founder ever changes, and an
// account deleted (by hand: Sandman has no such action) stops answering within SessionTTL.
func (s *Service) Founder(ctx context.Context, id uuid.UUID) (Founder, error) {
	now := s.now()
	s.foundersMu.Lock()
	f, ok := s.founders[id]
	s.foundersMu.Unlock()
	if ok && now.Before(f.until) {
		return f.Founder, nil
	}
	u, err := s.q.GetUserByID(ctx, id)
	if err != nil {
		return Founder{}, db.MapError(err)
	}
	s.foundersMu.Lock()
	defer s.foundersMu.Unlock()
	if len(s.founders) >= maxCachedSessions {
		for id, f := range s.founders {
			if !now.Before(f.until) {
				delete(s.founders, id)
			}
		}
	}
	if len(s.founders) < maxCachedSessions {
		s.founders[id] = cachedFounder{Founder: founderOf(u), until: now.Add(SessionTTL)}
	}
	return founderOf(u), nil
}

type cachedFounder struct {
	Founder
	until time.Time
}

// PruneLimits forgets the log-in failures, sign-ups and failed bearer attempts that no longer
// count.
func (s *Service) PruneLimits(ctx context.Context) error {
	now := s.now()
	return errors.Join(s.q.DeleteLoginFailuresBefore(ctx, now.Add(-Window)), s.q.DeleteSignupsBefore(ctx, now.Add(-SignUpWindow)),
		s.q.DeleteBearerFailuresBefore(ctx))
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
	return s.SignUp(ctx, c, "")
}
