package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/services/accounts"
	"github.com/esimplatform/esim/services/accounts/postgres/db"
)

// ListUsers implements accounts.AccessStore.
func (s *Store) ListUsers(ctx context.Context, accountID uuid.UUID) ([]accounts.User, error) {
	rows, err := s.q.ListUsers(ctx, accountID)
	if err != nil {
		return nil, fmt.Errorf("select users: %w", err)
	}
	users := make([]accounts.User, len(rows))
	for i, r := range rows {
		users[i] = userRecord(r).User
	}
	return users, nil
}

// RemoveUser implements accounts.AccessStore.
func (s *Store) RemoveUser(ctx context.Context, accountID, userID uuid.UUID) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if _, err := q.LockAccount(ctx, accountID); err != nil {
			return notFound(err, "lock account")
		}
		u, err := q.GetUser(ctx, userID)
		if err != nil {
			return notFound(err, "select user")
		}
		if u.AccountID != accountID {
			return accounts.ErrNotFound
		}
		n, err := q.CountUsers(ctx, accountID)
		if err != nil {
			return fmt.Errorf("count users: %w", err)
		}
		if n <= 1 {
			return accounts.ErrLastUser
		}
		if err := q.DeleteUserSessions(ctx, userID); err != nil {
			return fmt.Errorf("delete sessions of user: %w", err)
		}
		if _, err := q.DeleteUser(ctx, db.DeleteUserParams{ID: userID, AccountID: accountID}); err != nil {
			return fmt.Errorf("delete user: %w", err)
		}
		return nil
	})
}

// InsertReset implements accounts.AccessStore.
func (s *Store) InsertReset(ctx context.Context, r accounts.ResetRecord) error {
	err := s.q.InsertPasswordReset(ctx, db.InsertPasswordResetParams{
		TokenHash: r.TokenHash, UserID: r.UserID, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt,
	})
	return parentNotFound(err, "insert password reset")
}

// Reset implements accounts.AccessStore.
func (s *Store) Reset(ctx context.Context, tokenHash []byte) (accounts.StoredReset, error) {
	row, err := s.q.PasswordResetByHash(ctx, tokenHash)
	if err != nil {
		return accounts.StoredReset{}, notFound(err, "select password reset")
	}
	return accounts.StoredReset{
		ResetRecord: accounts.ResetRecord{
			TokenHash: row.TokenHash, UserID: row.UserID, CreatedAt: row.CreatedAt.UTC(), ExpiresAt: row.ExpiresAt.UTC(),
		},
		UsedAt:      utc(row.UsedAt),
		Email:       row.Email,
		AccountName: row.AccountName,
	}, nil
}

// SpendReset implements accounts.AccessStore. The reset's row lock is taken
// first and held to the commit: a second use of the token waits for it,
// then reads the reset as used.
func (s *Store) SpendReset(ctx context.Context, tokenHash []byte, passwordHash string, at time.Time, sess accounts.SessionRecord) (accounts.User, error) {
	var user accounts.User
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		r, err := q.PasswordResetForUpdate(ctx, tokenHash)
		if err != nil {
			return notFound(err, "select password reset")
		}
		if r.UsedAt != nil || !at.Before(r.ExpiresAt) {
			return accounts.ErrNotFound
		}
		if err := q.ForcePassword(ctx, db.ForcePasswordParams{ID: r.UserID, NewHash: passwordHash, ChangedAt: at}); err != nil {
			return fmt.Errorf("update password: %w", err)
		}
		if err := q.RevokeUserSessions(ctx, db.RevokeUserSessionsParams{UserID: r.UserID, RevokedAt: at}); err != nil {
			return fmt.Errorf("revoke sessions of user: %w", err)
		}
		if err := q.UsePasswordReset(ctx, db.UsePasswordResetParams{TokenHash: tokenHash, UsedAt: at}); err != nil {
			return fmt.Errorf("mark password reset used: %w", err)
		}
		u, err := q.GetUser(ctx, r.UserID)
		if err != nil {
			return fmt.Errorf("select user: %w", err)
		}
		user = userRecord(u).User
		sess.UserID = user.ID
		return insertSession(ctx, q, sess)
	})
	if err != nil {
		return accounts.User{}, err
	}
	return user, nil
}

// InsertLiveRequest implements accounts.AccessStore.
func (s *Store) InsertLiveRequest(ctx context.Context, accountID uuid.UUID, by string, at time.Time) error {
	err := s.q.InsertLiveRequest(ctx, db.InsertLiveRequestParams{AccountID: accountID, RequestedBy: by, RequestedAt: at})
	return parentNotFound(err, "insert live request")
}

// LiveRequest implements accounts.AccessStore.
func (s *Store) LiveRequest(ctx context.Context, accountID uuid.UUID) (accounts.LiveRequest, error) {
	row, err := s.q.GetLiveRequest(ctx, accountID)
	if err != nil {
		return accounts.LiveRequest{}, notFound(err, "select live request")
	}
	return accounts.LiveRequest{Account: account(row.Account), RequestedBy: row.RequestedBy, RequestedAt: row.RequestedAt.UTC()}, nil
}

// ListLiveRequests implements accounts.AccessStore.
func (s *Store) ListLiveRequests(ctx context.Context) ([]accounts.LiveRequest, error) {
	rows, err := s.q.ListLiveRequests(ctx)
	if err != nil {
		return nil, fmt.Errorf("select live requests: %w", err)
	}
	out := make([]accounts.LiveRequest, len(rows))
	for i, r := range rows {
		out[i] = accounts.LiveRequest{Account: account(r.Account), RequestedBy: r.RequestedBy, RequestedAt: r.RequestedAt.UTC()}
	}
	return out, nil
}
