package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/esimplatform/esim/services/accounts"
	"github.com/esimplatform/esim/services/accounts/postgres/db"
)

// InsertSignUp implements accounts.UserStore.
func (s *Store) InsertSignUp(ctx context.Context, a accounts.Account, owner accounts.UserRecord, sess accounts.SessionRecord) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		if err := insertAccount(ctx, q, a); err != nil {
			return err
		}
		if err := insertUser(ctx, q, owner); err != nil {
			return err
		}
		return insertSession(ctx, q, sess)
	})
}

// User implements accounts.UserStore.
func (s *Store) User(ctx context.Context, id uuid.UUID) (accounts.UserRecord, error) {
	row, err := s.q.GetUser(ctx, id)
	if err != nil {
		return accounts.UserRecord{}, notFound(err, "select user")
	}
	return userRecord(row), nil
}

// UserByEmail implements accounts.UserStore.
func (s *Store) UserByEmail(ctx context.Context, email string) (accounts.UserRecord, error) {
	row, err := s.q.UserByEmail(ctx, email)
	if err != nil {
		return accounts.UserRecord{}, notFound(err, "select user by email")
	}
	return userRecord(row), nil
}

// InsertSession implements accounts.UserStore.
func (s *Store) InsertSession(ctx context.Context, sess accounts.SessionRecord) error {
	return insertSession(ctx, s.q, sess)
}

// SessionByHash implements accounts.UserStore.
func (s *Store) SessionByHash(ctx context.Context, tokenHash []byte) (accounts.StoredSession, error) {
	row, err := s.q.SessionByHash(ctx, tokenHash)
	if err != nil {
		return accounts.StoredSession{}, notFound(err, "select session")
	}
	return accounts.StoredSession{
		Session: accounts.Session{
			User:      userRecord(row.User).User,
			Account:   account(row.Account),
			ExpiresAt: row.ExpiresAt.UTC(),
		},
		TokenHash: row.TokenHash,
		RevokedAt: utc(row.RevokedAt),
	}, nil
}

// RevokeSession implements accounts.UserStore.
func (s *Store) RevokeSession(ctx context.Context, tokenHash []byte, at time.Time) error {
	if err := s.q.RevokeSession(ctx, db.RevokeSessionParams{TokenHash: tokenHash, RevokedAt: at}); err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// RevokeSessions implements accounts.UserStore.
func (s *Store) RevokeSessions(ctx context.Context, userID uuid.UUID, at time.Time) error {
	if err := s.q.RevokeUserSessions(ctx, db.RevokeUserSessionsParams{UserID: userID, RevokedAt: at}); err != nil {
		return fmt.Errorf("revoke sessions of user: %w", err)
	}
	return nil
}

// ChangePassword implements accounts.UserStore.
func (s *Store) ChangePassword(ctx context.Context, userID uuid.UUID, oldHash, newHash string, at time.Time, sess accounts.SessionRecord) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		n, err := q.SetPassword(ctx, db.SetPasswordParams{ID: userID, OldHash: oldHash, NewHash: newHash, ChangedAt: at})
		if err != nil {
			return fmt.Errorf("update password: %w", err)
		}
		if n == 0 {
			return accounts.ErrNotFound
		}
		if err := q.RevokeUserSessions(ctx, db.RevokeUserSessionsParams{UserID: userID, RevokedAt: at}); err != nil {
			return fmt.Errorf("revoke sessions of user: %w", err)
		}
		return insertSession(ctx, q, sess)
	})
}

// InsertInvite implements accounts.UserStore.
func (s *Store) InsertInvite(ctx context.Context, inv accounts.InviteRecord) error {
	err := s.q.InsertInvite(ctx, db.InsertInviteParams{
		TokenHash: inv.TokenHash,
		AccountID: inv.AccountID,
		Email:     inv.Email,
		CreatedAt: inv.CreatedAt,
		ExpiresAt: inv.ExpiresAt,
	})
	return parentNotFound(err, "insert invite")
}

