// Package postgres is the webhook Store over Postgres (pgx/v5), with its
// queries written in SQL and compiled by sqlc into package db.
//
// The delivery queue is River's (queue.go): a job per pending event,
// inserted in the transaction that stores the event. Each run of a job
// counts its attempt and records its start before anything is sent, in
// one transaction (StartAttempt): a replica that dies mid-attempt leaves
// a started attempt, River rescues the job once it has run longer than
// an attempt can, and its next run records that attempt as interrupted.
// Attempts are thus never more than three, whatever crashes.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	libpostgres "github.com/esimplatform/esim/libs/postgres"
	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/postgres/db"
)

// Store implements webhook.Store.
type Store struct {
	pool *pgxpool.Pool
	q    *db.Queries
	// jobs inserts delivery jobs only; the Queue works them.
	jobs        *river.Client[pgx.Tx]
	maxPerScope int
}

var _ webhook.Store = (*Store)(nil)

// NewStore returns a Store over pool; the pool stays the caller's to
// close. maxPerScope is the per-endpoint cap, which the priority of a new
// delivery job weighs (priority).
func NewStore(pool *pgxpool.Pool, maxPerScope int) (*Store, error) {
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		// The cooldown of insert notifications: a job inserted within it
		// of the last one is fetched with that one's, or by the next
		// fetch a finishing job triggers.
		FetchCooldown: fetchCooldown,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, fmt.Errorf("river insert client: %w", err)
	}
	return &Store{pool: pool, q: db.New(pool), jobs: jobs, maxPerScope: max(1, maxPerScope)}, nil
}

// SetEndpoint implements webhook.Store.
func (s *Store) SetEndpoint(ctx context.Context, scope webhook.Scope, url string, secret []byte, now time.Time) (webhook.SealedEndpoint, error) {
	row, err := s.q.UpsertEndpoint(ctx, db.UpsertEndpointParams{
		AccountID: scope.AccountID, Environment: string(scope.Environment), Url: url, Secret: secret, Now: now,
	})
	if err != nil {
		return webhook.SealedEndpoint{}, fmt.Errorf("upsert endpoint: %w", err)
	}
	return endpoint(row), nil
}

// Endpoint implements webhook.Store.
func (s *Store) Endpoint(ctx context.Context, scope webhook.Scope) (webhook.SealedEndpoint, error) {
	row, err := s.q.GetEndpoint(ctx, db.GetEndpointParams{AccountID: scope.AccountID, Environment: string(scope.Environment)})
	if errors.Is(err, pgx.ErrNoRows) {
		return webhook.SealedEndpoint{}, webhook.ErrNotFound
	}
	if err != nil {
		return webhook.SealedEndpoint{}, fmt.Errorf("select endpoint: %w", err)
	}
	return endpoint(row), nil
}

// AnyEndpoint implements webhook.Store.
func (s *Store) AnyEndpoint(ctx context.Context) (webhook.SealedEndpoint, error) {
	row, err := s.q.AnyEndpoint(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return webhook.SealedEndpoint{}, webhook.ErrNotFound
	}
	if err != nil {
		return webhook.SealedEndpoint{}, fmt.Errorf("select an endpoint: %w", err)
	}
	return endpoint(row), nil
}

