package twirpserver

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/accounts"
)

// GetInvite implements accountsv1.Accounts.
func (s *Server) GetInvite(ctx context.Context, req *accountsv1.GetInviteRequest) (*accountsv1.Invite, error) {
	inv, err := s.svc.GetInvite(ctx, req.GetToken())
	if err != nil {
		return nil, toTwirp(err)
	}
	return &accountsv1.Invite{
		AccountId: inv.AccountID.String(), AccountName: inv.AccountName, Email: inv.Email,
		ExpiresAt: timestamppb.New(inv.ExpiresAt), ExistingUser: inv.ExistingUser,
	}, nil
}

// ListUsers implements accountsv1.Accounts.
func (s *Server) ListUsers(ctx context.Context, req *accountsv1.ListUsersRequest) (*accountsv1.ListUsersResponse, error) {
	accountID, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	users, err := s.svc.ListUsers(ctx, accountID)
	if err != nil {
		return nil, toTwirp(err)
	}
	out := &accountsv1.ListUsersResponse{Users: make([]*accountsv1.User, len(users))}
	for i, u := range users {
		out.Users[i] = userToProto(u)
	}
	return out, nil
}

// RemoveUser implements accountsv1.Accounts.
func (s *Server) RemoveUser(ctx context.Context, req *accountsv1.RemoveUserRequest) (*accountsv1.RemoveUserResponse, error) {
	accountID, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	userID, err := lookupID(req.GetUserId())
	if err != nil {
		return nil, toTwirp(err)
	}
	if err := s.svc.RemoveUser(ctx, accountID, userID); err != nil {
		return nil, toTwirp(err)
	}
	return &accountsv1.RemoveUserResponse{}, nil
}

// CreatePasswordReset implements accountsv1.Accounts.
func (s *Server) CreatePasswordReset(ctx context.Context, req *accountsv1.CreatePasswordResetRequest) (*accountsv1.CreatePasswordResetResponse, error) {
	r, err := s.svc.CreatePasswordReset(ctx, req.GetEmail())
	if err != nil {
		return nil, toTwirp(err)
	}
	return &accountsv1.CreatePasswordResetResponse{Token: r.Token.Reveal(), ExpiresAt: timestamppb.New(r.ExpiresAt), User: userToProto(r.User)}, nil
}

// GetPasswordReset implements accountsv1.Accounts.
func (s *Server) GetPasswordReset(ctx context.Context, req *accountsv1.GetPasswordResetRequest) (*accountsv1.PasswordReset, error) {
	r, err := s.svc.GetPasswordReset(ctx, req.GetToken())
	if err != nil {
		return nil, toTwirp(err)
	}
	return &accountsv1.PasswordReset{Email: r.Email, AccountName: r.AccountName, ExpiresAt: timestamppb.New(r.ExpiresAt)}, nil
}

// ResetPassword implements accountsv1.Accounts.
func (s *Server) ResetPassword(ctx context.Context, req *accountsv1.ResetPasswordRequest) (*accountsv1.SessionResponse, error) {
	issued, err := s.svc.ResetPassword(ctx, req.GetToken(), req.GetPassword())
	if err != nil {
		return nil, toTwirp(err)
	}
	return sessionResponse(issued), nil
}

// RequestLive implements accountsv1.Accounts.
func (s *Server) RequestLive(ctx context.Context, req *accountsv1.RequestLiveRequest) (*accountsv1.LiveRequest, error) {
	accountID, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	userID, err := lookupID(req.GetUserId())
	if err != nil {
		// The account exists or not; the user is the caller's input.
		return nil, toTwirp(&accounts.ValidationError{Field: "user_id", Reason: "must be a user of the account"})
	}
	r, err := s.svc.RequestLive(ctx, accountID, userID)
	if err != nil {
		return nil, toTwirp(err)
	}
	return liveRequestToProto(r), nil
}

// GetLiveRequest implements accountsv1.Accounts.
func (s *Server) GetLiveRequest(ctx context.Context, req *accountsv1.GetLiveRequestRequest) (*accountsv1.LiveRequest, error) {
	accountID, err := lookupID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	r, err := s.svc.GetLiveRequest(ctx, accountID)
	if err != nil {
		return nil, toTwirp(err)
	}
	return liveRequestToProto(r), nil
}

// ListLiveRequests implements accountsv1.Accounts.
func (s *Server) ListLiveRequests(ctx context.Context, _ *accountsv1.ListLiveRequestsRequest) (*accountsv1.ListLiveRequestsResponse, error) {
	rs, err := s.svc.ListLiveRequests(ctx)
	if err != nil {
		return nil, toTwirp(err)
	}
	out := &accountsv1.ListLiveRequestsResponse{Requests: make([]*accountsv1.LiveRequest, len(rs))}
	for i, r := range rs {
		out.Requests[i] = liveRequestToProto(r)
	}
	return out, nil
}

func liveRequestToProto(r accounts.LiveRequest) *accountsv1.LiveRequest {
	return &accountsv1.LiveRequest{Account: accountToProto(r.Account), RequestedBy: r.RequestedBy, RequestedAt: timestamppb.New(r.RequestedAt)}
}

func userToProto(u accounts.User) *accountsv1.User {
	return &accountsv1.User{Id: u.ID.String(), AccountId: u.AccountID.String(), Email: u.Email, CreatedAt: timestamppb.New(u.CreatedAt)}
}
