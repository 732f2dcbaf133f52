// Package twirpserver serves the accounts Service over Twirp: it translates
// between the protobuf contract in proto/accounts/v1 and the domain, and
// nothing else.
package twirpserver

import (
	"context"
	"log/slog"
	"math"
	"net/http"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/service"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/accounts"
)

// Server implements accountsv1.Accounts.
type Server struct {
	svc *accounts.Service
}

var _ accountsv1.Accounts = (*Server)(nil)

// New returns the Twirp implementation over svc.
func New(svc *accounts.Service) *Server {
	return &Server{svc: svc}
}

// Handler returns the Twirp HTTP handler of the Accounts service, mounted
// at its default path prefix (/twirp/esim.accounts.v1.Accounts/), serving
// only the callers Policy admits. Its hooks log internal errors and calls
// cut short, whose causes callers never see. Causes come from storage and
// never contain secrets: the domain hashes a secret before it reaches
// storage.
func Handler(svc *accounts.Service, log *slog.Logger, callers internalauth.Callers) http.Handler {
	return service.Twirp(accountsv1.NewAccountsServer, accountsv1.Accounts(New(svc)), log, callers, Policy)
}

// CreateAccount implements accountsv1.Accounts.
func (s *Server) CreateAccount(ctx context.Context, req *accountsv1.CreateAccountRequest) (*accountsv1.Account, error) {
	var id uuid.UUID
	if req.GetId() != "" {
		// The caller is choosing an id, so a bad one is their input error,
		// not a lookup miss. The nil UUID would silently mean "generate",
		// and is a well-formed UUID, so it gets a reason of its own.
		parsed, err := uuid.Parse(req.GetId())
		if err != nil {
			return nil, toTwirp(&accounts.ValidationError{Field: "id", Reason: "must be a UUID"})
		}
		if parsed == uuid.Nil {
			return nil, toTwirp(&accounts.ValidationError{Field: "id", Reason: "must not be the nil UUID; leave it empty to have one generated"})
		}
		id = parsed
	}
	a, err := s.svc.CreateAccount(ctx, accounts.NewAccount{
		ID:                 id,
		Name:               req.GetName(),
		Currency:           accounts.Currency(req.GetCurrency()),
		RateLimitPerMinute: req.GetRateLimitPerMinute(),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	return accountToProto(a), nil
}

// GetAccount implements accountsv1.Accounts.
func (s *Server) GetAccount(ctx context.Context, req *accountsv1.GetAccountRequest) (*accountsv1.Account, error) {
	id, err := lookupID(req.GetId())
	if err != nil {
		return nil, toTwirp(err)
	}
	a, err := s.svc.GetAccount(ctx, id)
	if err != nil {
		return nil, toTwirp(err)
	}
	return accountToProto(a), nil
}

// ListAccounts implements accountsv1.Accounts.
func (s *Server) ListAccounts(ctx context.Context, req *accountsv1.ListAccountsRequest) (*accountsv1.ListAccountsResponse, error) {
	page, err := s.svc.ListAccounts(ctx, req.GetPage(), req.GetLimit())
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &accountsv1.ListAccountsResponse{
		Accounts: make([]*accountsv1.Account, len(page.Accounts)),
		// The contract's int32 is ample for partner accounts; saturate
		// rather than wrap should it ever not be.
		Total: int32(min(page.Total, math.MaxInt32)),
	}
	for i, a := range page.Accounts {
		resp.Accounts[i] = accountToProto(a)
	}
	return resp, nil
}

// SetRateLimit implements accountsv1.Accounts.
func (s *Server) SetRateLimit(ctx context.Context, req *accountsv1.SetRateLimitRequest) (*accountsv1.Account, error) {
	id, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	a, err := s.svc.SetRateLimit(ctx, id, req.GetRateLimitPerMinute())
	if err != nil {
		return nil, toTwirp(err)
	}
	return accountToProto(a), nil
}

// CreateKey implements accountsv1.Accounts.
func (s *Server) CreateKey(ctx context.Context, req *accountsv1.CreateKeyRequest) (*accountsv1.CreateKeyResponse, error) {
	// The account id names an existing account, so a malformed one is a
	// lookup miss like any unknown id.
	accountID, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	issued, err := s.svc.CreateKey(ctx, accounts.NewKey{
		AccountID:   accountID,
		Environment: environmentFromProto(req.GetEnvironment()),
		Name:        req.GetName(),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	return &accountsv1.CreateKeyResponse{Key: keyToProto(issued.Key), Secret: issued.Secret.Reveal()}, nil
}

// ListKeys implements accountsv1.Accounts.
func (s *Server) ListKeys(ctx context.Context, req *accountsv1.ListKeysRequest) (*accountsv1.ListKeysResponse, error) {
	accountID, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	page, err := s.svc.ListKeys(ctx, accountID, req.GetPage(), req.GetLimit())
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &accountsv1.ListKeysResponse{
		Keys: make([]*accountsv1.ApiKey, len(page.Keys)),
		// Saturated like ListAccounts' total, never wrapped.
		Total: int32(min(page.Total, math.MaxInt32)),
	}
	for i, k := range page.Keys {
		resp.Keys[i] = keyToProto(k)
	}
	return resp, nil
}

// RevokeKey implements accountsv1.Accounts.
func (s *Server) RevokeKey(ctx context.Context, req *accountsv1.RevokeKeyRequest) (*accountsv1.ApiKey, error) {
	accountID, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	keyID, err := lookupID(req.GetKeyId())
	if err != nil {
		return nil, toTwirp(err)
	}
	k, err := s.svc.RevokeKey(ctx, accountID, keyID)
	if err != nil {
		return nil, toTwirp(err)
	}
	return keyToProto(k), nil
}

// Authenticate implements accountsv1.Accounts.
func (s *Server) Authenticate(ctx context.Context, req *accountsv1.AuthenticateRequest) (*accountsv1.AuthenticateResponse, error) {
	p, err := s.svc.Authenticate(ctx, req.GetSecret())
	if err != nil {
		return nil, toTwirp(err)
	}
	return &accountsv1.AuthenticateResponse{
		AccountId:          p.AccountID.String(),
		Environment:        environmentToProto(p.Environment),
		KeyId:              p.KeyID.String(),
		Currency:           string(p.Currency),
		RateLimitPerMinute: p.RateLimitPerMinute,
	}, nil
}

// EnableLive implements accountsv1.Accounts.
func (s *Server) EnableLive(ctx context.Context, req *accountsv1.EnableLiveRequest) (*accountsv1.Account, error) {
	id, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	a, err := s.svc.EnableLive(ctx, id)
	if err != nil {
		return nil, toTwirp(err)
	}
	return accountToProto(a), nil
}

// SignUp implements accountsv1.Accounts.
func (s *Server) SignUp(ctx context.Context, req *accountsv1.SignUpRequest) (*accountsv1.SessionResponse, error) {
	issued, err := s.svc.SignUp(ctx, accounts.SignUp{
		Email:       req.GetEmail(),
		Password:    req.GetPassword(),
		AccountName: req.GetAccountName(),
		Currency:    accounts.Currency(req.GetCurrency()),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	return sessionResponse(issued), nil
}

// SignIn implements accountsv1.Accounts.
func (s *Server) SignIn(ctx context.Context, req *accountsv1.SignInRequest) (*accountsv1.SessionResponse, error) {
	issued, err := s.svc.SignIn(ctx, req.GetEmail(), req.GetPassword())
	if err != nil {
		return nil, toTwirp(err)
	}
	return sessionResponse(issued), nil
}

// GetSession implements accountsv1.Accounts.
func (s *Server) GetSession(ctx context.Context, req *accountsv1.GetSessionRequest) (*accountsv1.Session, error) {
	sess, err := s.svc.GetSession(ctx, req.GetToken())
	if err != nil {
		return nil, toTwirp(err)
	}
	return sessionToProto(sess), nil
}

// SignOut implements accountsv1.Accounts.
func (s *Server) SignOut(ctx context.Context, req *accountsv1.SignOutRequest) (*accountsv1.SignOutResponse, error) {
	if err := s.svc.SignOut(ctx, req.GetToken(), req.GetEverywhere()); err != nil {
		return nil, toTwirp(err)
	}
	return &accountsv1.SignOutResponse{}, nil
}

// ChangePassword implements accountsv1.Accounts.
func (s *Server) ChangePassword(ctx context.Context, req *accountsv1.ChangePasswordRequest) (*accountsv1.SessionResponse, error) {
	issued, err := s.svc.ChangePassword(ctx, req.GetToken(), req.GetCurrentPassword(), req.GetNewPassword())
	if err != nil {
		return nil, toTwirp(err)
	}
	return sessionResponse(issued), nil
}

// InviteUser implements accountsv1.Accounts.
func (s *Server) InviteUser(ctx context.Context, req *accountsv1.InviteUserRequest) (*accountsv1.InviteUserResponse, error) {
	accountID, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	invite := s.svc.InviteUser
	if req.GetNewUserOnly() {
		invite = s.svc.InviteNewUser
	}
	inv, err := invite(ctx, accountID, req.GetEmail())
	if err != nil {
		return nil, toTwirp(err)
	}
	return &accountsv1.InviteUserResponse{Token: inv.Token.Reveal(), ExpiresAt: timestamppb.New(inv.ExpiresAt)}, nil
}

// AcceptInvite implements accountsv1.Accounts.
func (s *Server) AcceptInvite(ctx context.Context, req *accountsv1.AcceptInviteRequest) (*accountsv1.SessionResponse, error) {
	issued, err := s.svc.AcceptInvite(ctx, req.GetToken(), req.GetPassword())
	if err != nil {
		return nil, toTwirp(err)
	}
	return sessionResponse(issued), nil
}

// lookupID parses the id of something that must already exist. A malformed
// id cannot name anything, so it is ErrNotFound, exactly like an unknown
// one: callers (the gateway maps it to not_found) need no special case.
func lookupID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, accounts.ErrNotFound
	}
	return id, nil
}

func accountToProto(a accounts.Account) *accountsv1.Account {
	return &accountsv1.Account{
		Id:                 a.ID.String(),
		Name:               a.Name,
		Currency:           string(a.Currency),
		RateLimitPerMinute: a.RateLimitPerMinute,
		CreatedAt:          timestamppb.New(a.CreatedAt),
		LiveEnabled:        a.LiveEnabled,
	}
}

func keyToProto(k accounts.APIKey) *accountsv1.ApiKey {
	pk := &accountsv1.ApiKey{
		Id:          k.ID.String(),
		AccountId:   k.AccountID.String(),
		Environment: environmentToProto(k.Environment),
		Prefix:      k.Prefix,
		Name:        k.Name,
		CreatedAt:   timestamppb.New(k.CreatedAt),
	}
	if k.RevokedAt != nil {
		pk.RevokedAt = timestamppb.New(*k.RevokedAt)
	}
	return pk
}

// environmentFromProto maps unknown enum values to "", which the domain
// rejects as a validation error on environment.
func environmentFromProto(e accountsv1.Environment) accounts.Environment {
	switch e {
	case accountsv1.Environment_ENVIRONMENT_SANDBOX:
		return accounts.Sandbox
	case accountsv1.Environment_ENVIRONMENT_LIVE:
		return accounts.Live
	}
	return ""
}

func environmentToProto(e accounts.Environment) accountsv1.Environment {
	switch e {
	case accounts.Sandbox:
		return accountsv1.Environment_ENVIRONMENT_SANDBOX
	case accounts.Live:
		return accountsv1.Environment_ENVIRONMENT_LIVE
	}
	return accountsv1.Environment_ENVIRONMENT_UNSPECIFIED
}

// sessionResponse hands over the token: the one response that carries it.
func sessionResponse(issued accounts.IssuedSession) *accountsv1.SessionResponse {
	return &accountsv1.SessionResponse{Session: sessionToProto(issued.Session), Token: issued.Token.Reveal()}
}

func sessionToProto(s accounts.Session) *accountsv1.Session {
	return &accountsv1.Session{
		User: &accountsv1.User{
			Id:        s.User.ID.String(),
			AccountId: s.User.AccountID.String(),
			Email:     s.User.Email,
			CreatedAt: timestamppb.New(s.User.CreatedAt),
		},
		Account:   accountToProto(s.Account),
		ExpiresAt: timestamppb.New(s.ExpiresAt),
	}
}
