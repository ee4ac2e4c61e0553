package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"sandman/apperr"
	"sandman/db"
	"sandman/e2b"
	"sandman/sandbox"
)

// MaxWebhookBody caps a webhook delivery; the provider's events are a few KiB.
const MaxWebhookBody = 1 << 20

// WebhookArgs applies one stored webhook delivery.
type WebhookArgs struct {
	DeliveryID int64 `json:"delivery_id"`
}

// Kind implements river.JobArgs.
func (WebhookArgs) Kind() string { return "webhook" }

// InsertOpts: applying is idempotent, so retries are safe.
func (WebhookArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 10} }

// WebhookResult says what became of a delivery.
type WebhookResult struct {
	EventID   string
	Duplicate bool
}

// ReceiveWebhook checks a delivery's signature, stores it once per event id and applies it; the
// handler answers as soon as this returns, so a delivery answered 200 is stored. A missing or
// wrong signature has no effect at all.
//
// An instance that runs workers applies the delivery in the transaction that stores it, and
// stores the deliveries that arrive together in one transaction (groupCommit): one commit for
// them, their changes, event rows and NOTIFYs, and no job to fetch, which is what webhook →
// screen and webhooks applied per second are made of (BENCHMARKS.md). Order needs no queue: an
// event applies only when its provider timestamp is newer than the row's (applyEvent),
// so whichever of two deliveries commits first, the row ends at the newer. A delivery whose
// group fails is stored and applied alone, and if that fails too, stored with a job, which a
// worker applies as it does a web-only instance's deliveries (RoleWeb changes nothing itself).
func (s *Service) ReceiveWebhook(ctx context.Context, header http.Header, body []byte) (WebhookResult, error) {
	if s.cfg.WebhookSecret == "" || !e2b.VerifyWebhookSignature(s.cfg.WebhookSecret, body, header.Get("e2b-signature")) {
		// Counted per minute for the console (one row a minute however many are forged).
		if err := s.q.CountWebhookRejection(ctx); err != nil {
			s.log.Warn("count a refused webhook", "err", err)
		}
		return WebhookResult{}, &apperr.Error{Kind: apperr.KindUnauthorized, Code: codeBadSignature,
			Message: "The webhook signature is missing or does not match."}
	}
	ev, err := e2b.ParseWebhook(body)
	if err != nil {
		return WebhookResult{}, apperr.New(apperr.KindInvalid, codeBadPayload, "The webhook body is not a lifecycle event: "+err.Error())
	}
	// PostgreSQL text cannot hold NUL, which JSON can escape: such ids could never be stored
	// or looked up, so the event is refused rather than failing in the database.
	if strings.ContainsRune(ev.ID+ev.Type+ev.SandboxID, 0) {
		return WebhookResult{}, apperr.New(apperr.KindInvalid, codeBadPayload, "The webhook event has a NUL character in its id, type or sandbox id.")
	}
	headers, _ := json.Marshal(map[string]string{
		"e2b-webhook-id":        storableHeader(header.Get("e2b-webhook-id")),
		"e2b-delivery-id":       storableHeader(header.Get("e2b-delivery-id")),
		"e2b-signature-version": storableHeader(header.Get("e2b-signature-version")),
		"content-type":          storableHeader(header.Get("Content-Type")),
	})
	d := &delivery{ev: ev, row: db.InsertWebhookDeliveryParams{
		EventID: ev.ID, DeliveryID: storableHeader(header.Get("e2b-delivery-id")), EventType: ev.Type, Headers: headers, Body: body,
		EventAt: eventTime(ev.Timestamp),
	}}
	if s.work {
		err := s.hooks.commit(ctx, s, d)
		if err != nil && ctx.Err() == nil {
			d.duplicate = false // its group failed: alone, it may not
			err = db.InTx(ctx, s.pool, func(tx db.Tx) error { return s.storeGroup(ctx, tx, []*delivery{d}) })
		}
		if err == nil || ctx.Err() != nil {
			return WebhookResult{EventID: ev.ID, Duplicate: d.duplicate}, err
		}
		s.log.Warn("apply a webhook as it arrives; queueing it", "event", ev.ID, "err", err)
	}
	d.duplicate = false
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error { return s.queueDelivery(ctx, tx, d) })
	return WebhookResult{EventID: ev.ID, Duplicate: d.duplicate}, err
}

