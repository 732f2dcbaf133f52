package accounts

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
)

// Self-serve access: the users of an account listing and removing each
// other in the portal, password resets an operator hands out, and a
// sandbox-only account asking for live.

// DefaultResetTTL is how long a password reset link works: long enough
// for an operator's message to be read, short since it signs in whoever
// holds it.
const DefaultResetTTL = 24 * time.Hour

const resetTokenPrefix = "pr_"

// ErrLastUser refuses to remove an account's last user, which would leave
// the account with nobody to sign in to it.
var ErrLastUser = errors.New("the account's last user cannot be removed; invite someone else first")

// ErrResetNotFound is ErrNotFound for a reset token, worded for the person
// who followed the link.
var ErrResetNotFound error = notFound("password reset link not found, used or expired")

// InviteInfo is whom an unspent invite is for.
type InviteInfo struct {
	AccountID   uuid.UUID
	AccountName string
	Email       string
	ExpiresAt   time.Time
	// ExistingUser: the email is already a user of the account, and
	// accepting replaces their password.
	ExistingUser bool
}

// IssuedReset is a new reset's token, returned exactly once.
type IssuedReset struct {
	Token     Secret
	ExpiresAt time.Time
	User      User
}

// ResetRecord is a password reset as stored: the token's hash only.
type ResetRecord struct {
	TokenHash []byte
	UserID    uuid.UUID
	CreatedAt time.Time
	ExpiresAt time.Time
}

// StoredReset is a reset read back by its token's hash, with whom it is for.
type StoredReset struct {
	ResetRecord
	UsedAt      *time.Time
	Email       string
	AccountName string
}

// ResetInfo is whom an unspent reset is for.
type ResetInfo struct {
	Email       string
	AccountName string
	ExpiresAt   time.Time
}

// LiveRequest is an account's request for live.
type LiveRequest struct {
	Account     Account
	RequestedBy string
	RequestedAt time.Time
}

// AccessStore persists what self-serve access adds, with the contract of
// Store.
type AccessStore interface {
	// ListUsers returns the account's users, oldest first (none for an
	// unknown account).
	ListUsers(ctx context.Context, accountID uuid.UUID) ([]User, error)
	// RemoveUser deletes the user and their sessions in one transaction
	// holding the account's row lock: ErrNotFound unless the user belongs
	// to the account, ErrLastUser when they are its only user. Either
	// changes nothing.
	RemoveUser(ctx context.Context, accountID, userID uuid.UUID) error
	// InsertReset returns ErrNotFound when the user does not exist.
	InsertReset(ctx context.Context, r ResetRecord) error
	// Reset returns ErrNotFound when no reset has this token hash, and
	// used and expired ones like any other.
	Reset(ctx context.Context, tokenHash []byte) (StoredReset, error)
	// SpendReset, in one transaction holding the reset's row lock, marks
	// it used, sets the user's password, ends every session of the user
	// and inserts s (its UserID filled in). ErrNotFound, changing
	// nothing, when the reset is unknown, used or expires at or before at.
	SpendReset(ctx context.Context, tokenHash []byte, passwordHash string, at time.Time, s SessionRecord) (User, error)
	// InsertLiveRequest keeps an existing request of the account as it
	// is; ErrNotFound when the account does not exist.
	InsertLiveRequest(ctx context.Context, accountID uuid.UUID, by string, at time.Time) error
	// LiveRequest returns ErrNotFound when the account has made none.
	LiveRequest(ctx context.Context, accountID uuid.UUID) (LiveRequest, error)
	// ListLiveRequests returns the requests of accounts without live,
	// oldest first.
	ListLiveRequests(ctx context.Context) ([]LiveRequest, error)
}

