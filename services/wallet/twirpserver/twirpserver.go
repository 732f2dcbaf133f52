// Package twirpserver serves the wallet Service over Twirp: it translates
// between the protobuf contract in proto/wallet/v1 and the domain, and
// nothing else. Who may call which method is Policy's; who moved money is
// the authenticated caller, recorded on every entry as its actor.
//
// Every method answers a malformed account_id with invalid_argument on
// account_id, unlike accounts' not_found for a malformed id: the wallet
// looks no account up (accounts own them, and any account's balance
// starts at 0), so an id that is no UUID is bad input rather than an
// unknown account. Only Refund answers not_found, for a debit that does
// not exist in the account and environment.
package twirpserver

import (
	"context"
	"log/slog"
	"math"
	"net/http"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/service"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	"github.com/esimplatform/esim/services/wallet"
)

// Server implements walletv1.Wallet.
type Server struct {
	svc *wallet.Service
}

var _ walletv1.Wallet = (*Server)(nil)

// New returns the Twirp implementation over svc. Its methods expect the
// caller that internalauth.Protect puts in the context; Handler puts it
// there.
func New(svc *wallet.Service) *Server {
	return &Server{svc: svc}
}

// Handler returns the Twirp HTTP handler of the Wallet service, mounted at
// its default path prefix (/twirp/esim.wallet.v1.Wallet/), served only to
// callers whose token is in callers and whom Policy lets call the method.
// Its hooks log internal errors and calls cut short, whose causes callers
// never see.
func Handler(svc *wallet.Service, log *slog.Logger, callers internalauth.Callers) http.Handler {
	return service.Twirp(walletv1.NewWalletServer, walletv1.Wallet(New(svc)), log, callers, Policy)
}

// TopUp implements walletv1.Wallet.
func (s *Server) TopUp(ctx context.Context, req *walletv1.TopUpRequest) (*walletv1.LedgerEntry, error) {
	// The portal's top-ups are the sandbox's free money; real money comes
	// in only through an operator.
	if caller, _ := internalauth.CallerFrom(ctx); caller == internalauth.Portal && req.GetEnvironment() != accountsv1.Environment_ENVIRONMENT_SANDBOX {
		return nil, twirp.NewError(twirp.PermissionDenied, "the portal tops up sandbox balances only")
	}
	accountID, err := parseAccountID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.TopUp(ctx, wallet.NewTopUp{
		AccountID:   accountID,
		Environment: environmentFromProto(req.GetEnvironment()),
		Currency:    wallet.Currency(req.GetCurrency()),
		AmountMinor: req.GetAmountMinor(),
		Reference:   req.GetReference(),
		Note:        req.GetNote(),
		Actor:       actor(ctx),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	return entryToProto(e), nil
}

// Debit implements walletv1.Wallet.
func (s *Server) Debit(ctx context.Context, req *walletv1.DebitRequest) (*walletv1.LedgerEntry, error) {
	accountID, err := parseAccountID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.Debit(ctx, wallet.NewDebit{
		AccountID:   accountID,
		Environment: environmentFromProto(req.GetEnvironment()),
		Currency:    wallet.Currency(req.GetCurrency()),
		AmountMinor: req.GetAmountMinor(),
		Reference:   req.GetReference(),
		Actor:       actor(ctx),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	return entryToProto(e), nil
}

// Refund implements walletv1.Wallet.
func (s *Server) Refund(ctx context.Context, req *walletv1.RefundRequest) (*walletv1.LedgerEntry, error) {
	accountID, err := parseAccountID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	e, err := s.svc.Refund(ctx, wallet.NewRefund{
		AccountID:      accountID,
		Environment:    environmentFromProto(req.GetEnvironment()),
		DebitReference: req.GetDebitReference(),
		Actor:          actor(ctx),
	})
	if err != nil {
		return nil, toTwirp(err)
	}
	return entryToProto(e), nil
}

// GetBalance implements walletv1.Wallet.
func (s *Server) GetBalance(ctx context.Context, req *walletv1.GetBalanceRequest) (*walletv1.Balance, error) {
	accountID, err := parseAccountID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	b, err := s.svc.GetBalance(ctx, accountID, environmentFromProto(req.GetEnvironment()), wallet.Currency(req.GetCurrency()))
	if err != nil {
		return nil, toTwirp(err)
	}
	pb := &walletv1.Balance{
		AccountId:   b.AccountID.String(),
		Environment: environmentToProto(b.Environment),
		Currency:    string(b.Currency),
		AmountMinor: b.AmountMinor,
	}
	if !b.UpdatedAt.IsZero() {
		pb.UpdatedAt = timestamppb.New(b.UpdatedAt)
	}
	return pb, nil
}

// ListLedger implements walletv1.Wallet.
func (s *Server) ListLedger(ctx context.Context, req *walletv1.ListLedgerRequest) (*walletv1.ListLedgerResponse, error) {
	accountID, err := parseAccountID(req.GetAccountId())
	if err != nil {
		return nil, toTwirp(err)
	}
	page, err := s.svc.ListLedger(ctx, accountID, environmentFromProto(req.GetEnvironment()), req.GetPage(), req.GetLimit())
	if err != nil {
		return nil, toTwirp(err)
	}
	resp := &walletv1.ListLedgerResponse{
		Entries: make([]*walletv1.LedgerEntry, len(page.Entries)),
		// Saturate rather than wrap, should a ledger ever outgrow the
		// contract's int32.
		Total: int32(min(page.Total, math.MaxInt32)),
	}
	for i, e := range page.Entries {
		resp.Entries[i] = entryToProto(e)
	}
	return resp, nil
}

// parseAccountID reads the account id of a request; see the package
// comment for why a malformed one is invalid rather than not found.
func parseAccountID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, &wallet.ValidationError{Field: "account_id", Reason: "must be a UUID"}
	}
	return id, nil
}

// actor is the authenticated caller, or "" without one, which the domain
// refuses to move money for.
func actor(ctx context.Context) string {
	caller, _ := internalauth.CallerFrom(ctx)
	return string(caller)
}

func entryToProto(e wallet.Entry) *walletv1.LedgerEntry {
	return &walletv1.LedgerEntry{
		Id:                e.ID.String(),
		AccountId:         e.AccountID.String(),
		Environment:       environmentToProto(e.Environment),
		Kind:              kindToProto(e.Kind),
		AmountMinor:       e.AmountMinor,
		Currency:          string(e.Currency),
		Reference:         e.Reference,
		BalanceAfterMinor: e.BalanceAfterMinor,
		Actor:             e.Actor,
		Note:              e.Note,
		CreatedAt:         timestamppb.New(e.CreatedAt),
	}
}

func kindToProto(k wallet.Kind) walletv1.EntryKind {
	switch k {
	case wallet.TopUp:
		return walletv1.EntryKind_ENTRY_KIND_TOP_UP
	case wallet.Debit:
		return walletv1.EntryKind_ENTRY_KIND_DEBIT
	case wallet.Refund:
		return walletv1.EntryKind_ENTRY_KIND_REFUND
	}
	return walletv1.EntryKind_ENTRY_KIND_UNSPECIFIED
}

// environmentFromProto maps ENVIRONMENT_SANDBOX and ENVIRONMENT_LIVE to
// the domain's; any other value maps to a name the domain rejects as a
// validation error on environment.
func environmentFromProto(e accountsv1.Environment) wallet.Environment {
	return wallet.Environment(e.ShortName())
}

func environmentToProto(e wallet.Environment) accountsv1.Environment {
	pe, _ := accountsv1.EnvironmentByShortName(string(e))
	return pe
}