// delivery is one webhook delivery on its way into the database.
type delivery struct {
	ev        e2b.Event
	row       db.InsertWebhookDeliveryParams
	id        int64             // its row, once stored
	duplicate bool              // its event was stored before
	expected  db.WebhookOutcome // the outcome it was stored with (storeGroup)
	done      chan struct{}     // closed once its group has committed or failed
	err       error
}

// queueDelivery stores d once per event id with the job that applies it.
func (s *Service) queueDelivery(ctx context.Context, tx db.Tx, d *delivery) error {
	id, err := tx.InsertWebhookDelivery(ctx, d.row)
	if db.IsNotFound(err) {
		d.duplicate = true
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.river.InsertTx(ctx, tx.Pgx(), WebhookArgs{DeliveryID: id}, nil)
	return err
}

// maxGroup bounds the deliveries of one group commit (its transaction's length, and so how
// long a sandbox's row stays locked by it).
const maxGroup = 128

// groupCommit stores and applies webhook deliveries in groups: while one group's transaction
// runs, the deliveries that arrive wait, and the next transaction takes them all. A lone
// delivery commits at once, as before; under load each commit (its round trips, its WAL
// flush, the sandbox row's lock) is shared by every delivery that arrived meanwhile. Each
// request is answered after its own group commits. No goroutine waits while nothing arrives:
// the first delivery to find no group running runs its own, and hands the queue to a goroutine
// that lasts until the queue is empty.
type groupCommit struct {
	mu       sync.Mutex
	queue    []*delivery
	flushing bool
}

// commit stores and applies d in a group and returns once that group committed or failed (d's
// error then: the caller stores it alone).
func (g *groupCommit) commit(ctx context.Context, s *Service, d *delivery) error {
	d.done = make(chan struct{})
	g.mu.Lock()
	g.queue = append(g.queue, d)
	lead := !g.flushing
	g.flushing = true
	g.mu.Unlock()
	if lead {
		if g.flushOnce(s) {
			go func() {
				for g.flushOnce(s) {
				}
			}()
		}
	}
	select {
	case <-d.done:
		return d.err
	case <-ctx.Done():
		// The group goes on (and may store it): the provider's retry is then a duplicate.
		return ctx.Err()
	}
}

// flushOnce commits the deliveries queued now and reports whether more have arrived since (the
// caller flushes again); otherwise the next delivery leads.
func (g *groupCommit) flushOnce(s *Service) bool {
	g.mu.Lock()
	n := min(len(g.queue), maxGroup)
	group := g.queue[:n:n]
	g.queue = g.queue[n:]
	g.mu.Unlock()

	// The group's context is its own: one sender giving up does not fail the others.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error { return s.storeGroup(ctx, tx, group) })
	cancel()
	for _, d := range group {
		if err != nil {
			// Rolled back: nothing of the group was stored. Each is stored alone instead.
			d.duplicate, d.err = false, fmt.Errorf("group commit of %d deliveries: %w", len(group), err)
		}
		close(d.done)
	}
	if err != nil {
		s.log.Warn("a group of webhook deliveries failed; storing each alone", "deliveries", len(group), "err", err)
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) == 0 {
		g.flushing = false
		return false
	}
	return true
}

// storeGroup stores a group's deliveries in one statement, each event once, and applies for
// each sandbox the newest of their events, in tx. The older events of a sandbox in the same
// group are ignored, as they would be had the newest arrived first: an event applies only when
// it is newer than the newest seen (applyEvent). Each delivery is stored with the
// outcome expected of it (the newest of its sandbox applied, an older one ignored, an unknown
// type so), and only the ones that had another are corrected, so a group costs one statement
// for its deliveries and a change per sandbox, however many arrived together, and one more
// statement when any outcome was not the expected one (an event that changed nothing).
func (s *Service) storeGroup(ctx context.Context, tx db.Tx, group []*delivery) error {
	var p db.InsertWebhookDeliveriesParams
	first := make(map[string]bool, len(group))
	newestHere := newestOfEachSandbox(group)
	for _, d := range group {
		if first[d.ev.ID] {
			d.duplicate = true // twice in this group
			continue
		}
		first[d.ev.ID] = true
		p.EventIds, p.DeliveryIds = append(p.EventIds, d.row.EventID), append(p.DeliveryIds, d.row.DeliveryID)
		p.EventTypes, p.Headers, p.Bodies = append(p.EventTypes, d.row.EventType), append(p.Headers, d.row.Headers), append(p.Bodies, d.row.Body)
		p.EventAts = append(p.EventAts, d.ev.Timestamp) // the zero time stores NULL (eventTime)
		d.expected = db.WebhookOutcomeIgnored
		switch {
		case !isLifecycleEvent(d.ev.Type):
			d.expected = db.WebhookOutcomeUnknownType
		case newestHere[d.ev.SandboxID] == d:
			d.expected = db.WebhookOutcomeApplied
		}
		p.Outcomes = append(p.Outcomes, string(d.expected))
	}
	rows, err := tx.InsertWebhookDeliveries(ctx, p)
	if err != nil {
		return err
	}
	stored := make(map[string]int64, len(rows))
	for _, r := range rows {
		stored[r.EventID] = r.ID
	}
	var fresh []*delivery
	for _, d := range group {
		id, ok := stored[d.ev.ID]
		if d.duplicate || !ok {
			d.duplicate = true // or stored before
			continue
		}
		d.id = id
		fresh = append(fresh, d)
	}
	newest := newestOfEachSandbox(fresh)
	var out db.SetWebhookDeliveryOutcomesParams
	for _, d := range fresh {
		outcome := db.WebhookOutcomeIgnored // a newer event of its sandbox came in the same group
		if newest[d.ev.SandboxID] == d || !isLifecycleEvent(d.ev.Type) {
			if outcome, err = s.applyWebhookEvent(ctx, tx, d.ev); err != nil {
				return err
			}
		}
		if outcome != d.expected {
			out.Ids, out.Outcomes = append(out.Ids, d.id), append(out.Outcomes, string(outcome))
		}
	}
	if len(out.Ids) == 0 {
		return nil
	}
	return tx.SetWebhookDeliveryOutcomes(ctx, out)
}

// newestOfEachSandbox is, by sandbox, the delivery of the newest lifecycle event among ds.
func newestOfEachSandbox(ds []*delivery) map[string]*delivery {
	newest := map[string]*delivery{}
	for _, d := range ds {
		if n := newest[d.ev.SandboxID]; isLifecycleEvent(d.ev.Type) && (n == nil || d.ev.Timestamp.After(n.ev.Timestamp)) {
			newest[d.ev.SandboxID] = d
		}
	}
	return newest
}

// isLifecycleEvent reports whether a webhook of type t can change a sandbox.
func isLifecycleEvent(t string) bool {
	switch t {
	case EventCreated, EventPaused, EventResumed, EventUpdated, EventKilled:
		return true
	}
	return false
}

// applyWebhookEvent applies a webhook's event in tx and says what became of it (its delivery's
// outcome).
func (s *Service) applyWebhookEvent(ctx context.Context, tx db.Tx, ev e2b.Event) (db.WebhookOutcome, error) {
	if !isLifecycleEvent(ev.Type) {
		return db.WebhookOutcomeUnknownType, nil
	}
	changed, err := s.applyProviderEvent(ctx, tx, toProviderEvent(ev), sandbox.SourceWebhook)
	if err != nil || !changed {
		return db.WebhookOutcomeIgnored, err
	}
	return db.WebhookOutcomeApplied, nil
}

// storableHeader makes a header value fit a text column: HTTP lets values carry bytes that are
// not UTF-8, which PostgreSQL would refuse (failing a delivery the signature already vouched
// for, since headers are not signed).
func storableHeader(v string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(v, "\uFFFD"), "\x00", "")
}

type webhookWorker struct {
	river.WorkerDefaults[WebhookArgs]
	s *Service
}

func (w *webhookWorker) Timeout(*river.Job[WebhookArgs]) time.Duration { return 30 * time.Second }

func (w *webhookWorker) Work(ctx context.Context, job *river.Job[WebhookArgs]) error {
	s := w.s
	return db.InTx(ctx, s.pool, func(tx db.Tx) error {
		d, err := tx.GetWebhookDelivery(ctx, job.Args.DeliveryID)
		if err != nil {
			return db.MapError(err)
		}
		outcome := db.WebhookOutcomeUnparseable
		if ev, err := e2b.ParseWebhook(d.Body); err == nil {
			if outcome, err = s.applyWebhookEvent(ctx, tx, ev); err != nil {
				return err
			}
		}
		return tx.SetWebhookDeliveryOutcome(ctx, db.SetWebhookDeliveryOutcomeParams{ID: d.ID, Outcome: outcome})
	})
}

// eventTime is a delivery's provider time, when it has one.
func eventTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
