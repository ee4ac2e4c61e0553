package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"sandman/apperr"
	"sandman/db"
	"sandman/db/dbtest"
	"sandman/internal/testkit"
	"sandman/keyring"
	"sandman/outbox"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

const testKey = "6f0f4e2a1c3b5d7e9f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f708192a3b4"

// within bounds every wait on a delivery: generous, as the machine may be loaded.
const within = 30 * time.Second

func keys(t testing.TB) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(testKey, "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testConfig is production's with test-sized retries, on loopback.
func testConfig() outbox.Config {
	c := outbox.DefaultConfig()
	c.AllowPrivate = true
	c.Retries = []time.Duration{300 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond}
	c.Timeout = 2 * time.Second
	return c
}

type harness struct {
	pool  *pgxpool.Pool
	owner uuid.UUID
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	pool := dbtest.NewPool(t)
	u, err := db.New(pool).InsertUser(context.Background(), db.InsertUserParams{Email: uuid.NewString()[:8] + "@example.com", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{pool: pool, owner: u.ID}
}

// service makes an outbox over the harness's database; run starts its sender until the test
// ends (or stop is called).
func (h *harness) service(t testing.TB, cfg outbox.Config, run bool) (s *outbox.Service, stop func()) {
	t.Helper()
	s = outbox.New(h.pool, keys(t), cfg, testkit.Logger())
	if !run {
		return s, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return s, stop
}

// emit records events as a change's transaction does, one transaction each.
func (h *harness) emit(t testing.TB, events ...outbox.Event) {
	t.Helper()
	for _, e := range events {
		if e.Owner == uuid.Nil {
			e.Owner = h.owner
		}
		if err := db.InTx(context.Background(), h.pool, func(tx db.Tx) error { return outbox.Record(context.Background(), tx, e) }); err != nil {
			t.Fatal(err)
		}
	}
}

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
	status int
}

// receiver is a real HTTP server that records what it is sent and answers as answer says.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int, r *http.Request, body []byte) int
}

func newReceiver(t testing.TB, answer func(n int, r *http.Request, body []byte) int) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.got)
		rc.got = append(rc.got, received{header: r.Header.Clone(), body: body})
		rc.mu.Unlock()
		status := http.StatusNoContent
		if rc.answer != nil {
			status = rc.answer(n, r, body)
		}
		rc.mu.Lock()
		rc.got[n].status = status
		rc.mu.Unlock()
		w.WriteHeader(status)
		fmt.Fprint(w, "thanks")
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.got)
}

// delivered is what the receiver took (answered 2xx), in the order it took it.
func (rc *receiver) delivered() []received {
	var out []received
	for _, r := range rc.requests() {
		if r.status >= 200 && r.status < 300 {
			out = append(out, r)
		}
	}
	return out
}

func (rc *receiver) waitDelivered(t testing.TB, n int) []received {
	t.Helper()
	testkit.Until(t, within, fmt.Sprintf("%d deliveries", n), func() bool { return len(rc.delivered()) >= n })
	return rc.delivered()
}

func payloadOf(t testing.TB, r received) outbox.Payload {
	t.Helper()
	var p outbox.Payload
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("body %s: %v", r.body, err)
	}
	return p
}

