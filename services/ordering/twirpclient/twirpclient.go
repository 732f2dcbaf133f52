// Package twirpclient adapts the catalogue and wallet Twirp services to
// ordering's interfaces. It is the one place their Twirp error codes
// become ordering errors; anything it does not recognise stays an
// internal failure, whose outcome the domain treats as unknown.
package twirpclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	"github.com/esimplatform/esim/services/ordering"
)

// answer returns the Twirp error err is, when the service itself gave it:
// an intermediary's (a proxy's, a mesh's) 404 or 400 maps onto the same
// codes and must never pass for the service's verdict, least of all on
// money.
func answer(err error) (twirp.Error, bool) {
	var terr twirp.Error
	if !errors.As(err, &terr) || terr.Meta("http_error_from_intermediary") != "" {
		return nil, false
	}
	return terr, true
}

// Catalogue prices plans through the catalogue service.
type Catalogue struct {
	client cataloguev1.Catalogue
}

var _ ordering.Catalogue = (*Catalogue)(nil)

// NewCatalogue returns a client of the catalogue service at baseURL; hc
// carries ordering's credential and the call timeout.
func NewCatalogue(baseURL string, hc *http.Client) *Catalogue {
	return &Catalogue{client: cataloguev1.NewCatalogueProtobufClient(baseURL, hc)}
}

// Plan implements ordering.Catalogue: an unknown or retired plan, or one
// without a price in currency, is ordering.ErrNotFound.
func (c *Catalogue) Plan(ctx context.Context, id uuid.UUID, currency ordering.Currency) (ordering.Plan, error) {
	p, err := c.client.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: id.String()})
	if terr, ok := answer(err); ok && terr.Code() == twirp.NotFound {
		return ordering.Plan{}, ordering.ErrNotFound
	}
	if err != nil {
		return ordering.Plan{}, fmt.Errorf("catalogue: %w", err)
	}
	if p.GetStatus() != cataloguev1.PlanStatus_PLAN_STATUS_ACTIVE {
		// GetPlan without include_retired answers active plans only; a
		// plan in any other status is not for sale whatever it says.
		return ordering.Plan{}, ordering.ErrNotFound
	}
	plan := ordering.Plan{
		ID:           id,
		Name:         p.GetName(),
		Unlimited:    p.GetUnlimited(),
		TotalBytes:   p.GetTotalBytes(),
		ValidityDays: p.GetValidityDays(),
		Countries:    p.GetCountries(),
	}
	switch p.GetType() {
	case cataloguev1.PlanType_PLAN_TYPE_FIXED:
		plan.Type = ordering.PlanFixed
	case cataloguev1.PlanType_PLAN_TYPE_PER_DAY:
		plan.Type = ordering.PlanPerDay
	default:
		return ordering.Plan{}, fmt.Errorf("catalogue: plan %s has type %s, unknown here", id, p.GetType())
	}
	if p.GetId() != id.String() {
		return ordering.Plan{}, fmt.Errorf("catalogue: asked for plan %s, answered %s", id, p.GetId())
	}
	for _, m := range p.GetPrices() {
		if m.GetCurrency() == string(currency) {
			plan.Price = m.GetAmountMinor()
			return plan, nil
		}
	}
	return ordering.Plan{}, ordering.ErrNotFound
}

// Wallet debits and refunds orders through the wallet service.
type Wallet struct {
	client walletv1.Wallet
}

var _ ordering.Wallet = (*Wallet)(nil)

// NewWallet returns a client of the wallet service at baseURL; hc carries
// ordering's credential and the call timeout.
func NewWallet(baseURL string, hc *http.Client) *Wallet {
	return &Wallet{client: walletv1.NewWalletProtobufClient(baseURL, hc)}
}

// Debit implements ordering.Wallet. Only the wallet's two refusals, which
// it answers having moved nothing, are refusals here: insufficient funds,
// and a currency the balance is not held in (a balance's currency never
// changes, so a debit that went through once is never refused so on a
// retry). Every other error leaves the outcome unknown.
func (w *Wallet) Debit(ctx context.Context, scope ordering.Scope, currency ordering.Currency, amount int64, reference string) error {
	_, err := w.client.Debit(ctx, &walletv1.DebitRequest{
		AccountId:   scope.AccountID.String(),
		Environment: environment(scope.Environment),
		Currency:    string(currency),
		AmountMinor: amount,
		Reference:   reference,
	})
	if terr, ok := answer(err); ok {
		switch {
		case terr.Code() == twirp.FailedPrecondition && terr.Meta("reason") == "insufficient_funds":
			return ordering.ErrInsufficientFunds
		case terr.Code() == twirp.InvalidArgument && terr.Meta("argument") == "currency":
			reason := terr.Meta("reason")
			if reason == "" {
				reason = "is not the currency the balance is held in"
			}
			return &ordering.ValidationError{Field: "currency", Reason: reason}
		}
	}
	if err != nil {
		return fmt.Errorf("wallet: debit %s: %w", reference, err)
	}
	return nil
}

// Refund implements ordering.Wallet. The wallet refunds a debit at most
// once, and answers a repeated refund with the first.
func (w *Wallet) Refund(ctx context.Context, scope ordering.Scope, debitReference string) error {
	_, err := w.client.Refund(ctx, &walletv1.RefundRequest{
		AccountId:      scope.AccountID.String(),
		Environment:    environment(scope.Environment),
		DebitReference: debitReference,
	})
	if err != nil {
		// not_found (no such debit) included: an order only fails after
		// its debit, so that is a fault to look into, and the order stays
		// failing for the next attempt.
		return fmt.Errorf("wallet: refund %s: %w", debitReference, err)
	}
	return nil
}

func environment(e ordering.Environment) accountsv1.Environment {
	pe, _ := accountsv1.EnvironmentByShortName(string(e))
	return pe
}
