package accounts

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
	"github.com/esimplatform/esim/services/accounts/argon2id"
)

// The portal's users sign in with an email and a password; what a signed-in
// browser holds is a session token. Passwords are stored as Argon2id
// hashes, slow on purpose since people choose guessable ones. Session and
// invite tokens carry 256 random bits, so, like API keys, they are stored
// as plain SHA-256 hashes (hashSecret) and looked up by index.

// Defaults and bounds of the portal's credentials.
const (
	DefaultSessionTTL = 12 * time.Hour
	DefaultInviteTTL  = 72 * time.Hour
	// NIST SP 800-63B's floor is 8; 10 leaves the shortest dictionary
	// words out. The ceiling only bounds the work of one hash.
	MinPasswordLength = 10
	MaxPasswordLength = 128
	// RFC 5321's limit on a forward path, less the angle brackets.
	MaxEmailLength = 254
)

// Token prefixes, so that a leaked token is recognisable (to people and
// secret scanners) for what it is.
const (
	sessionTokenPrefix = "ps_"
	inviteTokenPrefix  = "pi_"
	tokenRandomBytes   = 32
)

// dummyPasswordHash is verified against when a sign-in names an unknown
// email, so that the answer takes as long as for a wrong password. Its
// parameters are those of every new hash (a test holds them); the password
// it was made from is of no use to anyone.
const dummyPasswordHash = "$argon2id$v=19$m=19456,t=2,p=1$f5mJKxyS54AScUbmkBKqUQ$EFjygYrRD1SLaSC9NmhjwrzW6p8xZRJZhkQ1Wbin+5I"

// User is a person who signs in to the portal on behalf of an account.
type User struct {
	ID        uuid.UUID
	AccountID uuid.UUID
	// Email is lower-cased: addresses are compared without case.
	Email             string
	CreatedAt         time.Time
	PasswordChangedAt time.Time
}

// Session is a signed-in user as the portal sees them.
type Session struct {
	User      User
	Account   Account
	ExpiresAt time.Time
}

// IssuedSession is a new session with its token, returned exactly once.
type IssuedSession struct {
	Session Session
	Token   Secret
}

// IssuedInvite is a new invite's token, returned exactly once, and when it
// stops being accepted.
type IssuedInvite struct {
	Token     Secret
	ExpiresAt time.Time
}

// UserRecord is a stored user with their password hash.
type UserRecord struct {
	User         User
	PasswordHash string
}

// SessionRecord is a session as stored: the token's hash, never the token.
type SessionRecord struct {
	TokenHash []byte
	UserID    uuid.UUID
	CreatedAt time.Time
	ExpiresAt time.Time
}

// StoredSession is a session read back by its token's hash.
type StoredSession struct {
	Session   Session
	TokenHash []byte
	// RevokedAt is nil while the session has not been ended.
	RevokedAt *time.Time
}

