package sandboxd

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"sandman/sandboxd/store"
)

// delivery is one event owed to one webhook.
type delivery struct {
	Hook    string    `json:"webhookID"`
	Seq     int64     `json:"eventSeq"`
	Attempt int       `json:"attempt"`
	Due     time.Time `json:"due"`
}

// deliverer sends events to webhooks: in event order per webhook (one
// attempt in flight per webhook), concurrently across webhooks, retrying
// failures with exponential backoff. What is still owed at shutdown is saved
// to pending-deliveries.json and sent after the next start.
type deliverer struct {
	s      *Server
	log    *slog.Logger
	path   string
	client *http.Client

	mu     sync.Mutex
	queues map[string][]*delivery
	busy   map[string]bool
	wake   chan struct{}

	ctx      context.Context
	cancel   context.CancelFunc
	inflight sync.WaitGroup
	loopDone chan struct{}
}

func newDeliverer(s *Server) (*deliverer, error) {
	ctx, cancel := context.WithCancel(context.Background())
	d := &deliverer{
		s:        s,
		log:      s.log.With("component", "webhooks"),
		path:     filepath.Join(s.cfg.StateDir, "pending-deliveries.json"),
		client:   &http.Client{Timeout: s.cfg.WebhookTimeout},
		queues:   map[string][]*delivery{},
		busy:     map[string]bool{},
		wake:     make(chan struct{}, 1),
		ctx:      ctx,
		cancel:   cancel,
		loopDone: make(chan struct{}),
	}
	var saved []*delivery
	if err := store.ReadJSON(d.path, &saved); err != nil {
		cancel()
		return nil, err
	}
	for _, dl := range saved {
		dl.Due = time.Now()
		d.enqueueLocked(dl)
	}
	return d, nil
}

func (d *deliverer) start() { go d.loop() }

// enqueue owes ev to every webhook subscribed to its type.
func (d *deliverer) enqueue(ev *event, hooks []string) {
	if len(hooks) == 0 {
		return
	}
	d.mu.Lock()
	for _, h := range hooks {
		d.enqueueLocked(&delivery{Hook: h, Seq: ev.Seq, Due: time.Now()})
	}
	d.mu.Unlock()
	d.poke()
}

func (d *deliverer) enqueueLocked(dl *delivery) {
	q := d.queues[dl.Hook]
	i, _ := slices.BinarySearchFunc(q, dl, func(a, b *delivery) int {
		if c := a.Due.Compare(b.Due); c != 0 {
			return c
		}
		return int(a.Seq - b.Seq)
	})
	d.queues[dl.Hook] = slices.Insert(q, i, dl)
}

func (d *deliverer) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *deliverer) loop() {
	defer close(d.loopDone)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var next time.Time
		d.mu.Lock()
		t := time.Now()
		for hook, q := range d.queues {
			if d.busy[hook] || len(q) == 0 {
				continue
			}
			if dl := q[0]; !dl.Due.After(t) {
				d.queues[hook] = q[1:]
				d.busy[hook] = true
				d.inflight.Add(1)
				go d.attempt(dl)
			} else if next.IsZero() || dl.Due.Before(next) {
				next = dl.Due
			}
		}
		d.mu.Unlock()
		wait := time.Hour
		if !next.IsZero() {
			wait = time.Until(next)
		}
		timer.Reset(wait)
		select {
		case <-d.ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

func (d *deliverer) attempt(dl *delivery) {
	defer d.inflight.Done()
	requeue := d.send(dl)
	d.mu.Lock()
	d.busy[dl.Hook] = false
	if requeue {
		d.enqueueLocked(dl)
	}
	d.mu.Unlock()
	d.poke()
}

// send makes one attempt and reports whether dl must be tried again.
func (d *deliverer) send(dl *delivery) bool {
	hook, ok := d.s.hooks.get(dl.Hook)
	if !ok {
		return false
	}
	ev := d.s.events.bySeq(dl.Seq)
	if ev == nil {
		return false
	}
	log := d.log.With("webhook_id", dl.Hook, "event_id", ev.ID, "event_type", ev.Type, "sandbox_id", ev.SandboxID, "attempt", dl.Attempt+1)
	if f := d.s.faults.Webhook(); f != nil {
		if f.Webhook == WebhookDrop {
			log.Info("webhook delivery dropped by fault injection")
			return false
		}
		select {
		case <-time.After(time.Duration(f.LatencyMs) * time.Millisecond):
		case <-d.ctx.Done():
			return true
		}
	}
	body := ev.webhookBody()
	deliveryID := newUUID()
	ctx, cancel := context.WithTimeout(d.ctx, d.s.cfg.WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		log.Error("webhook request", "err", err)
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "sandboxd")
	req.Header.Set("e2b-webhook-id", hook.ID)
	req.Header.Set("e2b-delivery-id", deliveryID)
	req.Header.Set("e2b-signature-version", "v1")
	req.Header.Set("e2b-signature", Sign(hook.Secret, body, d.s.cfg.WebhookURLSafeSignature))
	start := time.Now()
	resp, err := d.client.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode >= 200 && resp.StatusCode < 300 {
			log.Debug("webhook delivered", "delivery_id", deliveryID, "status", resp.StatusCode, "duration_ms", time.Since(start).Milliseconds())
			return false
		}
		err = fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	if d.ctx.Err() != nil {
		// Shutting down: the attempt does not count, the delivery is saved.
		return true
	}
	if dl.Attempt >= d.s.cfg.WebhookRetries {
		log.Warn("webhook delivery failed, giving up", "delivery_id", deliveryID, "err", err)
		return false
	}
	delay := d.s.cfg.WebhookRetryDelay << dl.Attempt
	dl.Attempt++
	dl.Due = time.Now().Add(delay)
	log.Warn("webhook delivery failed, will retry", "delivery_id", deliveryID, "err", err, "retry_in", delay.String())
	return true
}

// shutdown delivers what is due now until ctx ends, then stops and saves
// everything still owed (retries in backoff included).
func (d *deliverer) shutdown(ctx context.Context) error {
	for !d.idle() && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	d.cancel()
	<-d.loopDone
	d.inflight.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	var owed []*delivery
	for _, q := range d.queues {
		owed = append(owed, q...)
	}
	slices.SortFunc(owed, func(a, b *delivery) int { return int(a.Seq - b.Seq) })
	return store.WriteJSONAtomic(d.path, owed)
}

// idle reports that nothing is in flight and nothing is due now.
func (d *deliverer) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := time.Now()
	for hook, q := range d.queues {
		if d.busy[hook] || (len(q) > 0 && !q[0].Due.After(t)) {
			return false
		}
	}
	return true
}
