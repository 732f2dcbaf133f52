package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/services/ordering/es2plus"
	"github.com/esimplatform/esim/services/ordering/postgres/db"
)

// The ES2+ provider's records (Records), on the lock holder's connection
// as the sandbox's are.
// errReservationMoved: a reservation was not in the state the step
// expects; someone else moved it, which the order's lock rules out.
var errReservationMoved = errors.New("the reservation is not in the state this step expects")

// Reservations implements es2plus.Store.
func (r *Records) Reservations(ctx context.Context, orderID uuid.UUID) ([]es2plus.Reservation, error) {
	rows, err := r.q.ES2PlusReservations(ctx, orderID)
	if err != nil {
		return nil, fmt.Errorf("select reservations: %w", err)
	}
	out := make([]es2plus.Reservation, len(rows))
	for i, r := range rows {
		out[i] = reservation(r)
	}
	return out, nil
}

// RequestReservation implements es2plus.Store.
func (r *Records) RequestReservation(ctx context.Context, orderID uuid.UUID, position int32, profileType, callID string) error {
	if err := r.q.RequestES2PlusReservation(ctx, db.RequestES2PlusReservationParams{OrderID: orderID, Position: position, ProfileType: profileType, CallID: callID}); err != nil {
		return fmt.Errorf("insert requested reservation: %w", err)
	}
	return nil
}

// AddReservation implements es2plus.Store.
func (r *Records) AddReservation(ctx context.Context, orderID uuid.UUID, position int32, iccid string) error {
	n, err := r.q.AddES2PlusReservation(ctx, db.AddES2PlusReservationParams{OrderID: orderID, Position: position, Iccid: iccid})
	return affectedOne(n, err, "record reservation")
}

// ForgetRequest implements es2plus.Store.
func (r *Records) ForgetRequest(ctx context.Context, orderID uuid.UUID, position int32) error {
	n, err := r.q.ForgetES2PlusRequest(ctx, db.ForgetES2PlusRequestParams{OrderID: orderID, Position: position})
	return affectedOne(n, err, "forget requested reservation")
}

// LearnCancelICCID implements es2plus.Store.
func (r *Records) LearnCancelICCID(ctx context.Context, orderID uuid.UUID, position int32, iccid string) error {
	n, err := r.q.LearnES2PlusCancelICCID(ctx, db.LearnES2PlusCancelICCIDParams{OrderID: orderID, Position: position, Iccid: iccid})
	return affectedOne(n, err, "record the ICCID of a cancellation")
}

// ReleaseReservation implements es2plus.Store.
func (r *Records) ReleaseReservation(ctx context.Context, orderID uuid.UUID, position int32, matchingID, smdpAddress string) error {
	n, err := r.q.ReleaseES2PlusReservation(ctx, db.ReleaseES2PlusReservationParams{OrderID: orderID, Position: position, MatchingID: matchingID, SmdpAddress: smdpAddress})
	return affectedOne(n, err, "release reservation")
}

// MarkCancelDue implements es2plus.Store: the reservations and the
// canceller's job in one transaction, the job only when a profile became
// due (a failing order resumed again marks none).
func (r *Records) MarkCancelDue(ctx context.Context, orderID uuid.UUID, reason string) ([]es2plus.Reservation, error) {
	var out []es2plus.Reservation
	err := pgx.BeginFunc(ctx, r.conn, func(tx pgx.Tx) error {
		rows, err := r.q.WithTx(tx).MarkES2PlusCancelDue(ctx, db.MarkES2PlusCancelDueParams{OrderID: orderID, Reason: reason})
		if err != nil {
			return fmt.Errorf("mark reservations due for cancellation: %w", err)
		}
		out = make([]es2plus.Reservation, len(rows))
		for i, r := range rows {
			out[i] = reservation(db.ES2PlusReservationsRow(r))
		}
		if len(rows) == 0 {
			return nil
		}
		return r.jobs.CancelProfilesTx(ctx, tx, orderID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// FinishCancellation implements es2plus.Store.
func (r *Records) FinishCancellation(ctx context.Context, orderID uuid.UUID, position int32, state es2plus.ReservationState, lastError string) error {
	if state != es2plus.Cancelled && state != es2plus.CancelRefused {
		return fmt.Errorf("finish a cancellation as %q: want cancelled or cancel_refused", state)
	}
	var last *string
	if lastError != "" {
		last = &lastError
	}
	n, err := r.q.FinishES2PlusCancellation(ctx, db.FinishES2PlusCancellationParams{OrderID: orderID, Position: position, State: string(state), LastError: last})
	return affectedOne(n, err, "finish cancellation")
}

// RetryCancellation implements es2plus.Store.
func (r *Records) RetryCancellation(ctx context.Context, orderID uuid.UUID, position int32, lastError string) error {
	n, err := r.q.RetryES2PlusCancellation(ctx, db.RetryES2PlusCancellationParams{OrderID: orderID, Position: position, LastError: lastError})
	return affectedOne(n, err, "retry cancellation")
}

func affectedOne(n int64, err error, doing string) error {
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", doing, err)
	case n != 1:
		return fmt.Errorf("%s: %w", doing, errReservationMoved)
	}
	return nil
}

func reservation(r db.ES2PlusReservationsRow) es2plus.Reservation {
	out := es2plus.Reservation{
		OrderID: r.OrderID, Position: r.Position, State: es2plus.ReservationState(r.State),
		CancelAttempts: r.CancelAttempts,
	}
	if r.Iccid != nil {
		out.ICCID = *r.Iccid
	}
	if r.CallID != nil {
		out.CallID = *r.CallID
	}
	if r.ProfileType != nil {
		out.ProfileType = *r.ProfileType
	}
	if r.MatchingID != nil {
		out.MatchingID = *r.MatchingID
	}
	if r.SmdpAddress != nil {
		out.SMDPAddress = *r.SmdpAddress
	}
	if r.LastError != nil {
		out.LastError = *r.LastError
	}
	return out
}
