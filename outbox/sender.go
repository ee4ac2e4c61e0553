package outbox

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"sandman/db"
)

const (
	// maxInFlight is the most deliveries one instance sends at once; perEndpoint the most to one
	// endpoint, so a slow or dead endpoint holds at most that many of them and never the rest.
	maxInFlight = 256
	perEndpoint = 16
	// claimBatch is the most deliveries one claim takes, and perOwner the most of one founder's
	// in it.
	claimBatch = 100
	perOwner   = 25
	// maxSleep is the longest the sender waits without news: it then looks for leases that ran
	// out (an instance that died mid-delivery) and retries that came due.
	maxSleep = time.Second
	// minSleep is the shortest: due deliveries nobody may claim yet are not looked at in a loop.
	minSleep = 20 * time.Millisecond
	// excerpt is how much of an endpoint's answer is kept.
	excerpt = 4096
	// finishBatch is the most outcomes written in one statement.
	finishBatch = 100
)

// sender delivers the pending deliveries: claimed with a lease, each sent in a goroutine of its
// own, its outcome and next attempt written when it ends.
type sender struct {
	s      *Service
	client *http.Client
	wake   chan struct{}
	// outcomes carries the sends' outcomes to the one goroutine that writes them, in batches:
	// one statement for many deliveries, which doubles what an instance sends a second.
	outcomes chan outcome

	mu       sync.Mutex
	inFlight map[uuid.UUID]int
	total    int
}