// GetInvite answers whom an unspent invite token is for, or
// ErrInviteNotFound: the portal's page says it before asking for a
// password, and never asks for one for a dead link.
func (s *Service) GetInvite(ctx context.Context, token string) (InviteInfo, error) {
	if !wellFormedToken(inviteTokenPrefix, token) {
		return InviteInfo{}, ErrInviteNotFound
	}
	hash := hashSecret(token)
	inv, err := s.store.Invite(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return InviteInfo{}, ErrInviteNotFound
	}
	if err != nil {
		return InviteInfo{}, fmt.Errorf("get invite: %w", err)
	}
	if subtle.ConstantTimeCompare(inv.TokenHash, hash) != 1 || inv.UsedAt != nil || !input.Now(s.now).Before(inv.ExpiresAt) {
		return InviteInfo{}, ErrInviteNotFound
	}
	a, err := s.store.Account(ctx, inv.AccountID)
	if err != nil {
		return InviteInfo{}, fmt.Errorf("get invite: account %s: %w", inv.AccountID, err)
	}
	info := InviteInfo{AccountID: a.ID, AccountName: a.Name, Email: inv.Email, ExpiresAt: inv.ExpiresAt}
	switch existing, err := s.store.UserByEmail(ctx, inv.Email); {
	case err == nil:
		if existing.User.AccountID != inv.AccountID {
			// Signed up elsewhere since: accepting can only fail.
			return InviteInfo{}, ErrInviteNotFound
		}
		info.ExistingUser = true
	case !errors.Is(err, ErrNotFound):
		return InviteInfo{}, fmt.Errorf("get invite: look up user: %w", err)
	}
	return info, nil
}

// ListUsers answers the account's users, oldest first; ErrNotFound for an
// unknown account.
func (s *Service) ListUsers(ctx context.Context, accountID uuid.UUID) ([]User, error) {
	if _, err := s.store.Account(ctx, accountID); err != nil {
		return nil, fmt.Errorf("list users of account %s: %w", accountID, err)
	}
	users, err := s.store.ListUsers(ctx, accountID)
	if err != nil {
		return nil, fmt.Errorf("list users of account %s: %w", accountID, err)
	}
	return users, nil
}

// RemoveUser deletes a user of the account and ends their sessions; a
// user of another account is ErrNotFound, the account's last user
// ErrLastUser.
func (s *Service) RemoveUser(ctx context.Context, accountID, userID uuid.UUID) error {
	// Unwrapped: ErrLastUser's words are the whole answer, and callers
	// already say which user they removed.
	return s.store.RemoveUser(ctx, accountID, userID)
}

// CreatePasswordReset makes a one-time token with which the user of email
// chooses a new password. An unknown email is ErrNotFound: only operators
// ask, and they need to know.
func (s *Service) CreatePasswordReset(ctx context.Context, email string) (IssuedReset, error) {
	email, err := validEmail("email", email)
	if err != nil {
		return IssuedReset{}, err
	}
	rec, err := s.store.UserByEmail(ctx, email)
	if err != nil {
		return IssuedReset{}, fmt.Errorf("password reset for %s: %w", email, err)
	}
	token, hash := newToken(resetTokenPrefix)
	now := input.Now(s.now)
	r := ResetRecord{TokenHash: hash, UserID: rec.User.ID, CreatedAt: now, ExpiresAt: now.Add(s.resetTTL)}
	if err := s.store.InsertReset(ctx, r); err != nil {
		return IssuedReset{}, fmt.Errorf("password reset for user %s: %w", rec.User.ID, err)
	}
	return IssuedReset{Token: token, ExpiresAt: r.ExpiresAt, User: rec.User}, nil
}

// GetPasswordReset answers whom an unspent reset token is for, or
// ErrResetNotFound.
func (s *Service) GetPasswordReset(ctx context.Context, token string) (ResetInfo, error) {
	r, _, err := s.liveReset(ctx, token)
	if err != nil {
		return ResetInfo{}, err
	}
	return ResetInfo{Email: r.Email, AccountName: r.AccountName, ExpiresAt: r.ExpiresAt}, nil
}

