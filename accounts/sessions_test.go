package accounts

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/alexedwards/scs/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The unit tests of SessionStore's edge cases run on a map for the database's sessions table
// (rows) and a recorder for its announcements (notes); app's tests run it on PostgreSQL with
// two instances (handlers' TestLogOutOnOneInstanceRefusesTheSessionOnAnotherAtOnce).

type rows struct {
	mu     sync.Mutex
	data   map[string][]byte
	reads  int
	during func() // runs inside the next Find, as if an announcement arrived meanwhile
}

func (r *rows) Find(token string) ([]byte, bool, error) {
	r.mu.Lock()
	r.reads++
	b, ok := r.data[token]
	during := r.during
	r.during = nil
	r.mu.Unlock()
	if during != nil {
		during()
	}
	return b, ok, nil
}

func (r *rows) Commit(token string, b []byte, _ time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.data[token] = b
	return nil
}

func (r *rows) Delete(token string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.data, token)
	return nil
}

// notes records the announcements (pg_notify's channel and payload).
type notes struct {
	mu    sync.Mutex
	sent  [][2]string
	feeds int32 // the instances' feeds that listen
}

func (n *notes) QueryRow(_ context.Context, _ string, args ...any) pgx.Row {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, [2]string{args[0].(string), args[1].(string)})
	return feedsRow(n.feeds)
}

func (n *notes) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, nil
}
func (n *notes) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, nil }
func (n *notes) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	return 0, nil
}

// feedsRow is AnnounceSession's answer: how many instances' feeds listen.
type feedsRow int32

