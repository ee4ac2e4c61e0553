package shares

import (
	"context"
	"fmt"
	"time"

	"sandman/apperr"
	"sandman/db"
)

// Kind is what a visitor asks of a link, each with its own limits: the database's enum of share
// hits, so no other value can be stored.
type Kind = db.ShareHitKind

// The kinds of visitors' requests that are counted.
const (
	Wake     = db.ShareHitKindWake     // wake the preview (a resume, when it sleeps)
	Activity = db.ShareHitKindActivity // someone is looking: the preview's idle deadline moves
)

// LimitWindow is the window every visitors' limit counts in.
const LimitWindow = time.Minute

// Limit is how many requests of a kind one link, and one client address, may make in a
// LimitWindow.
type Limit struct {
	PerLink, PerAddress int
}

// Limits are the visitors' rate limits (docs/api.md, "Share links"). A wake does work only
// when the preview sleeps (one resume for any number of visitors); a page reports activity at
// most once a minute while it is visible. The limits leave room for a crowd behind one address
// (an office) and stop a script from turning a link into a stream of resumes or database
// writes.
var Limits = map[Kind]Limit{
	Wake:     {PerLink: 60, PerAddress: 20},
	Activity: {PerLink: 300, PerAddress: 30},
}

// Allow records a visitor's request of the link from the client address ip, or refuses it
// (429 with Retry-After) when the link or the address is over its limit for that kind. The check
// and the record hold the link's and the address's locks (on every instance), so of any number
// of requests at once exactly the limit pass.
func (s *Service) Allow(ctx context.Context, v Visit, ip string, kind Kind) error {
	lim, ok := Limits[kind]
	if !ok {
		return fmt.Errorf("shares: no limit for %q", kind)
	}
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		// Always the link's lock first: two requests never wait on each other crosswise.
		if err := tx.LockRateLimit(ctx, "share "+string(kind)+" link "+v.LinkID.String()); err != nil {
			return err
		}
		if err := tx.LockRateLimit(ctx, "share "+string(kind)+" ip "+ip); err != nil {
			return err
		}
		now := s.now()
		n, err := tx.CountShareHits(ctx, db.CountShareHitsParams{LinkID: v.LinkID, IP: ip, Kind: kind, Since: now.Add(-LimitWindow)})
		if err != nil {
			return err
		}
		switch {
		case n.ByIP >= int64(lim.PerAddress):
			return limited(kind, max(n.OldestByIP.Add(LimitWindow).Sub(now), time.Second), "from your network")
		case n.ByLink >= int64(lim.PerLink):
			return limited(kind, max(n.OldestByLink.Add(LimitWindow).Sub(now), time.Second), "by its visitors")
		}
		return tx.InsertShareHit(ctx, db.InsertShareHitParams{LinkID: v.LinkID, IP: ip, Kind: kind})
	})
}

// limited is the refusal of a request over a limit: who made too many, and when to try again.
func limited(kind Kind, wait time.Duration, who string) error {
	what := "This preview was woken too many times " + who + " in the last minute."
	if kind == Activity {
		what = "This preview received too many activity reports " + who + " in the last minute."
	}
	return &apperr.Error{Kind: apperr.KindRateLimited, Code: apperr.CodeRateLimited, RetryAfter: wait,
		Message: fmt.Sprintf("%s Try again in %s.", what, secondsText(wait))}
}

// secondsText says a wait of under a few minutes in whole seconds, rounded up.
func secondsText(d time.Duration) string {
	n := int((d + time.Second - 1) / time.Second)
	if n == 1 {
		return "a second"
	}
	return fmt.Sprintf("%d seconds", n)
}

// PruneLimits forgets the visitors' requests that no longer count.
func (s *Service) PruneLimits(ctx context.Context) error {
	return s.q.DeleteShareHitsBefore(ctx, s.now().Add(-LimitWindow))
}
