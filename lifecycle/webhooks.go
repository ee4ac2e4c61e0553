package lifecycle

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"sandman/apperr"
	"sandman/db"
	"sandman/e2b"
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

// ReceiveWebhook checks a delivery's signature, stores it once per event id and queues its
// application; the handler answers as soon as this returns. A missing or wrong signature has
// no effect at all.
func (s *Service) ReceiveWebhook(ctx context.Context, header http.Header, body []byte) (WebhookResult, error) {
	if s.cfg.WebhookSecret == "" || !e2b.VerifyWebhookSignature(s.cfg.WebhookSecret, body, header.Get("e2b-signature")) {
		// Counted per minute for the console (one row a minute however many are forged).
		if err := s.q.CountWebhookRejection(ctx); err != nil {
			s.log.Warn("count a refused webhook", "err", err)
		}
		return WebhookResult{}, &apperr.Error{Kind: apperr.KindUnauthorized, Code: "bad_signature",
			Message: "The webhook signature is missing or does not match."}
	}
	ev, err := e2b.ParseWebhook(body)
	if err != nil {
		return WebhookResult{}, apperr.New(apperr.KindInvalid, "bad_payload", "The webhook body is not a lifecycle event: "+err.Error())
	}
	// PostgreSQL text cannot hold NUL, which JSON can escape: such ids could never be stored
	// or looked up, so the event is refused rather than failing in the database.
	if strings.ContainsRune(ev.ID+ev.Type+ev.SandboxID, 0) {
		return WebhookResult{}, apperr.New(apperr.KindInvalid, "bad_payload", "The webhook event has a NUL character in its id, type or sandbox id.")
	}
	headers, _ := json.Marshal(map[string]string{
		"e2b-webhook-id":        storableHeader(header.Get("e2b-webhook-id")),
		"e2b-delivery-id":       storableHeader(header.Get("e2b-delivery-id")),
		"e2b-signature-version": storableHeader(header.Get("e2b-signature-version")),
		"content-type":          storableHeader(header.Get("Content-Type")),
	})
	res := WebhookResult{EventID: ev.ID}
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		id, err := tx.InsertWebhookDelivery(ctx, db.InsertWebhookDeliveryParams{
			EventID: ev.ID, DeliveryID: storableHeader(header.Get("e2b-delivery-id")), EventType: ev.Type, Headers: headers, Body: body,
			EventAt: eventTime(ev.Timestamp),
		})
		if db.IsNotFound(err) {
			res.Duplicate = true
			return nil
		}
		if err != nil {
			return err
		}
		_, err = s.river.InsertTx(ctx, tx.Pgx(), WebhookArgs{DeliveryID: id}, nil)
		return err
	})
	return res, err
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
	d, err := s.q.GetWebhookDelivery(ctx, job.Args.DeliveryID)
	if err != nil {
		return db.MapError(err)
	}
	ev, err := e2b.ParseWebhook(d.Body)
	if err != nil {
		return s.q.SetWebhookDeliveryOutcome(ctx, db.SetWebhookDeliveryOutcomeParams{ID: d.ID, Outcome: db.WebhookOutcomeUnparseable})
	}
	outcome := db.WebhookOutcomeIgnored
	switch ev.Type {
	case EventCreated, EventPaused, EventResumed, EventUpdated, EventKilled:
		changed, err := s.ApplyProviderEvent(ctx, ToProviderEvent(ev), db.EventSourceWebhook)
		if err != nil {
			return err
		}
		if changed {
			outcome = db.WebhookOutcomeApplied
		}
	default:
		outcome = db.WebhookOutcomeUnknownType
	}
	return s.q.SetWebhookDeliveryOutcome(ctx, db.SetWebhookDeliveryOutcomeParams{ID: d.ID, Outcome: outcome})
}

// eventTime is a delivery's provider time, when it has one.
func eventTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