// ResetPassword spends a reset token with a new password, ends every
// session of its user (whoever knew the old password may be signed in)
// and signs them in. As for invites, a dead token is answered before the
// password is hashed.
func (s *Service) ResetPassword(ctx context.Context, token, password string) (IssuedSession, error) {
	if !wellFormedToken(resetTokenPrefix, token) {
		return IssuedSession{}, ErrResetNotFound
	}
	if err := validPassword("password", password); err != nil {
		return IssuedSession{}, err
	}
	_, hash, err := s.liveReset(ctx, token)
	if err != nil {
		return IssuedSession{}, err
	}
	now := input.Now(s.now)
	sessionToken, sess := s.newSession(uuid.Nil, now)
	user, err := s.store.SpendReset(ctx, hash, s.hashPassword(password), now, sess)
	if errors.Is(err, ErrNotFound) {
		return IssuedSession{}, ErrResetNotFound
	}
	if err != nil {
		return IssuedSession{}, fmt.Errorf("reset password: %w", err)
	}
	a, err := s.store.Account(ctx, user.AccountID)
	if err != nil {
		return IssuedSession{}, fmt.Errorf("reset password: account of user %s: %w", user.ID, err)
	}
	return IssuedSession{Session: Session{User: user, Account: a, ExpiresAt: sess.ExpiresAt}, Token: sessionToken}, nil
}

// liveReset resolves an unspent, unexpired reset from its token.
func (s *Service) liveReset(ctx context.Context, token string) (StoredReset, []byte, error) {
	if !wellFormedToken(resetTokenPrefix, token) {
		return StoredReset{}, nil, ErrResetNotFound
	}
	hash := hashSecret(token)
	r, err := s.store.Reset(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return StoredReset{}, nil, ErrResetNotFound
	}
	if err != nil {
		return StoredReset{}, nil, fmt.Errorf("look up password reset: %w", err)
	}
	// As in session: never a variable-time comparison decides.
	if subtle.ConstantTimeCompare(r.TokenHash, hash) != 1 || r.UsedAt != nil || !input.Now(s.now).Before(r.ExpiresAt) {
		return StoredReset{}, nil, ErrResetNotFound
	}
	return r, hash, nil
}

// RequestLive records that a user of the account asks for live. Asking
// again, or for an account with live, answers the request as it stands
// (none is made for an account with live: ErrConflict on "account").
func (s *Service) RequestLive(ctx context.Context, accountID, userID uuid.UUID) (LiveRequest, error) {
	a, err := s.store.Account(ctx, accountID)
	if err != nil {
		return LiveRequest{}, fmt.Errorf("request live for account %s: %w", accountID, err)
	}
	if a.LiveEnabled {
		return LiveRequest{}, &ConflictError{Field: "account", Reason: "already has live"}
	}
	u, err := s.store.User(ctx, userID)
	if errors.Is(err, ErrNotFound) || (err == nil && u.User.AccountID != accountID) {
		return LiveRequest{}, invalid("user_id", "must be a user of the account")
	}
	if err != nil {
		return LiveRequest{}, fmt.Errorf("request live for account %s: look up user: %w", accountID, err)
	}
	if err := s.store.InsertLiveRequest(ctx, accountID, u.User.Email, input.Now(s.now)); err != nil {
		return LiveRequest{}, fmt.Errorf("request live for account %s: %w", accountID, err)
	}
	return s.GetLiveRequest(ctx, accountID)
}

// GetLiveRequest answers the account's request for live, or ErrNotFound.
func (s *Service) GetLiveRequest(ctx context.Context, accountID uuid.UUID) (LiveRequest, error) {
	r, err := s.store.LiveRequest(ctx, accountID)
	if err != nil {
		return LiveRequest{}, fmt.Errorf("live request of account %s: %w", accountID, err)
	}
	return r, nil
}

// ListLiveRequests answers the requests not yet granted, oldest first.
func (s *Service) ListLiveRequests(ctx context.Context) ([]LiveRequest, error) {
	rs, err := s.store.ListLiveRequests(ctx)
	if err != nil {
		return nil, fmt.Errorf("list live requests: %w", err)
	}
	return rs, nil
}
