package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/services/ordering"
)

var errTODO = errors.New("not written yet")

// ChangeEsims implements ordering.Store.
func (s *Store) ChangeEsims(ctx context.Context, sel ordering.EsimSelection, change func(*ordering.Esim) (bool, []ordering.Event, error)) ([]ordering.Esim, error) {
	return nil, errTODO
}

// EsimsInUse implements ordering.Store.
func (s *Store) EsimsInUse(ctx context.Context, env ordering.Environment, after uuid.UUID, limit int32) ([]ordering.EsimRef, error) {
	return nil, errTODO
}

// DueEsims implements ordering.Store.
func (s *Store) DueEsims(ctx context.Context, now time.Time, notice time.Duration, limit int32) ([]uuid.UUID, error) {
	return nil, errTODO
}

// CompleteTopUp implements ordering.Locked.
func (l *lockHolder) CompleteTopUp(ctx context.Context, id, esimID uuid.UUID, apply func(*ordering.Esim) error, e ordering.Event) error {
	return errTODO
}