func newSender(s *Service) *sender {
	d := &net.Dialer{Timeout: s.cfg.Timeout, Control: control(s.cfg.AllowPrivate)}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would dial for us, past the address check
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   perEndpoint,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   s.cfg.Timeout,
		ResponseHeaderTimeout: s.cfg.Timeout,
	}
	return &sender{s: s, wake: make(chan struct{}, 1), inFlight: map[uuid.UUID]int{}, outcomes: make(chan outcome, maxInFlight),
		client: &http.Client{Transport: tr, Timeout: s.cfg.Timeout,
			// A redirect is an answer like another (3xx: not delivered): following it would send
			// the founder's events where no one registered them.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (x *sender) poke() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// Run sends deliveries until ctx ends; every working instance runs it (claims never overlap).
// It is woken at the commit of an event with deliveries (Channel), by the end of one of its own
// sends (the next of that sandbox's may be due), and at the next due time.
func (s *Service) Run(ctx context.Context) {
	x := s.send
	go s.listen(ctx)
	finished := make(chan struct{})
	go func() { defer close(finished); x.finish(context.WithoutCancel(ctx)) }()
	var sends sync.WaitGroup
	defer func() {
		sends.Wait()
		close(x.outcomes)
		<-finished
	}()
	for ctx.Err() == nil {
		n, err := x.claim(ctx, &sends)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("webhooks: claim deliveries", "err", err)
		}
		if n > 0 {
			continue // more may be due: a founder's share of a claim is not all of it
		}
		// Nothing claimable: what is due waits for an earlier delivery of its sandbox, or for an
		// endpoint at its limit, whose sends wake this loop as they end; so a due time already
		// past sleeps minSleep, not a spin.
		sleep := maxSleep
		if next, err := db.New(s.pool).NextOutboxDue(ctx); err == nil {
			sleep = min(max(time.Until(next), minSleep), maxSleep)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
		case <-x.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// listen turns the announcements on Channel into wakes, on a connection of its own.
func (s *Service) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := func() error {
			pc, err := s.pool.Acquire(ctx)
			if err != nil {
				return err
			}
			conn := pc.Hijack()
			defer conn.Close(context.WithoutCancel(ctx))
			if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
				return err
			}
			s.send.poke() // what was announced before we listened
			for {
				if _, err := conn.WaitForNotification(ctx); err != nil {
					return err
				}
				s.send.poke()
			}
		}()
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("webhooks: listen for events; again in a second", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// claim takes what is due, within the instance's limits, and starts sending it.
func (x *sender) claim(ctx context.Context, sends *sync.WaitGroup) (int, error) {
	x.mu.Lock()
	room := min(maxInFlight-x.total, claimBatch)
	busy := []uuid.UUID{}
	for id, n := range x.inFlight {
		if n >= perEndpoint {
			busy = append(busy, id)
		}
	}
	x.mu.Unlock()
	if room <= 0 {
		return 0, nil
	}
	lease := 3 * x.s.cfg.Timeout
	rows, err := db.New(x.s.pool).ClaimOutboxDeliveries(ctx, db.ClaimOutboxDeliveriesParams{
		LeaseSeconds: lease.Seconds(), Busy: busy, Max: int32(room), PerOwner: perOwner})
	if err != nil {
		return 0, err
	}
	x.mu.Lock()
	for _, r := range rows {
		x.inFlight[r.EndpointID]++
		x.total++
	}
	x.mu.Unlock()
	for _, r := range rows {
		sends.Add(1)
		go func() {
			defer sends.Done()
			x.outcomes <- x.deliver(context.WithoutCancel(ctx), r)
		}()
	}
	return len(rows), nil
}

// attempt is one attempt's outcome.
type attempt struct {
	status   int
	duration time.Duration
	err      string
	body     string
}

// outcome is an attempt's record and what follows it, for the finisher to write.
type outcome struct {
	endpoint uuid.UUID
	p        db.FinishOutboxAttemptParams
}

// deliver makes one attempt and says what follows: delivered on any 2xx, else tried again after
// the schedule's next wait, or failed after its last.
func (x *sender) deliver(ctx context.Context, r db.ClaimOutboxDeliveriesRow) outcome {
	a := x.post(ctx, r)
	p := db.FinishOutboxAttemptParams{ID: r.ID, StatusCode: int32(a.status), DurationMs: int32(a.duration.Milliseconds()),
		Error: a.err, Response: a.body, DisableAfterSeconds: x.s.cfg.DisableAfter.Seconds(), State: "delivered", NextAttemptAt: time.Now()}
	p.Ok = a.status >= 200 && a.status < 300
	if !p.Ok {
		if i := int(r.Tries) - 1; i < len(x.s.cfg.Retries) {
			p.State, p.NextAttemptAt = "pending", time.Now().Add(x.s.cfg.Retries[i])
		} else {
			p.State = "failed"
		}
	}
	return outcome{endpoint: r.EndpointID, p: p}
}

// finish writes the outcomes as they come, as many as are waiting in one statement, then frees
// their places and wakes the claims (the next of a sandbox's may be due). It returns when the
// outcomes channel is closed and drained.
func (x *sender) finish(ctx context.Context) {
	batch := make([]outcome, 0, finishBatch)
	for o := range x.outcomes {
		batch = append(batch[:0], o)
	more:
		for len(batch) < finishBatch {
			select {
			case o, ok := <-x.outcomes:
				if !ok {
					break more
				}
				batch = append(batch, o)
			default:
				break more
			}
		}
		x.write(ctx, batch)
		x.mu.Lock()
		for _, o := range batch {
			if x.inFlight[o.endpoint]--; x.inFlight[o.endpoint] == 0 {
				delete(x.inFlight, o.endpoint)
			}
			x.total--
		}
		x.mu.Unlock()
		x.poke()
	}
}

// write records a batch of outcomes; if the batch fails, each alone, so that one bad row costs
// no other its record. One that cannot be written is sent again when its lease runs out: at
// least once.
func (x *sender) write(ctx context.Context, batch []outcome) {
	p := db.FinishOutboxAttemptsParams{DisableAfterSeconds: x.s.cfg.DisableAfter.Seconds()}
	for _, o := range batch {
		p.Ids, p.StatusCodes, p.DurationsMs = append(p.Ids, o.p.ID), append(p.StatusCodes, o.p.StatusCode), append(p.DurationsMs, o.p.DurationMs)
		p.Errors, p.Responses, p.States = append(p.Errors, o.p.Error), append(p.Responses, o.p.Response), append(p.States, o.p.State)
		p.NextAttempts, p.Oks = append(p.NextAttempts, o.p.NextAttemptAt), append(p.Oks, o.p.Ok)
	}
	q := db.New(x.s.pool)
	if err := q.FinishOutboxAttempts(ctx, p); err == nil {
		return
	}
	for _, o := range batch {
		if _, err := q.FinishOutboxAttempt(ctx, o.p); err != nil && !db.IsNotFound(err) {
			x.s.log.Warn("webhooks: record an attempt", "delivery", o.p.ID, "err", err)
		}
	}
}

func (x *sender) post(ctx context.Context, r db.ClaimOutboxDeliveriesRow) attempt {
	secrets, err := x.s.secrets(r)
	if err != nil {
		x.s.log.Error("webhooks: an endpoint's secret does not open", "endpoint", r.EndpointID, "err", err)
		return attempt{err: "Sandman could not open this endpoint's signing secret; rotate it."}
	}
	id := MessageID(r.ID)
	ts := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Payload))
	if err != nil {
		return attempt{err: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Sandman-Webhooks/1")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", Sign(secrets, id, ts, r.Payload))
	start := time.Now()
	resp, err := x.client.Do(req)
	if err != nil {
		return attempt{duration: time.Since(start), err: describe(err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, excerpt))
	return attempt{status: resp.StatusCode, duration: time.Since(start), body: strings.ToValidUTF8(string(body), "�")}
}

// describe is an attempt's error as the deliveries list shows it.
func describe(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, errRefusedAddress):
		return "refused: the URL resolves to an address Sandman does not send to"
	case errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	}
	return err.Error()
}

// MessageID is the webhook-id of every attempt of one delivery (one event to one endpoint).
func MessageID(delivery int64) string { return "msg_" + strconv.FormatInt(delivery, 10) }

// secrets are the endpoint's signing secrets: the current one and, for a day after a rotation,
// the previous one.
func (s *Service) secrets(r db.ClaimOutboxDeliveriesRow) ([]string, error) {
	cur, err := s.keys.Open(r.SecretKeyID, r.SecretSealed, ad(r.EndpointID))
	if err != nil {
		return nil, err
	}
	out := []string{string(cur)}
	if r.PreviousKeyID != nil && r.PreviousUntil != nil && time.Now().Before(*r.PreviousUntil) {
		if prev, err := s.keys.Open(*r.PreviousKeyID, r.PreviousSealed, ad(r.EndpointID)); err == nil {
			out = append(out, string(prev))
		}
	}
	return out, nil
}

// Sign is the webhook-signature header: a "v1,<base64 HMAC-SHA256>" of id.timestamp.body per
// secret, space-separated (the Standard Webhooks specification).
func Sign(secrets []string, id string, ts time.Time, body []byte) string {
	sigs := make([]string, 0, len(secrets))
	for _, secret := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			continue
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + strconv.FormatInt(ts.Unix(), 10) + "."))
		m.Write(body)
		sigs = append(sigs, "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return strings.Join(sigs, " ")
}
