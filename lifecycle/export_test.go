package lifecycle

import (
	"context"

	"github.com/google/uuid"

	"sandman/db"
	"sandman/e2b"
	"sandman/sandbox"
)

// StoreWebhookGroup runs one group commit of deliveries of evs (each body its event's id), as
// deliveries that arrived together are, and reports which were duplicates.
func (s *Service) StoreWebhookGroup(ctx context.Context, evs []e2b.Event) ([]bool, error) {
	group := make([]*delivery, len(evs))
	for i, ev := range evs {
		group[i] = &delivery{ev: ev, row: db.InsertWebhookDeliveryParams{EventID: ev.ID, EventType: ev.Type, Headers: []byte("{}"), Body: []byte(ev.ID)}}
	}
	err := db.InTx(ctx, s.pool, func(tx db.Tx) error { return s.storeGroup(ctx, tx, group) })
	dups := make([]bool, len(group))
	for i, d := range group {
		dups[i] = d.duplicate
	}
	return dups, err
}

// IdleQueueLock is the advisory lock whose holder runs the idle queue's loop.
const IdleQueueLock = idleQueueLock

// SetAppStatus records that the sandbox's app run is in status to, as the app's writer records
// a startup's or the watch's report.
func (s *Service) SetAppStatus(ctx context.Context, sandboxID, run uuid.UUID, to sandbox.AppStatus) error {
	_, err := s.changeApp(ctx, sandboxID, appChange{run: run, to: to})
	return err
}

// What lifecycle's tests call of the jobs and the watch that nothing outside the package does.

func (s *Service) ApplyProviderEvent(ctx context.Context, ev ProviderEvent, source sandbox.Source) (bool, error) {
	return s.applyEvent(ctx, ev, source)
}
func (s *Service) CatchUpEvents(ctx context.Context) error { return s.catchUpEvents(ctx) }
func (s *Service) Reconcile(ctx context.Context) error     { return s.reconcile(ctx) }
func (s *Service) Watches(sandboxID uuid.UUID) bool        { return s.watches(sandboxID) }
