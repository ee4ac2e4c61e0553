package versions

import (
	"bytes"
	"context"

	"github.com/google/uuid"

	"sandman/apperr"
	"sandman/db"
)

// CreateOnce is Create under an Idempotency-Key (docs/api.md, "Versions"): the first request
// with a key runs; the same key with the same request (requestSum, the body's SHA-256) answers
// the first answer again, marked Replayed; with another request it is refused (422 key_reused);
// while the first still runs, 409 key_in_flight. Keys are the founder's, kept at least 24
// hours. A request that fails gives its key back, so its retry runs again. An empty key is
// Create.
func (s *Service) CreateOnce(ctx context.Context, owner, projectID uuid.UUID, key string, requestSum []byte, c Change) (Result, error) {
	if key == "" {
		return s.Create(ctx, owner, projectID, c)
	}
	if len(key) > 200 {
		return Result{}, apperr.Invalid(map[string]string{"Idempotency-Key": "Send an Idempotency-Key of 1 to 200 characters."})
	}
	if err := s.q.DeleteOldVersionKeys(ctx); err != nil {
		return Result{}, err
	}
	_, err := s.q.ClaimVersionKey(ctx, db.ClaimVersionKeyParams{OwnerID: owner, Key: key, ProjectID: projectID, RequestSha256: requestSum})
	if db.IsNotFound(err) {
		return s.replay(ctx, owner, projectID, key, requestSum)
	}
	if err != nil {
		return Result{}, err
	}
	var res Result
	err = db.InTx(ctx, s.pool, func(tx db.Tx) error {
		var err error
		if res, err = s.create(ctx, tx, owner, projectID, c); err != nil {
			return err
		}
		return tx.FinishVersionKey(ctx, db.FinishVersionKeyParams{OwnerID: owner, Key: key, VersionNumber: &res.Version.Number, Unchanged: res.Unchanged})
	})
	if err != nil {
		if rerr := s.q.ReleaseVersionKey(context.WithoutCancel(ctx), db.ReleaseVersionKeyParams{OwnerID: owner, Key: key}); rerr != nil {
			return Result{}, rerr
		}
	}
	return res, err
}

var (
	errKeyReused = apperr.New(apperr.KindInvalid, codeKeyReused,
		"This Idempotency-Key was used for another request (another body or project). Nothing was stored: send a new key for this one.")
	errKeyInFlight = apperr.New(apperr.KindConflict, codeKeyInFlight,
		"A request with this Idempotency-Key is still running. Wait for its answer, then retry with the same key to read it.")
)

func (s *Service) replay(ctx context.Context, owner, projectID uuid.UUID, key string, requestSum []byte) (Result, error) {
	k, err := s.q.GetVersionKey(ctx, db.GetVersionKeyParams{OwnerID: owner, Key: key})
	if db.IsNotFound(err) { // released between the claim and this read: the caller retries
		return Result{}, errKeyInFlight
	}
	if err != nil {
		return Result{}, err
	}
	switch {
	case k.ProjectID != projectID || !bytes.Equal(k.RequestSha256, requestSum):
		return Result{}, errKeyReused
	case k.VersionNumber == nil:
		return Result{}, errKeyInFlight
	}
	v, err := getVersion(ctx, s.q, projectID, *k.VersionNumber)
	return Result{Version: v, Unchanged: k.Unchanged, Replayed: true}, err
}