func create(t testing.TB, s *outbox.Service, owner uuid.UUID, url string, events ...string) outbox.Endpoint {
	t.Helper()
	e, err := s.Create(context.Background(), owner, outbox.EndpointInput{URL: url, Events: events, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A delivery is signed as the Standard Webhooks specification says: its library, knowing the
// endpoint's secret, accepts it, and refuses it with another secret or a stale timestamp. The
// payload is {"type","timestamp","data"} with codes in data.
func TestADeliveryIsSignedSoAStandardWebhooksVerifierAcceptsIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, _ := h.service(t, testConfig(), true)
	rc := newReceiver(t, nil)
	ep := create(t, s, h.owner, rc.URL)
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		t.Fatalf("secret %q: want whsec_…", ep.Secret)
	}
	project, sb := uuid.New(), uuid.New()
	h.emit(t, outbox.Event{Type: outbox.PreviewPaused, ProjectID: project, SandboxID: &sb, State: "paused", Reason: "idle", Version: 3})
	r := rc.waitDelivered(t, 1)[0]

	wh, err := standardwebhooks.NewWebhook(ep.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(r.body, r.header); err != nil {
		t.Fatalf("the verifier refuses a delivery signed with the endpoint's secret: %v (headers %v)", err, r.header)
	}
	other, _ := standardwebhooks.NewWebhook("whsec_" + strings.Repeat("A", 32))
	if err := other.Verify(r.body, r.header); err == nil {
		t.Fatal("the verifier accepts the delivery with another secret")
	}
	stale := r.header.Clone()
	stale.Set("webhook-timestamp", strconv.FormatInt(time.Now().Add(-10*time.Minute).Unix(), 10))
	if err := wh.Verify(r.body, stale); err == nil {
		t.Fatal("the verifier accepts a stale timestamp")
	}
	p := payloadOf(t, r)
	want := map[string]any{"projectId": project.String(), "sandboxId": sb.String(), "state": "paused", "reason": "idle", "version": float64(3)}
	if p.Type != outbox.PreviewPaused || p.Timestamp.IsZero() || fmt.Sprint(p.Data) != fmt.Sprint(want) {
		t.Fatalf("payload %s: want type preview.paused, a timestamp and data %v", r.body, want)
	}
}

// An answer other than 2xx is tried again after the schedule's wait, with the same webhook-id:
// the receiver can tell a retry from a new event.
func TestAFailedAttemptIsRetriedWithTheSameWebhookID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, _ := h.service(t, testConfig(), true)
	rc := newReceiver(t, func(n int, _ *http.Request, _ []byte) int {
		if n == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	ep := create(t, s, h.owner, rc.URL)
	h.emit(t, outbox.Event{Type: outbox.CreditsChanged, Reason: "debit"})
	rc.waitDelivered(t, 1)
	reqs := rc.requests()
	if len(reqs) != 2 || reqs[0].header.Get("webhook-id") == "" || reqs[0].header.Get("webhook-id") != reqs[1].header.Get("webhook-id") {
		t.Fatalf("attempts' webhook-ids %q: want two attempts with one id", []string{reqs[0].header.Get("webhook-id"), reqs[len(reqs)-1].header.Get("webhook-id")})
	}
	ds, err := s.Deliveries(context.Background(), h.owner, ep.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].State != "delivered" || ds[0].Attempts != 2 || ds[0].StatusCode != 200 || ds[0].Response != "thanks" {
		t.Fatalf("deliveries %+v: want one delivered after 2 attempts, its answer kept", ds)
	}
}

// An endpoint that never answers holds none of another endpoint's deliveries: the live one gets
// every event while the dead one's first attempts still hang.
func TestADeadEndpointDoesNotDelayALiveOne(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := testConfig()
	cfg.Timeout = time.Minute // the dead endpoint's attempts hang until the test lets them go
	s, _ := h.service(t, cfg, true)
	release := make(chan struct{})
	dead := newReceiver(t, func(int, *http.Request, []byte) int { <-release; return http.StatusOK })
	defer close(release) // before the servers close (deferred after their Cleanup runs)
	live := newReceiver(t, nil)
	create(t, s, h.owner, dead.URL)
	create(t, s, h.owner, live.URL)
	const n = 40
	for range n {
		sb := uuid.New() // one sandbox each: no order holds one behind another
		h.emit(t, outbox.Event{Type: outbox.PreviewRunning, SandboxID: &sb})
	}
	live.waitDelivered(t, n)
	if got := len(dead.delivered()); got != 0 {
		t.Fatalf("the dead endpoint answered %d: the test did not hold it", got)
	}
}

// Within one endpoint, one sandbox's events are delivered in the order they happened, even when
// one of them needs a retry; another sandbox's are not held behind them.
func TestOneSandboxsDeliveriesArriveInOrder(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, _ := h.service(t, testConfig(), false)
	var failedOnce sync.Once
	rc := newReceiver(t, func(_ int, _ *http.Request, body []byte) int {
		code := http.StatusOK
		var p outbox.Payload
		if json.Unmarshal(body, &p) == nil && p.Data["version"] == float64(1) {
			failedOnce.Do(func() { code = http.StatusInternalServerError })
		}
		return code
	})
	create(t, s, h.owner, rc.URL)
	sb := uuid.New()
	const n = 5
	// All pending before the sender starts: each could be claimed at once but for the order.
	for i := range n {
		h.emit(t, outbox.Event{Type: outbox.VersionLive, SandboxID: &sb, Version: int32(i + 1)})
	}
	h.service(t, testConfig(), true)
	got := rc.waitDelivered(t, n)
	if len(rc.requests()) != n+1 {
		t.Fatalf("%d requests: want %d, the first attempt of version 1 refused", len(rc.requests()), n+1)
	}
	for i, r := range got {
		if v := payloadOf(t, r).Data["version"]; v != float64(i+1) {
			var order []any
			for _, r := range got {
				order = append(order, payloadOf(t, r).Data["version"])
			}
			t.Fatalf("versions delivered in the order %v: want 1…%d", order, n)
		}
	}
}

// Deliveries pending when no sender runs, and one claimed by a sender that died mid-delivery
// (its lease held, never finished), are all delivered by the next sender, once each.
func TestPendingDeliveriesSurviveASenderThatDied(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := testConfig()
	cfg.Timeout = 500 * time.Millisecond // the dead claim's lease: 3 timeouts
	s, _ := h.service(t, cfg, false)
	rc := newReceiver(t, nil)
	create(t, s, h.owner, rc.URL)
	const n = 10
	for range n {
		h.emit(t, outbox.Event{Type: outbox.BuildReady})
	}
	// An instance claims three and dies before sending them.
	claimed, err := db.New(h.pool).ClaimOutboxDeliveries(context.Background(), db.ClaimOutboxDeliveriesParams{LeaseSeconds: 1.5, Busy: []uuid.UUID{}, Max: 3, PerOwner: 3})
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	h.service(t, cfg, true) // the instance after a restart
	got := rc.waitDelivered(t, n)
	ids := map[string]bool{}
	for _, r := range got {
		ids[r.header.Get("webhook-id")] = true
	}
	if len(ids) != n {
		t.Fatalf("%d distinct webhook-ids among %d deliveries: want %d", len(ids), len(got), n)
	}
	for _, c := range claimed {
		if !ids[outbox.MessageID(c.ID)] {
			t.Fatalf("the delivery the dead instance claimed (%s) never arrived", outbox.MessageID(c.ID))
		}
	}
}

// After a rotation, a delivery carries two signatures: the new secret's and, for a day, the old
// one's, so a backend that still has the old secret keeps verifying.
func TestARotatedSecretSignsBesideTheNewOneForADay(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, _ := h.service(t, testConfig(), true)
	rc := newReceiver(t, nil)
	old := create(t, s, h.owner, rc.URL)
	rotated, err := s.Rotate(context.Background(), h.owner, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secret == old.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") {
		t.Fatalf("rotated secret %q: want a new whsec_ secret", rotated.Secret)
	}
	h.emit(t, outbox.Event{Type: outbox.BuildStarted})
	r := rc.waitDelivered(t, 1)[0]
	for _, secret := range []string{old.Secret, rotated.Secret} {
		wh, _ := standardwebhooks.NewWebhook(secret)
		if err := wh.Verify(r.body, r.header); err != nil {
			t.Fatalf("signatures %q do not verify with %s secret: %v", r.header.Get("webhook-signature"),
				map[bool]string{true: "the old", false: "the new"}[secret == old.Secret], err)
		}
	}
}

// An endpoint's URL is refused, with a 422 and a sentence naming why, when it breaks a rule or
// points at an address Sandman does not reach: loopback and private ones unless allowed,
// link-local and metadata ones always. The dialer refuses them too, at every connection.
func TestEndpointURLsAreRefusedByRule(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	strict := testConfig()
	strict.AllowPrivate = false
	refusing, _ := h.service(t, strict, false)
	allowing, _ := h.service(t, testConfig(), false)
	for _, c := range []struct {
		url          string
		allowPrivate bool // refused also with private addresses allowed
		why          string
	}{
		{"http://127.0.0.1:8080/hook", false, "loopback"},
		{"http://10.1.2.3/hook", false, "private"},
		{"https://[::1]/hook", false, "loopback"},
		{"http://169.254.169.254/latest/meta-data", true, "link-local"},
		{"http://[fd00:ec2::254]/", true, "metadata"},
		{"http://100.100.100.200/", true, "metadata"},
		{"http://[fe80::1]/", true, "link-local"},
		{"http://239.1.2.3/", true, "multicast"},
		{"http://0.0.0.0/", true, "unspecified"},
		{"ftp://example.com/hook", true, "https://"},
		{"https://user:pw@example.com/hook", true, "user name"},
		{"https://example.com/" + strings.Repeat("a", 2048), true, "longer than 2048"},
		{"example.com/hook", true, "whole"},
	} {
		for _, s := range []*outbox.Service{refusing, allowing} {
			_, err := s.Create(context.Background(), h.owner, outbox.EndpointInput{URL: c.url, Enabled: true})
			wantRefused := s == refusing || c.allowPrivate
			ae, ok := apperr.As(err)
			switch {
			case wantRefused && (!ok || ae.Kind != apperr.KindInvalid || ae.Code != outbox.CodeURLRefused || !strings.Contains(ae.Message, c.why)):
				t.Errorf("%.60s (private allowed: %v): %v; want a 422 url_refused naming %q", c.url, s == allowing, err, c.why)
			case !wantRefused && err != nil:
				t.Errorf("%.60s with private addresses allowed: %v; want it taken", c.url, err)
			}
		}
	}
	// Registered where loopback is allowed, sent by an instance where it is not: the dialer
	// refuses the connection itself.
	rc := newReceiver(t, nil)
	ep := create(t, allowing, h.owner, rc.URL)
	// Its URL, refused where it is looked at now, is not looked at again to turn it off or on:
	// only a new URL is.
	off, on := false, true
	for _, enabled := range []*bool{&off, &on} {
		if _, err := refusing.Update(context.Background(), h.owner, ep.ID, outbox.Patch{Enabled: enabled}); err != nil {
			t.Fatalf("turning an endpoint with an unchanged URL %v: %v", map[bool]string{false: "off", true: "on"}[*enabled], err)
		}
	}
	h.service(t, strict, true)
	h.emit(t, outbox.Event{Type: outbox.BuildFailed})
	testkit.Eventually(t, within, "a refused attempt", func() error {
		ds, err := refusing.Deliveries(context.Background(), h.owner, ep.ID, 0, 10)
		if err != nil {
			return err
		}
		if len(ds) == 0 || ds[0].Attempts == 0 {
			return errors.New("not attempted yet")
		}
		if !strings.Contains(ds[0].Error, "refused") || len(rc.requests()) != 0 {
			return fmt.Errorf("attempt %+v, %d requests received: want refused by the dialer", ds[0], len(rc.requests()))
		}
		return nil
	})
}

// The feed hands out every event after a cursor, oldest first, page by page, with the cursor to
// go on from; a test sent to one endpoint is no part of it.
func TestTheFeedReplaysEveryEventAfterACursor(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, _ := h.service(t, testConfig(), false)
	rc := newReceiver(t, nil)
	ep := create(t, s, h.owner, rc.URL)
	const n = 7
	for i := range n {
		h.emit(t, outbox.Event{Type: outbox.VersionCreated, Version: int32(i + 1)})
	}
	if err := s.Test(context.Background(), h.owner, ep.ID); err != nil {
		t.Fatal(err)
	}
	other := newHarness(t) // another founder's events are not in this one's feed
	other.pool = h.pool
	u, _ := db.New(h.pool).InsertUser(context.Background(), db.InsertUserParams{Email: uuid.NewString()[:8] + "@example.com", PasswordHash: "x"})
	other.owner = u.ID
	other.emit(t, outbox.Event{Type: outbox.VersionCreated, Version: 99})

	var versions []float64
	var after outbox.FeedCursor
	for range n {
		items, next, err := s.Events(context.Background(), h.owner, after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) == 0 {
			break
		}
		for _, it := range items {
			var p outbox.Payload
			if err := json.Unmarshal(it.Payload, &p); err != nil {
				t.Fatal(err)
			}
			versions = append(versions, p.Data["version"].(float64))
		}
		after = next
	}
	if fmt.Sprint(versions) != "[1 2 3 4 5 6 7]" {
		t.Fatalf("the feed replayed versions %v: want 1…7, once each, in order", versions)
	}
}

// An event whose transaction began after another's, but took a smaller id and commits after
// the other's event was read, is still in the feed after that read's cursor: a backend that
// catches up from its cursor misses nothing.
func TestTheFeedNeverPassesAnEventThatCommitsLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, _ := h.service(t, testConfig(), false)
	ctx := context.Background()
	other, err := db.New(h.pool).InsertUser(ctx, db.InsertUserParams{Email: uuid.NewString()[:8] + "@example.com", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	read := func(after outbox.FeedCursor) ([]float64, outbox.FeedCursor) {
		items, next, err := s.Events(ctx, h.owner, after, 10)
		if err != nil {
			t.Fatal(err)
		}
		var versions []float64
		for _, it := range items {
			var p outbox.Payload
			if err := json.Unmarshal(it.Payload, &p); err != nil {
				t.Fatal(err)
			}
			versions = append(versions, p.Data["version"].(float64))
		}
		return versions, next
	}
	// The older transaction (its id taken by a write of another founder's event) records
	// version 2 after the younger one recorded version 1, and commits first.
	olderWrote, youngerWrote := make(chan struct{}), make(chan struct{})
	olderDone := make(chan error, 1)
	go func() {
		olderDone <- db.InTx(ctx, h.pool, func(tx db.Tx) error {
			if err := outbox.Record(ctx, tx, outbox.Event{Owner: other.ID, Type: outbox.VersionCreated, Version: 99}); err != nil {
				return err
			}
			close(olderWrote)
			select {
			case <-youngerWrote:
			case <-time.After(30 * time.Second):
				return errors.New("the younger transaction never wrote")
			}
			return outbox.Record(ctx, tx, outbox.Event{Owner: h.owner, Type: outbox.VersionCreated, Version: 2})
		})
	}()
	select {
	case <-olderWrote:
	case err := <-olderDone:
		t.Fatalf("the older transaction: %v", err)
	}
	var first []float64
	var cursor outbox.FeedCursor
	if err := db.InTx(ctx, h.pool, func(tx db.Tx) error {
		if err := outbox.Record(ctx, tx, outbox.Event{Owner: h.owner, Type: outbox.VersionCreated, Version: 1}); err != nil {
			return err
		}
		close(youngerWrote)
		if err := <-olderDone; err != nil {
			return err
		}
		first, cursor = read(outbox.FeedCursor{}) // version 2 committed, version 1 not yet
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// The feed waits for every transaction older than the oldest running one in the whole
	// cluster, other tests' included: read on until both are in, or the wait is over.
	got := first
	testkit.Eventually(t, 10*time.Second, "both versions in the feed", func() error {
		more, next := read(cursor)
		got, cursor = append(got, more...), next
		if len(got) < 2 {
			return fmt.Errorf("the feed gave versions %v (the first read %v): want 2, then 1, committed after the first read", got, first)
		}
		return nil
	})
	if fmt.Sprint(got) != "[2 1]" {
		t.Fatalf("the feed gave versions %v (the first read %v): want 2, then 1", got, first)
	}
}

// A key rotation's Reseal seals every endpoint's secret again under the new key: with the old
// key gone, deliveries are still signed with the same secret.
func TestResealKeepsSecretsThroughAKeyRotation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, _ := h.service(t, testConfig(), false)
	rc := newReceiver(t, nil)
	ep := create(t, s, h.owner, rc.URL)
	const newKey = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90"
	during, err := keyring.Parse(newKey, testKey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := outbox.New(h.pool, during, testConfig(), testkit.Logger()).Reseal(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("reseal: %d, %v; want 1 endpoint", n, err)
	}
	after, _ := keyring.Parse(newKey, "")
	sender := outbox.New(h.pool, after, testConfig(), testkit.Logger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sender.Run(ctx) }()
	defer func() { cancel(); <-done }()
	h.emit(t, outbox.Event{Type: outbox.ProblemOpened})
	r := rc.waitDelivered(t, 1)[0]
	wh, _ := standardwebhooks.NewWebhook(ep.Secret)
	if err := wh.Verify(r.body, r.header); err != nil {
		t.Fatalf("after the key rotation, the delivery does not verify with the endpoint's secret: %v", err)
	}
}

// One founder's flood does not hold another founder's event behind it: every claim takes a
// share of each founder's due deliveries, so the other's arrives while most of the flood waits.
func TestOneFoundersFloodDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s, _ := h.service(t, testConfig(), false)
	var calm *harness
	{
		u, err := db.New(h.pool).InsertUser(context.Background(), db.InsertUserParams{Email: uuid.NewString()[:8] + "@example.com", PasswordHash: "x"})
		if err != nil {
			t.Fatal(err)
		}
		calm = &harness{pool: h.pool, owner: u.ID}
	}
	rc := newReceiver(t, nil)
	create(t, s, h.owner, rc.URL+"/flood")
	create(t, s, calm.owner, rc.URL+"/calm")
	const flood = 1000
	ctx := context.Background()
	if err := db.InTx(ctx, h.pool, func(tx db.Tx) error {
		for range flood {
			sb := uuid.New()
			if err := outbox.Record(ctx, tx, outbox.Event{Owner: h.owner, Type: outbox.PreviewRunning, SandboxID: &sb}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	calm.emit(t, outbox.Event{Type: outbox.PreviewPaused}) // after the whole flood
	h.service(t, testConfig(), true)
	rc.waitDelivered(t, flood+1)
	for i, r := range rc.requests() {
		if payloadOf(t, r).Type == outbox.PreviewPaused {
			if i > flood/2 {
				t.Fatalf("the calm founder's event arrived after %d of the flood's %d", i, flood)
			}
			return
		}
	}
	t.Fatal("the calm founder's event never arrived")
}