// RotateSecret implements webhook.Store.
func (s *Store) RotateSecret(ctx context.Context, scope webhook.Scope, secret []byte, now, previousExpiresAt time.Time) (webhook.SealedEndpoint, error) {
	row, err := s.q.RotateSecret(ctx, db.RotateSecretParams{
		AccountID: scope.AccountID, Environment: string(scope.Environment),
		Secret: secret, Now: now, PreviousExpiresAt: &previousExpiresAt,
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return webhook.SealedEndpoint{}, webhook.ErrNotFound
	}
	if err != nil {
		return webhook.SealedEndpoint{}, fmt.Errorf("rotate secret: %w", err)
	}
	return endpoint(row), nil
}

// AddEvent implements webhook.Store.
func (s *Store) AddEvent(ctx context.Context, e webhook.NewEvent) (bool, error) {
	trace, err := json.Marshal(e.Trace)
	if err != nil {
		return false, fmt.Errorf("encode trace context: %w", err)
	}
	if e.Trace == nil {
		trace = []byte("{}")
	}
	var orderID *uuid.UUID
	if e.OrderID != uuid.Nil {
		orderID = &e.OrderID
	}
	added := false
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		status, err := q.InsertEvent(ctx, db.InsertEventParams{
			ID: e.ID, Type: string(e.Type), AccountID: e.Scope.AccountID, Environment: string(e.Scope.Environment),
			OrderID: orderID, CreatedAt: e.CreatedAt, Payload: string(e.Payload), TraceContext: trace,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // stored before: a message read again
		}
		if err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		added = true
		if webhook.Status(status) != webhook.StatusPending {
			return nil
		}
		// Up to one more than the cap, this event included: a scope
		// with more pending than it may send at once has a backlog.
		pending, err := q.CountPendingUpTo(ctx, db.CountPendingUpToParams{
			AccountID: e.Scope.AccountID, Environment: string(e.Scope.Environment), UpTo: int64(s.maxPerScope) + 1,
		})
		if err != nil {
			return fmt.Errorf("count pending events: %w", err)
		}
		if _, err := s.jobs.InsertTx(ctx, tx, deliveryArgs{EventID: e.ID, AccountID: e.Scope.AccountID.String(), Environment: string(e.Scope.Environment)}, insertOpts(e.Scope.Environment, pending > int64(s.maxPerScope))); err != nil {
			return fmt.Errorf("insert delivery job: %w", err)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("add event %s: %w", e.ID, err)
	}
	return added, nil
}

// AddEvents implements webhook.Store: one statement inserts the events,
// one counts each scope's pending events, one inserts the jobs, in one
// transaction, whatever the number of events.
func (s *Store) AddEvents(ctx context.Context, es []webhook.NewEvent) ([]bool, error) {
	added := make([]bool, len(es))
	if len(es) == 0 {
		return added, nil
	}
	p := db.InsertEventsParams{
		Ids: make([]string, len(es)), Types: make([]string, len(es)), AccountIds: make([]uuid.UUID, len(es)),
		Environments: make([]string, len(es)), OrderIds: make([]uuid.UUID, len(es)), CreatedAts: make([]time.Time, len(es)),
		Payloads: make([]string, len(es)), TraceContexts: make([]string, len(es)),
	}
	for i, e := range es {
		if e.OrderID == uuid.Nil {
			// Only ordering's events come in batches; a ping has no order.
			return nil, fmt.Errorf("add events: event %s has no order", e.ID)
		}
		trace := []byte("{}")
		if e.Trace != nil {
			var err error
			if trace, err = json.Marshal(e.Trace); err != nil {
				return nil, fmt.Errorf("encode trace context: %w", err)
			}
		}
		p.Ids[i], p.Types[i], p.AccountIds[i], p.Environments[i] = e.ID, string(e.Type), e.Scope.AccountID, string(e.Scope.Environment)
		p.OrderIds[i], p.CreatedAts[i], p.Payloads[i], p.TraceContexts[i] = e.OrderID, e.CreatedAt, string(e.Payload), string(trace)
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		rows, err := q.InsertEvents(ctx, p)
		if err != nil {
			return fmt.Errorf("insert events: %w", err)
		}
		pending := map[string]bool{}
		for _, r := range rows {
			pending[r.ID] = webhook.Status(r.Status) == webhook.StatusPending
		}
		// The events each scope gets jobs for, in their order, which the
		// priority of each weighs: as AddEvent, the k-th of a scope is
		// backlogged when the scope's pending events before it and it
		// exceed the cap.
		perScope := map[webhook.Scope][]int{}
		var scopes []webhook.Scope
		for i, e := range es {
			want, ok := pending[e.ID]
			if !ok {
				continue // stored before: a message read again
			}
			delete(pending, e.ID) // an id twice in es is stored once
			added[i] = true
			if !want {
				continue
			}
			if _, seen := perScope[e.Scope]; !seen {
				scopes = append(scopes, e.Scope)
			}
			perScope[e.Scope] = append(perScope[e.Scope], i)
		}
		var jobs []river.InsertManyParams
		for _, scope := range scopes {
			idx := perScope[scope]
			// Counted up to the cap and these events: past that, every
			// one of them is backlogged whatever the exact count.
			n, err := q.CountPendingUpTo(ctx, db.CountPendingUpToParams{
				AccountID: scope.AccountID, Environment: string(scope.Environment), UpTo: int64(s.maxPerScope + len(idx)),
			})
			if err != nil {
				return fmt.Errorf("count pending events: %w", err)
			}
			before := n - int64(len(idx))
			for k, i := range idx {
				jobs = append(jobs, river.InsertManyParams{
					Args:       deliveryArgs{EventID: es[i].ID, AccountID: scope.AccountID.String(), Environment: string(scope.Environment)},
					InsertOpts: insertOpts(scope.Environment, before+int64(k)+1 > int64(s.maxPerScope)),
				})
			}
		}
		if len(jobs) == 0 {
			return nil
		}
		if _, err := s.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
			return fmt.Errorf("insert delivery jobs: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("add %d events: %w", len(es), err)
	}
	return added, nil
}

// StartAttempt implements webhook.Store.
func (s *Store) StartAttempt(ctx context.Context, eventID string, rules webhook.AttemptRules) (webhook.Job, error) {
	var job webhook.Job
	over := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		ev, err := q.LockEventForAttempt(ctx, eventID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("no event %s", eventID)
		}
		if err != nil {
			return fmt.Errorf("lock event: %w", err)
		}
		if webhook.Status(ev.Status) != webhook.StatusPending {
			over = true
			return nil
		}
		ep, err := q.LockEndpointForAttempt(ctx, db.LockEndpointForAttemptParams{AccountID: ev.AccountID, Environment: ev.Environment})
		if err != nil {
			return fmt.Errorf("lock endpoint: %w", err)
		}
		inFlight, err := q.CountInFlight(ctx, db.CountInFlightParams{AccountID: ev.AccountID, Environment: ev.Environment, EventID: eventID})
		if err != nil {
			return fmt.Errorf("count attempts in flight: %w", err)
		}
		if inFlight >= int64(rules.MaxPerScope) {
			return webhook.ErrScopeFull
		}
		// An unfinished attempt of this event was cut short with its
		// replica: this run is the next.
		if _, err := q.InterruptAttempt(ctx, db.InterruptAttemptParams{EventID: eventID, Error: rules.Interrupted}); err != nil {
			return fmt.Errorf("record an interrupted attempt: %w", err)
		}
		last, err := q.LastAttempt(ctx, eventID)
		if err != nil {
			return fmt.Errorf("count attempts: %w", err)
		}
		if last >= webhook.MaxAttempts {
			over = true
			return q.SetEventStatus(ctx, db.SetEventStatusParams{ID: eventID, Status: string(webhook.StatusFailed)})
		}
		if err := q.InsertAttempt(ctx, db.InsertAttemptParams{EventID: eventID, Number: last + 1}); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		var trace map[string]string
		if err := json.Unmarshal(ev.TraceContext, &trace); err != nil {
			return fmt.Errorf("decode trace context: %w", err)
		}
		if ev.Url == nil {
			return fmt.Errorf("pending event %s has no URL", eventID)
		}
		job = webhook.Job{
			EventID:        eventID,
			Scope:          webhook.Scope{AccountID: ev.AccountID, Environment: webhook.Environment(ev.Environment)},
			URL:            *ev.Url,
			Payload:        []byte(ev.Payload),
			Trace:          trace,
			Attempt:        int(last + 1),
			Secret:         ep.Secret,
			PreviousSecret: ep.PreviousSecret,
		}
		if ep.PreviousSecretExpiresAt != nil {
			job.PreviousSecretExpiresAt = ep.PreviousSecretExpiresAt.UTC()
		}
		return nil
	})
	switch {
	case errors.Is(err, webhook.ErrScopeFull):
		return webhook.Job{}, err
	case err != nil:
		return webhook.Job{}, fmt.Errorf("start an attempt of %s: %w", eventID, err)
	case over:
		return webhook.Job{}, webhook.ErrDeliveryOver
	}
	return job, nil
}

// Finish implements webhook.Store.
func (s *Store) Finish(ctx context.Context, job webhook.Job, r webhook.Result, next webhook.Status) error {
	duration := r.Duration.Milliseconds()
	body := r.ResponseBody
	if len(body) > webhook.ResponseBodyLimit {
		body = body[:webhook.ResponseBodyLimit]
	}
	if body == nil {
		body = []byte{}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		n, err := q.FinishAttempt(ctx, db.FinishAttemptParams{
			EventID: job.EventID, Number: int32(job.Attempt), DurationMs: &duration,
			StatusCode: int32(r.StatusCode), Error: r.Error, ResponseBody: body,
		})
		if err != nil {
			return fmt.Errorf("finish attempt: %w", err)
		}
		if n == 0 {
			return webhook.ErrLeaseLost
		}
		switch next {
		case webhook.StatusPending:
			return nil
		case webhook.StatusDelivered, webhook.StatusFailed:
			if err := q.SetEventStatus(ctx, db.SetEventStatusParams{ID: job.EventID, Status: string(next)}); err != nil {
				return fmt.Errorf("set event status: %w", err)
			}
			return nil
		}
		return fmt.Errorf("an attempt cannot leave its event %s", next)
	})
	if err != nil {
		return fmt.Errorf("finish attempt %d of %s: %w", job.Attempt, job.EventID, err)
	}
	return nil
}

