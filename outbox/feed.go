package outbox

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"sandman/apperr"
	"sandman/db"
)

// MaxPage is the most items one page of the feed or of the deliveries holds.
const MaxPage = 100

// FeedItem is one event of the feed: its cursor and its payload, as delivered.
type FeedItem struct {
	ID      string
	Payload json.RawMessage
}

// Page clamps a page's size: 0 is the default, 50.
func Page(limit int) int32 {
	switch {
	case limit <= 0:
		return 50
	case limit > MaxPage:
		return MaxPage
	}
	return int32(limit)
}

// Cursor reads a cursor of the feed or the deliveries ("" is the start).
func Cursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, apperr.Invalid(map[string]string{"after": "The cursor is the \"next\" of a previous answer: a number."})
	}
	return n, nil
}

// FeedCursor is a place in the feed: past the events of every transaction before Tx, and of Tx
// up to ID. Events are ordered by their transactions, not their ids alone: an id is taken when
// the event is inserted, not when it commits, so a cursor of ids could pass an event that
// commits after it was read (docs/architecture.md, "Outgoing webhooks").
type FeedCursor struct{ Tx, ID int64 }

// String is the cursor as the API gives it ("" at the start).
func (c FeedCursor) String() string {
	if c == (FeedCursor{}) {
		return ""
	}
	return strconv.FormatInt(c.Tx, 10) + "-" + strconv.FormatInt(c.ID, 10)
}

// ParseFeedCursor reads a cursor of the feed ("" is the start).
func ParseFeedCursor(s string) (FeedCursor, error) {
	if s == "" {
		return FeedCursor{}, nil
	}
	tx, id, ok := strings.Cut(s, "-")
	c := FeedCursor{}
	var err1, err2 error
	c.Tx, err1 = strconv.ParseInt(tx, 10, 64)
	c.ID, err2 = strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil || c.Tx < 0 || c.ID < 0 {
		return FeedCursor{}, apperr.Invalid(map[string]string{"after": "The cursor is the \"next\" of a previous answer, as it was given."})
	}
	return c, nil
}

// Events is the founder's feed after the cursor, oldest first, and the cursor to go on from
// (the same when nothing is new). Events are kept for Config.Keep.
func (s *Service) Events(ctx context.Context, owner uuid.UUID, after FeedCursor, limit int32) ([]FeedItem, FeedCursor, error) {
	rows, err := db.New(s.pool).ListOutboxEvents(ctx, db.ListOutboxEventsParams{OwnerID: owner, AfterTx: after.Tx, AfterID: after.ID, Max: limit})
	if err != nil {
		return nil, after, err
	}
	out := make([]FeedItem, 0, len(rows))
	for _, r := range rows {
		out = append(out, FeedItem{ID: strconv.FormatInt(r.ID, 10), Payload: r.Payload})
		after = FeedCursor{Tx: r.Tx, ID: r.ID}
	}
	return out, after, nil
}

// Delivery is one event to one endpoint with its last attempt.
type Delivery struct {
	ID          int64
	MessageID   string
	EventType   Type
	State       string // pending, delivered, failed
	Attempts    int32
	StatusCode  int32
	DurationMs  int32
	Error       string
	Response    string
	AttemptedAt *time.Time
	NextAt      *time.Time
	CreatedAt   time.Time
}

// Deliveries is an endpoint's deliveries, newest first, before the cursor (0: the newest).
func (s *Service) Deliveries(ctx context.Context, owner, endpoint uuid.UUID, before int64, limit int32) ([]Delivery, error) {
	if _, err := s.Get(ctx, owner, endpoint); err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListOutboxDeliveries(ctx, db.ListOutboxDeliveriesParams{EndpointID: endpoint, OwnerID: owner, Before: before, Max: limit})
	if err != nil {
		return nil, err
	}
	out := make([]Delivery, 0, len(rows))
	for _, r := range rows {
		d := Delivery{ID: r.ID, MessageID: MessageID(r.ID), EventType: Type(r.EventType), State: r.State, Attempts: r.Attempts,
			StatusCode: r.StatusCode, DurationMs: r.DurationMs, Error: r.Error, Response: r.Response, CreatedAt: r.CreatedAt}
		if r.Attempts > 0 {
			at := r.AttemptedAt
			d.AttemptedAt = &at
		}
		if r.State == "pending" {
			next := r.NextAttemptAt
			d.NextAt = &next
		}
		out = append(out, d)
	}
	return out, nil
}

// Retry sends a delivery again now, with the same webhook-id, and the retry schedule from its
// start.
func (s *Service) Retry(ctx context.Context, owner, endpoint uuid.UUID, delivery int64) error {
	q := db.New(s.pool)
	n, err := q.RetryOutboxDelivery(ctx, db.RetryOutboxDeliveryParams{ID: delivery, EndpointID: endpoint, OwnerID: owner})
	if err != nil {
		return err
	}
	if n == 0 {
		if _, err := s.Get(ctx, owner, endpoint); err != nil {
			return err
		}
		ds, err := q.ListOutboxDeliveries(ctx, db.ListOutboxDeliveriesParams{EndpointID: endpoint, OwnerID: owner, Before: delivery + 1, Max: 1})
		if err != nil {
			return err
		}
		if len(ds) == 0 || ds[0].ID != delivery {
			return apperr.NotFound("Delivery")
		}
		return apperr.New(apperr.KindConflict, CodeDeliveryInFlight, "This delivery is being sent right now: look again in a few seconds.")
	}
	s.send.poke()
	return nil
}

// Prune forgets the events older than Config.Keep, with their deliveries.
func (s *Service) Prune(ctx context.Context) error {
	_, err := db.New(s.pool).PruneOutboxEvents(ctx, s.cfg.Keep.Seconds())
	return err
}