func (f feedsRow) Scan(dest ...any) error {
	*dest[0].(*string), *dest[1].(*int32) = "", int32(f)
	return nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestStore(t *testing.T) (*SessionStore, *rows, *notes, *clock) {
	t.Helper()
	r, n, c := &rows{data: map[string][]byte{}}, &notes{}, &clock{t: time.Now()}
	s := NewSessionStore(r, scs.GobCodec{}, n, slog.New(slog.DiscardHandler), nil)
	s.now = c.now
	return s, r, n, c
}

// session stores a session whose deadline is in, with value v, behind the store's back.
func session(t *testing.T, r *rows, token string, deadline time.Time, v string) {
	t.Helper()
	b, err := scs.GobCodec{}.Encode(deadline, map[string]any{"v": v})
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Commit(token, b, deadline)
}

// value reads the session as scs does, and says whether the database was read for it.
func value(t *testing.T, s *SessionStore, r *rows, token string) (v string, fromDatabase bool) {
	t.Helper()
	before := r.reads
	b, found, err := s.FindCtx(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		return "", r.reads > before
	}
	_, vals, err := scs.GobCodec{}.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return vals["v"].(string), r.reads > before
}

// Memory answers only while the feed of announcements is up: before it first comes up, and
// after it drops, every read goes to the database (announcements may be missed meanwhile), and
// a feed that comes back starts from nothing.
func TestSessionStoreAnswersFromMemoryOnlyWhileTheFeedIsUp(t *testing.T) {
	t.Parallel()
	s, r, _, c := newTestStore(t)
	session(t, r, "tok", c.t.Add(time.Hour), "a")
	for range 2 {
		if _, db := value(t, s, r, "tok"); !db {
			t.Fatal("a session was answered from memory before the feed was up")
		}
	}
	s.Feed(true)
	value(t, s, r, "tok")
	if v, db := value(t, s, r, "tok"); db || v != "a" {
		t.Fatalf("with the feed up, a second read: %q from the database %v; want a from memory", v, db)
	}
	s.Feed(false)
	session(t, r, "tok", c.t.Add(time.Hour), "b") // changed while the feed was down: unannounced
	if v, db := value(t, s, r, "tok"); !db || v != "b" {
		t.Fatalf("with the feed down: %q (from the database %v), want b from the database", v, db)
	}
	s.Feed(true)
	session(t, r, "tok", c.t.Add(time.Hour), "c")
	if v, _ := value(t, s, r, "tok"); v != "c" {
		t.Fatalf("after the feed came back: %q, want c: a copy from before the drop was kept", v)
	}
}

// An announced end or change drops the copy (and only that session's); the store's own deletes
// and writes are announced on their channels, by the session's key and never its token.
func TestSessionStoreForgetsWhatIsAnnounced(t *testing.T) {
	t.Parallel()
	s, r, n, c := newTestStore(t)
	s.Feed(true)
	session(t, r, "mine", c.t.Add(time.Hour), "a")
	session(t, r, "other", c.t.Add(time.Hour), "x")
	value(t, s, r, "mine")
	value(t, s, r, "other")
	_ = r.Delete("mine") // another instance's log-out
	s.Forget(SessionKey("mine"))
	if v, db := value(t, s, r, "mine"); !db || v != "" {
		t.Fatalf("a session announced ended: %q (from the database %v), want none, read from the database", v, db)
	}
	if _, db := value(t, s, r, "other"); db {
		t.Fatal("another session's copy was dropped by an announcement that was not its")
	}

	if err := s.CommitCtx(context.Background(), "other", mustEncode(t, c.t.Add(time.Hour), "y"), c.t.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if v, db := value(t, s, r, "other"); !db || v != "y" {
		t.Fatalf("after this instance wrote the session: %q (from the database %v), want y", v, db)
	}
	if err := s.DeleteCtx(context.Background(), "other"); err != nil {
		t.Fatal(err)
	}
	if v, _ := value(t, s, r, "other"); v != "" {
		t.Fatalf("after this instance deleted the session: %q, want none", v)
	}
	want := [][2]string{{"sandman_session_change", SessionKey("other")}, {"sandman_session_end", SessionKey("other")}}
	if len(n.sent) != 2 || n.sent[0] != want[0] || n.sent[1] != want[1] {
		t.Fatalf("announced %q, want %q", n.sent, want)
	}
}

func mustEncode(t *testing.T, deadline time.Time, v string) []byte {
	t.Helper()
	b, err := scs.GobCodec{}.Encode(deadline, map[string]any{"v": v})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A database read that overlapped an announcement is not kept: it may carry the session as it
// was before the change announced.
func TestSessionStoreKeepsNoReadThatOverlappedAnAnnouncement(t *testing.T) {
	t.Parallel()
	s, r, _, c := newTestStore(t)
	s.Feed(true)
	session(t, r, "tok", c.t.Add(time.Hour), "a")
	r.during = func() {
		_ = r.Delete("tok")
		s.Forget(SessionKey("tok"))
	}
	if v, _ := value(t, s, r, "tok"); v != "a" {
		t.Fatalf("the overlapping read: %q, want a (it read before the delete)", v)
	}
	if v, db := value(t, s, r, "tok"); v != "" || !db {
		t.Fatalf("the next read: %q (from the database %v), want none: the overlapping read was kept", v, db)
	}
}

// A copy lasts until the session's expiry or SessionTTL, whichever comes first.
func TestSessionStoreHonoursExpiryAndTTL(t *testing.T) {
	t.Parallel()
	s, r, _, c := newTestStore(t)
	s.Feed(true)
	start := c.t
	session(t, r, "short", start.Add(3*time.Second), "a")
	session(t, r, "long", start.Add(time.Hour), "b")
	value(t, s, r, "short")
	value(t, s, r, "long")
	c.t = start.Add(3 * time.Second)
	delete(r.data, "short") // the database no longer answers an expired session
	if v, db := value(t, s, r, "short"); v != "" || !db {
		t.Fatalf("at its expiry: %q (from the database %v), want none", v, db)
	}
	if _, db := value(t, s, r, "long"); db {
		t.Fatal("a session within its TTL was read from the database")
	}
	c.t = start.Add(SessionTTL)
	if _, db := value(t, s, r, "long"); !db {
		t.Fatalf("a copy older than SessionTTL (%v) answered", SessionTTL)
	}
}

// A change returns only once every instance's feed has answered that it dropped its copy (so a
// log-out is answered after no instance serves the session any more), or after ackWait when one
// does not answer.
func TestSessionStoreChangeWaitsForEveryFeedsAnswer(t *testing.T) {
	t.Parallel()
	s, r, n, c := newTestStore(t)
	n.feeds = 2
	s.ackWait = time.Minute
	session(t, r, "tok", c.t.Add(time.Hour), "a")
	var answered sync.WaitGroup
	answered.Add(1)
	go func() {
		defer answered.Done()
		time.Sleep(50 * time.Millisecond)
		s.Heard(SessionKey("tok"))
		s.Heard(SessionKey("other")) // another session's answer does not count
		time.Sleep(50 * time.Millisecond)
		s.Heard(SessionKey("tok"))
	}()
	start := time.Now()
	if err := s.DeleteCtx(context.Background(), "tok"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 100*time.Millisecond {
		t.Fatalf("the log-out returned after %v, before the second feed answered (100 ms)", took)
	}
	answered.Wait()

	s.ackWait = 100 * time.Millisecond
	start = time.Now()
	if err := s.DeleteCtx(context.Background(), "tok"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < s.ackWait || took > 5*time.Second {
		t.Fatalf("with no feed answering, the log-out returned after %v, want ackWait (%v)", took, s.ackWait)
	}
}

// SessionCodec decodes the same bytes to the same session every time, though a caller changed
// the values it was given (scs's Put and Remove change them in place), and tells other bytes
// apart.
func TestSessionCodecRemembersNothingACallerChanged(t *testing.T) {
	t.Parallel()
	var c SessionCodec
	deadline := time.Now().Add(time.Hour).Round(0)
	a, b := mustEncode(t, deadline, "a"), mustEncode(t, deadline, "b")
	for range 3 {
		d, vals, err := c.Decode(a)
		if err != nil || !d.Equal(deadline) || vals["v"] != "a" || len(vals) != 1 {
			t.Fatalf("Decode: %v %v %v, want %v map[v:a]", d, vals, err, deadline)
		}
		vals["v"] = "changed"
		vals["csrf"] = "added"
	}
	if _, vals, _ := c.Decode(b); vals["v"] != "b" {
		t.Fatalf("other bytes decoded to %v, want map[v:b]", vals)
	}
	if _, _, err := c.Decode([]byte("not gob")); err == nil {
		t.Fatal("bytes that are no session decoded")
	}
}
