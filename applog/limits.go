package applog

import (
	"math"
	"sync"
	"time"

	"github.com/google/uuid"

	"sandman/apperr"
)

// ReportLimits bound the browsers' reports: per preview, whoever views it, and per viewer (a
// founder, or a share link visitor's address), whatever they view. A page that throws in a loop
// costs one preview's allowance, not the database. They are counted per instance: a report is
// cheap to refuse, and a flood spread over instances is still bounded by their number.
type ReportLimits struct {
	PreviewPerMinute, PreviewBurst float64
	ViewerPerMinute, ViewerBurst   float64
}

// DefaultReportLimits is production's: a page's errors come in bursts (one per render, say) and
// deduplicate into a few problems.
func DefaultReportLimits() ReportLimits {
	return ReportLimits{PreviewPerMinute: 60, PreviewBurst: 30, ViewerPerMinute: 30, ViewerBurst: 20}
}

// maxLimitKeys bounds the limiter's memory: past it, the keys whose allowance is whole again
// are forgotten (they lose nothing).
const maxLimitKeys = 100_000

type bucket struct {
	tokens float64
	last   time.Time
}

type limiter struct {
	cfg ReportLimits
	now func() time.Time
	mu  sync.Mutex
	b   map[string]*bucket
}

func newLimiter(cfg ReportLimits) *limiter {
	return &limiter{cfg: cfg, now: time.Now, b: map[string]*bucket{}}
}

// take spends one token of key's bucket, refilled at perMinute up to burst; ok false means none
// is left, and wait how long until one is.
func (l *limiter) take(key string, perMinute, burst float64, now time.Time, spend bool) (ok bool, wait time.Duration) {
	b := l.b[key]
	if b == nil {
		b = &bucket{tokens: burst, last: now}
		l.b[key] = b
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.last).Minutes()*perMinute)
	b.last = now
	if b.tokens < 1 {
		return false, time.Duration(math.Ceil((1-b.tokens)/perMinute*60)) * time.Second
	}
	if spend {
		b.tokens--
	}
	return true, 0
}

// allow counts one report of viewer about preview, or refuses it (429) when either is over its
// allowance; a refused report spends neither.
func (l *limiter) allow(preview uuid.UUID, viewer string) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.b) > maxLimitKeys {
		l.prune(now)
	}
	pk, vk := "p:"+preview.String(), "v:"+viewer
	okP, waitP := l.take(pk, l.cfg.PreviewPerMinute, l.cfg.PreviewBurst, now, false)
	okV, waitV := l.take(vk, l.cfg.ViewerPerMinute, l.cfg.ViewerBurst, now, false)
	if !okP || !okV {
		return &apperr.Error{Kind: apperr.KindRateLimited, Code: apperr.CodeRateLimited, RetryAfter: max(waitP, waitV, time.Second),
			Message: "Too many error reports from this preview: the ones already sent are kept, and counted again when they repeat."}
	}
	l.take(pk, l.cfg.PreviewPerMinute, l.cfg.PreviewBurst, now, true)
	l.take(vk, l.cfg.ViewerPerMinute, l.cfg.ViewerBurst, now, true)
	return nil
}

func (l *limiter) prune(now time.Time) {
	for k, b := range l.b {
		if now.Sub(b.last).Minutes()*min(l.cfg.PreviewPerMinute, l.cfg.ViewerPerMinute)+b.tokens >= max(l.cfg.PreviewBurst, l.cfg.ViewerBurst) {
			delete(l.b, k)
		}
	}
}