// Invite implements accounts.UserStore.
func (s *Store) Invite(ctx context.Context, tokenHash []byte) (accounts.StoredInvite, error) {
	row, err := s.q.InviteByHash(ctx, tokenHash)
	if err != nil {
		return accounts.StoredInvite{}, notFound(err, "select invite")
	}
	return accounts.StoredInvite{
		InviteRecord: accounts.InviteRecord{
			TokenHash: row.TokenHash,
			AccountID: row.AccountID,
			Email:     row.Email,
			CreatedAt: row.CreatedAt.UTC(),
			ExpiresAt: row.ExpiresAt.UTC(),
		},
		UsedAt: utc(row.UsedAt),
	}, nil
}

// AcceptInvite implements accounts.UserStore. The invite's row lock is
// taken first and held to the commit: a second accept of the token waits
// for it, then reads the invite as used.
func (s *Store) AcceptInvite(ctx context.Context, a accounts.Acceptance) (accounts.User, error) {
	var user accounts.User
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := s.q.WithTx(tx)
		inv, err := q.InviteForUpdate(ctx, a.TokenHash)
		if err != nil {
			return notFound(err, "select invite")
		}
		if inv.UsedAt != nil || !a.At.Before(inv.ExpiresAt) {
			return accounts.ErrNotFound
		}
		existing, err := q.UserByEmailForUpdate(ctx, inv.Email)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			user = accounts.User{ID: a.NewUserID, AccountID: inv.AccountID, Email: inv.Email, CreatedAt: a.At, PasswordChangedAt: a.At}
			if err := insertUser(ctx, q, accounts.UserRecord{User: user, PasswordHash: a.PasswordHash}); err != nil {
				return err
			}
		case err != nil:
			return fmt.Errorf("select user by email: %w", err)
		case existing.AccountID != inv.AccountID:
			// Signed up to another account after the invite was made.
			return accounts.ErrEmailTaken
		default:
			// The row is locked, so the hash read is the one replaced.
			if _, err := q.SetPassword(ctx, db.SetPasswordParams{ID: existing.ID, OldHash: existing.PasswordHash, NewHash: a.PasswordHash, ChangedAt: a.At}); err != nil {
				return fmt.Errorf("update password: %w", err)
			}
			if err := q.RevokeUserSessions(ctx, db.RevokeUserSessionsParams{UserID: existing.ID, RevokedAt: a.At}); err != nil {
				return fmt.Errorf("revoke sessions of user: %w", err)
			}
			user = userRecord(existing).User
			user.PasswordChangedAt = a.At
		}
		if err := q.UseInvite(ctx, db.UseInviteParams{TokenHash: a.TokenHash, UsedAt: a.At}); err != nil {
			return fmt.Errorf("mark invite used: %w", err)
		}
		sess := a.Session
		sess.UserID = user.ID
		return insertSession(ctx, q, sess)
	})
	if err != nil {
		return accounts.User{}, err
	}
	return user, nil
}

// insertUser reports a taken email as accounts.ErrEmailTaken.
func insertUser(ctx context.Context, q *db.Queries, u accounts.UserRecord) error {
	n, err := q.InsertUser(ctx, db.InsertUserParams{
		ID:                u.User.ID,
		AccountID:         u.User.AccountID,
		Email:             u.User.Email,
		PasswordHash:      u.PasswordHash,
		CreatedAt:         u.User.CreatedAt,
		PasswordChangedAt: u.User.PasswordChangedAt,
	})
	if err != nil {
		return fmt.Errorf("insert user: %w", err)
	}
	if n == 0 {
		return accounts.ErrEmailTaken
	}
	return nil
}

func insertSession(ctx context.Context, q *db.Queries, sess accounts.SessionRecord) error {
	err := q.InsertSession(ctx, db.InsertSessionParams{
		TokenHash: sess.TokenHash,
		UserID:    sess.UserID,
		CreatedAt: sess.CreatedAt,
		ExpiresAt: sess.ExpiresAt,
	})
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	return nil
}

func userRecord(r db.User) accounts.UserRecord {
	return accounts.UserRecord{
		User: accounts.User{
			ID:                r.ID,
			AccountID:         r.AccountID,
			Email:             r.Email,
			CreatedAt:         r.CreatedAt.UTC(),
			PasswordChangedAt: r.PasswordChangedAt.UTC(),
		},
		PasswordHash: r.PasswordHash,
	}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
