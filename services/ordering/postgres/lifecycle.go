package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/postgres/db"
)

// ChangeEsims implements ordering.Store: the selected rows locked in id
// order, change run on each, the changed ones written back in one
// statement and their events' publications in another, all in one
// transaction.
func (s *Store) ChangeEsims(ctx context.Context, sel ordering.EsimSelection, change func(*ordering.Esim) (bool, []ordering.Event, error)) ([]ordering.Esim, error) {
	var out []ordering.Esim
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var rows []db.Esim
		var err error
		if len(sel.ICCIDs) > 0 {
			rows, err = q.LockEsimsByICCID(ctx, db.LockEsimsByICCIDParams{Environment: string(sel.Environment), Iccids: sel.ICCIDs})
		} else {
			p := db.LockEsimsByIDParams{Ids: sel.IDs, AnyScope: sel.Scope == nil}
			if sel.Scope != nil {
				p.AccountID, p.Environment = sel.Scope.AccountID, string(sel.Scope.Environment)
			}
			rows, err = q.LockEsimsByID(ctx, p)
		}
		if err != nil {
			return fmt.Errorf("lock eSIMs: %w", err)
		}
		out = make([]ordering.Esim, len(rows))
		var changed []ordering.Esim
		var events []ordering.Event
		for i, r := range rows {
			out[i] = esim(r)
			ok, evs, err := change(&out[i])
			if err != nil {
				return err
			}
			if ok {
				changed = append(changed, out[i])
				events = append(events, evs...)
			}
		}
		if len(changed) == 0 {
			return nil
		}
		n, err := q.UpdateEsims(ctx, updateParams(changed))
		if err != nil {
			return fmt.Errorf("update %d eSIMs: %w", len(changed), err)
		}
		if n != int64(len(changed)) {
			return fmt.Errorf("update %d eSIMs: %d rows changed", len(changed), n)
		}
		return s.jobs.PublishEventsTx(ctx, tx, events, traceContext(ctx))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// updateParams are the arrays UpdateEsims writes; a zero time is NULL.
func updateParams(esims []ordering.Esim) db.UpdateEsimsParams {
	var p db.UpdateEsimsParams
	for _, e := range esims {
		p.Ids = append(p.Ids, e.ID)
		p.Statuses = append(p.Statuses, e.Status)
		p.InstalledAt = append(p.InstalledAt, e.InstalledAt)
		p.ActivatedAt = append(p.ActivatedAt, e.ActivatedAt)
		p.ExpiresAt = append(p.ExpiresAt, e.ExpiresAt)
		p.UsedBytes = append(p.UsedBytes, e.Data.UsedBytes)
		p.TotalBytes = append(p.TotalBytes, e.Data.TotalBytes)
		p.ValidityDays = append(p.ValidityDays, e.ValidityDays)
		p.DataUpdatedAt = append(p.DataUpdatedAt, e.Data.UpdatedAt)
		p.UsageNotified = append(p.UsageNotified, e.UsageNotified)
		p.ExpiringNotified = append(p.ExpiringNotified, e.ExpiringNotified)
	}
	return p
}

// EsimsInUse implements ordering.Store.
func (s *Store) EsimsInUse(ctx context.Context, env ordering.Environment, after uuid.UUID, limit int32) ([]ordering.EsimRef, error) {
	rows, err := s.q.EsimsInUse(ctx, db.EsimsInUseParams{Environment: string(env), After: after, RowLimit: limit})
	if err != nil {
		return nil, fmt.Errorf("select eSIMs in use: %w", err)
	}
	out := make([]ordering.EsimRef, len(rows))
	for i, r := range rows {
		out[i] = ordering.EsimRef{ID: r.ID, ICCID: r.Iccid}
	}
	return out, nil
}

// DueEsims implements ordering.Store.
func (s *Store) DueEsims(ctx context.Context, now time.Time, notice time.Duration, limit int32) ([]uuid.UUID, error) {
	ids, err := s.q.DueEsims(ctx, db.DueEsimsParams{Now: now, NoticeUntil: now.Add(notice), RowLimit: limit})
	if err != nil {
		return nil, fmt.Errorf("select due eSIMs: %w", err)
	}
	return ids, nil
}

// CompleteTopUp implements ordering.Locked: the top-up's status, its
// eSIM's new allowance and the event in one transaction.
func (l *lockHolder) CompleteTopUp(ctx context.Context, id, esimID uuid.UUID, apply func(*ordering.Esim) error, e ordering.Event) error {
	return pgx.BeginFunc(ctx, l.conn, func(tx pgx.Tx) error {
		q := l.q.WithTx(tx)
		rows, err := q.LockEsimsByID(ctx, db.LockEsimsByIDParams{Ids: []uuid.UUID{esimID}, AnyScope: true})
		if err != nil {
			return fmt.Errorf("lock the top-up's eSIM: %w", err)
		}
		if len(rows) != 1 {
			return fmt.Errorf("lock the top-up's eSIM %s: %w", esimID, ordering.ErrNotFound)
		}
		topped := esim(rows[0])
		if err := apply(&topped); err != nil {
			return err
		}
		if _, err := q.UpdateEsims(ctx, updateParams([]ordering.Esim{topped})); err != nil {
			return fmt.Errorf("update the top-up's eSIM: %w", err)
		}
		if err := oneRow(q.MarkOrderCompleted(ctx, id))("mark top-up completed"); err != nil {
			return err
		}
		return l.jobs.PublishEventTx(ctx, tx, e, traceContext(ctx))
	})
}

// withTopUps adds their top-ups to esims, read through q.
func withTopUps(ctx context.Context, q *db.Queries, esims []ordering.Esim) error {
	if len(esims) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(esims))
	index := make(map[uuid.UUID]int, len(esims))
	for i, e := range esims {
		ids[i], index[e.ID] = e.ID, i
	}
	rows, err := q.TopUpsOfEsims(ctx, ids)
	if err != nil {
		return fmt.Errorf("select top-ups: %w", err)
	}
	for _, r := range rows {
		i := index[*r.EsimID]
		esims[i].TopUps = append(esims[i].TopUps, ordering.TopUpOf(order(r), esims[i].OrderID))
	}
	return nil
}
