package accounts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/prometheus/client_golang/prometheus"

	"sandman/db"
)

// SessionTTL is the longest an instance answers a session from memory before it reads the
// session's row again. It bounds what a missed announcement can cost (docs/architecture.md,
// "Sessions"): a feed that died without a word (the database host gone, no FIN, no RST) is
// noticed by its keepalives within about 25 s, and until then a session ended elsewhere lives on
// here for at most this long.
const SessionTTL = 10 * time.Second

// maxCachedSessions bounds the memory of the cache: past it, a session read is served but not
// kept (an instance with more browsers than this pays a round trip per request, as it did
// before the cache).
const maxCachedSessions = 100_000

// SessionStore is the sessions' store (scs's, in PostgreSQL through pgxstore) with a copy of the
// sessions in use in memory, so that a request reads its session with no round trip.
//
// The copy is safe because every change of a session is announced to every instance: a session
// deleted (a log-out, a log-in's new token) on the feed's SessionEndChannel, a session written
// on SessionChangeChannel. Each instance's feed (feed.Feed.Listen) tells the store, which drops
// the copy (Forget), and answers on SessionForgottenChannel; the change waits for every feed's
// answer before the request that made it is answered (announce). Memory answers only while the
// feed is up: when it drops, the store forgets everything and reads every session from the
// database until the feed is back (Feed), since announcements may have been missed in between.
// A read that overlapped an announcement is not kept (gen). What is left, a feed that looks up
// but hears nothing, is bounded by SessionTTL; a session's own expiry is always honoured.
type SessionStore struct {
	inner scs.Store // pgxstore's, which takes no context
	codec scs.Codec
	q     *db.Queries
	log   *slog.Logger
	ttl   time.Duration
	now   func() time.Time
	// ackWait is the longest a change waits for the feeds' answers (announce).
	ackWait time.Duration

	mu      sync.Mutex
	up      bool   // the feed is up: announcements arrive, so memory may answer
	gen     uint64 // moved by every forgetting: a database read that started before it is not kept
	entries map[string]cachedSession
	byKey   map[string]string          // SessionKey(token) → token, for the announcements
	waiters map[string][]chan struct{} // by key: the changes made here, waiting for the feeds' answers

	fromMemory, fromDatabase prometheus.Counter
}

type cachedSession struct {
	data  []byte
	until time.Time // the earlier of its expiry and its TTL
}

// NewSessionStore caches inner's sessions, whose data codec encodes (for their expiry), and
// announces their changes through conn. reg (if not nil) gets sandman_session_reads_total.
func NewSessionStore(inner scs.Store, codec scs.Codec, conn db.DBTX, logger *slog.Logger, reg prometheus.Registerer) *SessionStore {
	reads := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sandman_session_reads_total",
		Help: "Sessions read by requests, by where from: memory, or the database (none cached, the copy too old, or the live feed down)."},
		[]string{"from"})
	if reg != nil {
		reg.MustRegister(reads)
	}
	return &SessionStore{inner: inner, codec: codec, q: db.New(conn), log: logger, ttl: SessionTTL, now: time.Now, ackWait: ackWait,
		entries: map[string]cachedSession{}, byKey: map[string]string{}, waiters: map[string][]chan struct{}{},
		fromMemory: reads.WithLabelValues("memory"), fromDatabase: reads.WithLabelValues("database")}
}

// SessionKey names a session in announcements and streams without revealing its token: NOTIFY
// payloads can be read by any database user.
func SessionKey(token string) string {
	if token == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:16])
}

// FindCtx returns the session's data from memory when it holds a copy still good, or else from
// the database (keeping a copy while the feed is up).
func (s *SessionStore) FindCtx(ctx context.Context, token string) ([]byte, bool, error) {
	now := s.now()
	s.mu.Lock()
	e, ok := s.entries[token]
	if ok && s.up && now.Before(e.until) {
		s.mu.Unlock()
		s.fromMemory.Inc()
		return e.data, true, nil
	}
	gen, up := s.gen, s.up
	s.mu.Unlock()
	s.fromDatabase.Inc()

	b, found, err := s.inner.Find(token)
	if err != nil || !found || !up {
		return b, found, err
	}
	deadline, _, err := s.codec.Decode(b)
	if err != nil {
		return b, found, nil // scs decodes it again and reports the error
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.entries) >= maxCachedSessions {
		s.sweep(now)
	}
	if s.gen == gen && s.up && len(s.entries) < maxCachedSessions {
		until := now.Add(s.ttl)
		if deadline.Before(until) {
			until = deadline
		}
		s.entries[token] = cachedSession{data: b, until: until}
		s.byKey[SessionKey(token)] = token
	}
	return b, true, nil
}

// CommitCtx writes the session and tells every instance to read it again.
func (s *SessionStore) CommitCtx(ctx context.Context, token string, b []byte, expiry time.Time) error {
	if err := s.inner.Commit(token, b, expiry); err != nil {
		return err
	}
	s.announce(ctx, db.SessionChangeChannel, token)
	return nil
}