// Event implements webhook.Store.
func (s *Store) Event(ctx context.Context, scope *webhook.Scope, id string) (webhook.Event, error) {
	params := db.EventInScopeParams{ID: id, AnyScope: scope == nil}
	if scope != nil {
		params.AccountID, params.Environment = scope.AccountID, string(scope.Environment)
	}
	var e webhook.Event
	// The event and its attempts as of one moment: an attempt finishing
	// between the two reads would show beside the event's older status.
	err := libpostgres.InSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		row, err := q.EventInScope(ctx, params)
		if errors.Is(err, pgx.ErrNoRows) {
			return webhook.ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("select event: %w", err)
		}
		events, err := withAttempts(ctx, q, []db.Event{row})
		if err != nil {
			return err
		}
		e = events[0]
		return nil
	})
	return e, err
}

// ListEvents implements webhook.Store. The page, its attempts and the
// count are read in one snapshot, so that they agree while events arrive.
// It first refuses a page the domain would never ask for.
func (s *Store) ListEvents(ctx context.Context, f webhook.EventFilter, limit int32, offset int64) ([]webhook.Event, int64, error) {
	if limit < 1 || limit > webhook.MaxPageLimit || offset < 0 {
		return nil, 0, fmt.Errorf("page of %d rows at offset %d is out of range (limit 1..%d, offset >= 0)", limit, offset, webhook.MaxPageLimit)
	}
	var orderID *uuid.UUID
	if f.OrderID != uuid.Nil {
		orderID = &f.OrderID
	}
	var events []webhook.Event
	var total int64
	err := libpostgres.InSnapshot(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		var rows []db.Event
		var err error
		switch {
		case f.Scope != nil && f.Type == "" && orderID == nil && f.Status == "":
			// A partner's whole list, however long: its total kept, its
			// page found by keyset from an index-only scan.
			account, env := f.Scope.AccountID, string(f.Scope.Environment)
			if total, err = q.EventTotal(ctx, db.EventTotalParams{AccountID: account, Environment: env}); err == nil {
				rows, err = wholeListPage(total, offset, limit, func(skip int64, n int32) ([]db.Event, error) {
					return q.ListEventsInScopeFrom(ctx, db.ListEventsInScopeFromParams{AccountID: account, Environment: env, RowOffset: skip, RowLimit: n})
				}, func(skip int64, n int32) ([]db.Event, error) {
					return q.ListEventsInScopeFromOldest(ctx, db.ListEventsInScopeFromOldestParams{AccountID: account, Environment: env, RowOffset: skip, RowLimit: n})
				})
			}
		case f.Scope != nil:
			rows, err = q.ListEventsInScope(ctx, db.ListEventsInScopeParams{
				AccountID: f.Scope.AccountID, Environment: string(f.Scope.Environment),
				Type: string(f.Type), OrderID: orderID, Status: string(f.Status), RowLimit: limit, RowOffset: offset,
			})
			if err == nil {
				total, err = q.CountEventsInScope(ctx, db.CountEventsInScopeParams{
					AccountID: f.Scope.AccountID, Environment: string(f.Scope.Environment),
					Type: string(f.Type), OrderID: orderID, Status: string(f.Status),
				})
			}
		default:
			rows, err = q.ListAllEvents(ctx, db.ListAllEventsParams{
				Type: string(f.Type), OrderID: orderID, Status: string(f.Status), RowLimit: limit, RowOffset: offset,
			})
			if err == nil {
				total, err = q.CountAllEvents(ctx, db.CountAllEventsParams{Type: string(f.Type), OrderID: orderID, Status: string(f.Status)})
			}
		}
		if err != nil {
			return fmt.Errorf("select events: %w", err)
		}
		events, err = withAttempts(ctx, q, rows)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	return events, total, nil
}

// withAttempts is rows as events, each with its attempts, read in one
// query.
func withAttempts(ctx context.Context, q *db.Queries, rows []db.Event) ([]webhook.Event, error) {
	events := make([]webhook.Event, len(rows))
	ids := make([]string, len(rows))
	at := make(map[string]int, len(rows))
	for i, r := range rows {
		events[i] = event(r)
		ids[i] = r.ID
		at[r.ID] = i
	}
	if len(rows) == 0 {
		return events, nil
	}
	attempts, err := q.AttemptsOf(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("select attempts: %w", err)
	}
	for _, a := range attempts {
		e := &events[at[a.EventID]]
		e.Attempts = append(e.Attempts, attempt(a))
	}
	return events, nil
}

func endpoint(r db.Endpoint) webhook.SealedEndpoint {
	e := webhook.SealedEndpoint{
		Scope:           webhook.Scope{AccountID: r.AccountID, Environment: webhook.Environment(r.Environment)},
		URL:             r.Url,
		Secret:          r.Secret,
		SecretCreatedAt: r.SecretCreatedAt.UTC(),
		PreviousSecret:  r.PreviousSecret,
		UpdatedAt:       r.UpdatedAt.UTC(),
	}
	if r.PreviousSecretExpiresAt != nil {
		e.PreviousSecretExpiresAt = r.PreviousSecretExpiresAt.UTC()
	}
	return e
}

func event(r db.Event) webhook.Event {
	e := webhook.Event{
		ID:        r.ID,
		Type:      webhook.EventType(r.Type),
		Scope:     webhook.Scope{AccountID: r.AccountID, Environment: webhook.Environment(r.Environment)},
		CreatedAt: r.CreatedAt.UTC(),
		Status:    webhook.Status(r.Status),
		Payload:   []byte(r.Payload),
	}
	if r.OrderID != nil {
		e.OrderID = *r.OrderID
	}
	if r.Url != nil {
		e.URL = *r.Url
	}
	return e
}

func attempt(r db.Attempt) webhook.Attempt {
	a := webhook.Attempt{
		Number:       int(r.Number),
		StartedAt:    r.StartedAt.UTC(),
		Finished:     r.Finished,
		StatusCode:   int(r.StatusCode),
		Error:        r.Error,
		ResponseBody: r.ResponseBody,
	}
	if r.DurationMs != nil {
		a.Duration = time.Duration(*r.DurationMs) * time.Millisecond
	}
	return a
}

// wholeListPage reads the page at offset of a scope's unfiltered list of
// total rows, newest first: from the newest end while the page is in the
// list's first half, else from the oldest end, turned round, so that the
// index-only scan that finds the page skips at most half the list.
func wholeListPage[T any](total, offset int64, limit int32, fromNewest, fromOldest func(skip int64, n int32) ([]T, error)) ([]T, error) {
	switch {
	case offset >= total:
		return nil, nil
	case offset*2 < total:
		return fromNewest(offset, limit)
	}
	rows, err := fromOldest(max(0, total-offset-int64(limit)), int32(min(int64(limit), total-offset)))
	slices.Reverse(rows)
	return rows, err
}