// InviteRecord is an invite as stored: the token's hash, never the token.
type InviteRecord struct {
	TokenHash []byte
	AccountID uuid.UUID
	Email     string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// StoredInvite is an invite read back by its token's hash.
type StoredInvite struct {
	InviteRecord
	// UsedAt is nil while the invite has not been accepted.
	UsedAt *time.Time
}

// Acceptance is what accepting an invite writes.
type Acceptance struct {
	TokenHash []byte
	At        time.Time
	// NewUserID is the id of the user created when the invite's email has
	// none yet.
	NewUserID    uuid.UUID
	PasswordHash string
	// Session is the accepting user's first session; the store fills in
	// its UserID.
	Session SessionRecord
}

// UserStore persists the portal's users, sessions and invites, with the
// contract of Store.
type UserStore interface {
	// InsertSignUp inserts the account, its owner and the owner's first
	// session in one transaction: ErrEmailTaken leaves none of them.
	InsertSignUp(ctx context.Context, a Account, owner UserRecord, s SessionRecord) error
	// User returns ErrNotFound for an unknown id.
	User(ctx context.Context, id uuid.UUID) (UserRecord, error)
	// UserByEmail returns ErrNotFound for an email no user has.
	UserByEmail(ctx context.Context, email string) (UserRecord, error)
	// InsertSession stores a session of an existing user.
	InsertSession(ctx context.Context, s SessionRecord) error
	// SessionByHash returns ErrNotFound when no session has this token
	// hash, and expired and revoked sessions like any other.
	SessionByHash(ctx context.Context, tokenHash []byte) (StoredSession, error)
	// RevokeSession ends one session (keeping an earlier revocation time);
	// RevokeSessions every session of the user not yet ended.
	RevokeSession(ctx context.Context, tokenHash []byte, at time.Time) error
	RevokeSessions(ctx context.Context, userID uuid.UUID, at time.Time) error
	// ChangePassword, in one transaction, replaces the user's password
	// hash while it is still oldHash, ends every session of the user and
	// inserts s. ErrNotFound, changing nothing, when the hash is no longer
	// oldHash (changed meanwhile).
	ChangePassword(ctx context.Context, userID uuid.UUID, oldHash, newHash string, at time.Time, s SessionRecord) error
	// InsertInvite returns ErrNotFound when the account does not exist.
	InsertInvite(ctx context.Context, inv InviteRecord) error
	// Invite returns ErrNotFound when no invite has this token hash, and
	// used and expired invites like any other.
	Invite(ctx context.Context, tokenHash []byte) (StoredInvite, error)
	// AcceptInvite spends the invite, in one transaction that holds its
	// row locked so a token is spent once: it creates the invite's user
	// or, when the email is already a user of the invite's account, sets
	// that user's password and ends their sessions; and it inserts the
	// session. ErrNotFound when the invite is unknown, used, or expires at
	// or before a.At; ErrEmailTaken when the email is by then a user of
	// another account. Either changes nothing.
	AcceptInvite(ctx context.Context, a Acceptance) (User, error)
}

// SignUp is the input of SignUp.
type SignUp struct {
	Email       string
	Password    string
	AccountName string
	Currency    Currency // empty means DefaultCurrency
}

// SignUp creates a partner account, sandbox only until an operator enables
// live, with its owner, and signs the owner in. An email already
// registered is ErrEmailTaken.
func (s *Service) SignUp(ctx context.Context, in SignUp) (IssuedSession, error) {
	email, err := validEmail("email", in.Email)
	if err != nil {
		return IssuedSession{}, err
	}
	if err := validPassword("password", in.Password); err != nil {
		return IssuedSession{}, err
	}
	a, err := s.newAccount(NewAccount{Name: in.AccountName, Currency: in.Currency}, "account_name", false)
	if err != nil {
		return IssuedSession{}, err
	}
	userID, err := uuid.NewV7()
	if err != nil {
		return IssuedSession{}, fmt.Errorf("new user id: %w", err)
	}
	now := input.Now(s.now)
	owner := UserRecord{
		User:         User{ID: userID, AccountID: a.ID, Email: email, CreatedAt: now, PasswordChangedAt: now},
		PasswordHash: s.hashPassword(in.Password),
	}
	token, rec := s.newSession(userID, now)
	if err := s.store.InsertSignUp(ctx, a, owner, rec); err != nil {
		return IssuedSession{}, fmt.Errorf("sign up: %w", err)
	}
	return IssuedSession{Session: Session{User: owner.User, Account: a, ExpiresAt: rec.ExpiresAt}, Token: token}, nil
}

// SignIn starts a session for the user with this email and password. A
// wrong password and an unknown (or malformed) email are the same
// ErrWrongCredentials, after the same work. Throttling attempts is the
// portal's.
func (s *Service) SignIn(ctx context.Context, email, password string) (IssuedSession, error) {
	email, err := validEmail("email", email)
	var rec UserRecord
	if err == nil {
		rec, err = s.store.UserByEmail(ctx, email)
	}
	if _, malformed := errors.AsType[*ValidationError](err); malformed || errors.Is(err, ErrNotFound) {
		_, _ = argon2id.Verify(password, dummyPasswordHash)
		return IssuedSession{}, ErrWrongCredentials
	}
	if err != nil {
		return IssuedSession{}, fmt.Errorf("sign in: look up user: %w", err)
	}
	ok, err := argon2id.Verify(password, rec.PasswordHash)
	if err != nil {
		return IssuedSession{}, fmt.Errorf("sign in: password hash of user %s: %w", rec.User.ID, err)
	}
	if !ok {
		return IssuedSession{}, ErrWrongCredentials
	}
	a, err := s.store.Account(ctx, rec.User.AccountID)
	if err != nil {
		return IssuedSession{}, fmt.Errorf("sign in: account of user %s: %w", rec.User.ID, err)
	}
	token, sess := s.newSession(rec.User.ID, input.Now(s.now))
	if err := s.store.InsertSession(ctx, sess); err != nil {
		return IssuedSession{}, fmt.Errorf("sign in: %w", err)
	}
	return IssuedSession{Session: Session{User: rec.User, Account: a, ExpiresAt: sess.ExpiresAt}, Token: token}, nil
}

// GetSession answers the session of token, with its user and account, or
// ErrNoSession for a token that is malformed, unknown, expired or revoked.
func (s *Service) GetSession(ctx context.Context, token string) (Session, error) {
	stored, err := s.session(ctx, token)
	if err != nil {
		return Session{}, err
	}
	return stored.Session, nil
}

// SignOut ends the session of token or, everywhere, every session of its
// user. Only a live session can: a revoked or expired token is
// ErrNoSession, so a leaked old token cannot sign its user out elsewhere.
func (s *Service) SignOut(ctx context.Context, token string, everywhere bool) error {
	stored, err := s.session(ctx, token)
	if err != nil {
		return err
	}
	now := input.Now(s.now)
	if everywhere {
		err = s.store.RevokeSessions(ctx, stored.Session.User.ID, now)
	} else {
		err = s.store.RevokeSession(ctx, stored.TokenHash, now)
	}
	if err != nil {
		return fmt.Errorf("sign out user %s: %w", stored.Session.User.ID, err)
	}
	return nil
}

// ChangePassword replaces the signed-in user's password, given the current
// one, ends every session of the user (whoever else knew the old password
// may be signed in) and starts a new one for the caller.
func (s *Service) ChangePassword(ctx context.Context, token, current, next string) (IssuedSession, error) {
	stored, err := s.session(ctx, token)
	if err != nil {
		return IssuedSession{}, err
	}
	if err := validPassword("new_password", next); err != nil {
		return IssuedSession{}, err
	}
	user := stored.Session.User
	rec, err := s.store.User(ctx, user.ID)
	if err != nil {
		return IssuedSession{}, fmt.Errorf("change password of user %s: %w", user.ID, err)
	}
	ok, err := argon2id.Verify(current, rec.PasswordHash)
	if err != nil {
		return IssuedSession{}, fmt.Errorf("change password: password hash of user %s: %w", user.ID, err)
	}
	if !ok {
		return IssuedSession{}, errNotCurrentPassword
	}
	now := input.Now(s.now)
	newToken, sess := s.newSession(user.ID, now)
	err = s.store.ChangePassword(ctx, user.ID, rec.PasswordHash, s.hashPassword(next), now, sess)
	if errors.Is(err, ErrNotFound) {
		// Changed by another request since it was verified: the
		// password given is no longer the current one.
		return IssuedSession{}, errNotCurrentPassword
	}
	if err != nil {
		return IssuedSession{}, fmt.Errorf("change password of user %s: %w", user.ID, err)
	}
	user.PasswordChangedAt = now
	return IssuedSession{Session: Session{User: user, Account: stored.Session.Account, ExpiresAt: sess.ExpiresAt}, Token: newToken}, nil
}

var errNotCurrentPassword = invalid("current_password", "is not your current password")

// InviteUser makes a one-time token with which email joins the account
// (AcceptInvite). When email is already a user of that account, accepting
// sets their password instead: how an operator hands a user a new one. An
// email of another account's user is ErrConflict on "email".
func (s *Service) InviteUser(ctx context.Context, accountID uuid.UUID, email string) (IssuedInvite, error) {
	return s.invite(ctx, accountID, email, false)
}

// InviteNewUser is InviteUser for an email that is not yet a user of the
// account: one that is is ErrConflict on "email". The portal's users
// invite this way, so that none of them can set a colleague's password
// (password resets are the operators').
func (s *Service) InviteNewUser(ctx context.Context, accountID uuid.UUID, email string) (IssuedInvite, error) {
	return s.invite(ctx, accountID, email, true)
}

func (s *Service) invite(ctx context.Context, accountID uuid.UUID, email string, newOnly bool) (IssuedInvite, error) {
	email, err := validEmail("email", email)
	if err != nil {
		return IssuedInvite{}, err
	}
	if _, err := s.store.Account(ctx, accountID); err != nil {
		return IssuedInvite{}, fmt.Errorf("invite to account %s: %w", accountID, err)
	}
	// Checked again when the invite is accepted, since the email may be
	// signed up meanwhile; here it spares the operator a link that can
	// only fail.
	switch existing, err := s.store.UserByEmail(ctx, email); {
	case err == nil && existing.User.AccountID != accountID:
		return IssuedInvite{}, &ConflictError{Field: "email", Reason: "is already registered to another account"}
	case err == nil && newOnly:
		return IssuedInvite{}, &ConflictError{Field: "email", Reason: "is already a user of this account"}
	case err != nil && !errors.Is(err, ErrNotFound):
		return IssuedInvite{}, fmt.Errorf("invite to account %s: look up user: %w", accountID, err)
	}
	token, hash := newToken(inviteTokenPrefix)
	now := input.Now(s.now)
	inv := InviteRecord{TokenHash: hash, AccountID: accountID, Email: email, CreatedAt: now, ExpiresAt: now.Add(s.inviteTTL)}
	if err := s.store.InsertInvite(ctx, inv); err != nil {
		return IssuedInvite{}, fmt.Errorf("invite to account %s: %w", accountID, err)
	}
	return IssuedInvite{Token: token, ExpiresAt: inv.ExpiresAt}, nil
}

// AcceptInvite spends an invite token with the password its user chooses
// and signs them in. A token that is malformed, unknown, used or expired
// is ErrInviteNotFound, answered before the password is hashed: a hash
// costs 19 MiB and a core for tens of milliseconds, which no one should
// get to spend without a live invite.
func (s *Service) AcceptInvite(ctx context.Context, token, password string) (IssuedSession, error) {
	if !wellFormedToken(inviteTokenPrefix, token) {
		return IssuedSession{}, ErrInviteNotFound
	}
	if err := validPassword("password", password); err != nil {
		return IssuedSession{}, err
	}
	hash := hashSecret(token)
	now := input.Now(s.now)
	inv, err := s.store.Invite(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return IssuedSession{}, ErrInviteNotFound
	}
	if err != nil {
		return IssuedSession{}, fmt.Errorf("accept invite: look up invite: %w", err)
	}
	// As in session: the decision never rests on a variable-time
	// comparison. The store checks use and expiry again under the
	// invite's lock; this check only spares the hash.
	if subtle.ConstantTimeCompare(inv.TokenHash, hash) != 1 || inv.UsedAt != nil || !now.Before(inv.ExpiresAt) {
		return IssuedSession{}, ErrInviteNotFound
	}
	userID, err := uuid.NewV7()
	if err != nil {
		return IssuedSession{}, fmt.Errorf("new user id: %w", err)
	}
	sessionToken, sess := s.newSession(uuid.Nil, now)
	user, err := s.store.AcceptInvite(ctx, Acceptance{
		TokenHash:    hash,
		At:           now,
		NewUserID:    userID,
		PasswordHash: s.hashPassword(password),
		Session:      sess,
	})
	if errors.Is(err, ErrNotFound) {
		return IssuedSession{}, ErrInviteNotFound
	}
	if err != nil {
		return IssuedSession{}, fmt.Errorf("accept invite: %w", err)
	}
	a, err := s.store.Account(ctx, user.AccountID)
	if err != nil {
		return IssuedSession{}, fmt.Errorf("accept invite: account of user %s: %w", user.ID, err)
	}
	return IssuedSession{Session: Session{User: user, Account: a, ExpiresAt: sess.ExpiresAt}, Token: sessionToken}, nil
}

// session resolves a live session from its token, or ErrNoSession.
func (s *Service) session(ctx context.Context, token string) (StoredSession, error) {
	// Garbage is answered without touching the database, as for API keys.
	if !wellFormedToken(sessionTokenPrefix, token) {
		return StoredSession{}, ErrNoSession
	}
	hash := hashSecret(token)
	stored, err := s.store.SessionByHash(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return StoredSession{}, ErrNoSession
	}
	if err != nil {
		return StoredSession{}, fmt.Errorf("look up session: %w", err)
	}
	// As in Authenticate: the decision never rests on a variable-time
	// comparison, whatever the storage layer did.
	if subtle.ConstantTimeCompare(stored.TokenHash, hash) != 1 || stored.RevokedAt != nil ||
		!input.Now(s.now).Before(stored.Session.ExpiresAt) {
		return StoredSession{}, ErrNoSession
	}
	return stored, nil
}

// newSession returns a fresh token and the session to store for it.
func (s *Service) newSession(userID uuid.UUID, now time.Time) (Secret, SessionRecord) {
	token, hash := newToken(sessionTokenPrefix)
	return token, SessionRecord{TokenHash: hash, UserID: userID, CreatedAt: now, ExpiresAt: now.Add(s.sessionTTL)}
}

// newToken returns prefix followed by tokenRandomBytes random bytes in
// unpadded base64url (safe in cookies and URL paths), and its hash.
func newToken(prefix string) (Secret, []byte) {
	random := make([]byte, tokenRandomBytes)
	// crypto/rand.Read never fails; it crashes the program instead of
	// returning predictable bytes.
	_, _ = rand.Read(random)
	token := prefix + base64.RawURLEncoding.EncodeToString(random)
	return Secret{value: &token}, hashSecret(token)
}

// tokenTextLength is the length of a token's random part as text.
var tokenTextLength = base64.RawURLEncoding.EncodedLen(tokenRandomBytes)

// wellFormedToken checks the shape of a presented session or invite token.
func wellFormedToken(prefix, token string) bool {
	random, ok := strings.CutPrefix(token, prefix)
	if !ok || len(random) != tokenTextLength {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(random)
	return err == nil && len(b) == tokenRandomBytes
}

// validEmail trims the address and lower-cases it. It must be an address
// alone ("Ann <ann@example.com>" is not), as it is compared and shown.
func validEmail(field, email string) (string, error) {
	email = strings.TrimSpace(email)
	if email == "" {
		return "", invalid(field, "is required")
	}
	if len(email) > MaxEmailLength {
		return "", invalid(field, fmt.Sprintf("must be at most %d characters", MaxEmailLength))
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Name != "" || addr.Address != email {
		return "", invalid(field, "must be an email address such as name@example.com")
	}
	return strings.ToLower(email), nil
}

// validPassword counts characters, not bytes, so a passphrase in any script
// gets the same allowance. Passwords are never trimmed or normalised: what
// was typed is what is hashed.
func validPassword(field, password string) error {
	switch n := utf8.RuneCountInString(password); {
	case n < MinPasswordLength:
		return invalid(field, fmt.Sprintf("must be at least %d characters", MinPasswordLength))
	case n > MaxPasswordLength:
		return invalid(field, fmt.Sprintf("must be at most %d characters", MaxPasswordLength))
	}
	return nil
}