// DeleteCtx deletes the session and announces its end: every instance drops its copy and ends
// the session's event streams (feed.Feed.EndSession).
func (s *SessionStore) DeleteCtx(ctx context.Context, token string) error {
	if err := s.inner.Delete(token); err != nil {
		return err
	}
	s.announce(ctx, db.SessionEndChannel, token)
	return nil
}

// ackWait bounds how long a session's end or change waits for every instance's feed to say it
// dropped its copy: one whose feed died unnoticed costs the log-out this much once, and its copy
// lasts SessionTTL at most.
const ackWait = time.Second

// announce forgets the session here, announces it to every instance, and returns once each
// instance's feed has answered that it dropped its copy (or after ackWait): so a log-out's answer
// comes after no instance answers the session from memory any more, and the browser's next
// request, wherever it lands, is refused. A failed announcement is logged, not returned: the
// database holds the change already, and the other instances' copies last SessionTTL at most.
func (s *SessionStore) announce(ctx context.Context, channel, token string) {
	key := SessionKey(token)
	s.Forget(key)
	heard := make(chan struct{}, maxAcks)
	s.mu.Lock()
	s.waiters[key] = append(s.waiters[key], heard)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.waiters[key] = slices.DeleteFunc(s.waiters[key], func(c chan struct{}) bool { return c == heard })
		if len(s.waiters[key]) == 0 {
			delete(s.waiters, key)
		}
	}()
	row, err := s.q.AnnounceSession(context.WithoutCancel(ctx), db.AnnounceSessionParams{Channel: channel, Payload: key})
	if err != nil {
		s.log.Warn("announce a session's change to the other instances", "channel", channel, "err", err)
		return
	}
	timeout := time.NewTimer(s.ackWait)
	defer timeout.Stop()
	for range min(int(row.Feeds), maxAcks) {
		select {
		case <-heard:
		case <-timeout.C:
			s.log.Warn("an instance's feed did not answer a session's change in time; its copy lasts SessionTTL at most",
				"channel", channel, "feeds", row.Feeds, "after", s.ackWait)
			return
		case <-ctx.Done():
			return
		}
	}
}

// maxAcks is the most instances' answers a change waits for: past it, it waits for as many.
const maxAcks = 256

// Heard is an instance's feed's answer to an announcement of the session named key: it dropped
// its copy.
func (s *SessionStore) Heard(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.waiters[key] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Forget drops the copy of the session named key (SessionKey): it changed or ended, here or on
// another instance.
func (s *SessionStore) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	if token, ok := s.byKey[key]; ok {
		delete(s.entries, token)
		delete(s.byKey, key)
	}
}

// Feed is told when the instance's feed of announcements comes up and when it drops: either
// way every copy is dropped, and memory answers only while it is up.
func (s *SessionStore) Feed(up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	s.up = up
	clear(s.entries)
	clear(s.byKey)
}

// Sweep drops the copies past their time, so that sessions no longer used cost no memory.
func (s *SessionStore) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(s.now())
}

func (s *SessionStore) sweep(now time.Time) {
	for token, e := range s.entries {
		if !now.Before(e.until) {
			delete(s.entries, token)
			delete(s.byKey, SessionKey(token))
		}
	}
}

// Find, Commit and Delete are scs.Store's; scs calls the Ctx forms.
func (s *SessionStore) Find(token string) ([]byte, bool, error) {
	return s.FindCtx(context.Background(), token)
}

func (s *SessionStore) Commit(token string, b []byte, expiry time.Time) error {
	return s.CommitCtx(context.Background(), token, b, expiry)
}

func (s *SessionStore) Delete(token string) error { return s.DeleteCtx(context.Background(), token) }

var _ scs.CtxStore = (*SessionStore)(nil)

// maxDecoded bounds SessionCodec's memory: past it, it starts again from nothing.
const maxDecoded = 10_000

// SessionCodec is scs's gob codec with a memory of what it decoded: a request decodes its
// session's data on every load, and gob compiles a decoder each time (a quarter of a status
// read's CPU). The same bytes always decode to the same session, so nothing it keeps can be
// stale: a session that changed has other bytes. Each caller gets its own copy of the values,
// which scs changes in place (a shallow one: Sandman's session values are strings).
type SessionCodec struct {
	scs.GobCodec

	mu      sync.Mutex
	decoded map[string]decodedSession
}

type decodedSession struct {
	deadline time.Time
	values   map[string]any
}

// Decode returns what b decodes to.
func (c *SessionCodec) Decode(b []byte) (time.Time, map[string]any, error) {
	c.mu.Lock()
	d, ok := c.decoded[string(b)]
	c.mu.Unlock()
	if ok {
		return d.deadline, maps.Clone(d.values), nil
	}
	deadline, values, err := c.GobCodec.Decode(b)
	if err != nil {
		return deadline, values, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.decoded == nil || len(c.decoded) >= maxDecoded {
		c.decoded = map[string]decodedSession{}
	}
	c.decoded[string(b)] = decodedSession{deadline: deadline, values: maps.Clone(values)}
	return deadline, values, nil
}
