package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/cmd/internal/platform"
	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
)

// The many-partner rows: pgbenchAccounts partners ordering at once, each
// from its own balance, against pgbench debiting as many balance rows.
const (
	ordersManyTarget  = "gateway POST /v1/orders (1 eSIM), 64 partners"
	pgbenchManyTarget = "pgbench order-shaped transaction, 64 balances"
)

// partnerTopUpMinor is what every run adds to each bench partner's sandbox
// balance: 1,000,000.00 USD, far more than a run's orders spend.
const partnerTopUpMinor = 1_000_000_00

// benchPartnerKeyName names the bench partners' keys, one set a run.
const benchPartnerKeyName = "make-bench"

// benchPartnerID is the id of bench partner n (0-based): fixed, so every
// run orders for the same accounts instead of leaving 64 new ones behind.
func benchPartnerID(n int) string { return fmt.Sprintf("be000000-0000-4000-8000-%012d", n+1) }

// benchPartners are the many-partner rows' accounts, each with a sandbox
// key of this run and money to order with.
type benchPartners struct {
	accounts accountsv1.Accounts
	ids      []string // account ids
	keys     []string // their keys' secrets
	keyIDs   []string
}

// ensureBenchPartners makes the pgbenchAccounts bench partners exist (they
// are kept between runs), gives each a fresh sandbox key and tops each
// sandbox balance up by partnerTopUpMinor. The keys are revoked by revoke.
func ensureBenchPartners(ctx context.Context, p *platform.Platform, runID string, say func(string, ...any)) (*benchPartners, error) {
	operator := internalauth.Client(&http.Client{Timeout: 10 * time.Second}, p.OperatorToken)
	b := &benchPartners{accounts: accountsv1.NewAccountsProtobufClient(p.URL(platform.Accounts), operator)}
	wallet := walletv1.NewWalletProtobufClient(p.URL(platform.Wallet), operator)
	say("ensuring %d bench partners with a sandbox key each and %d.%02d USD more to order with", pgbenchAccounts, partnerTopUpMinor/100, partnerTopUpMinor%100)
	for n := range pgbenchAccounts {
		id := benchPartnerID(n)
		_, err := b.accounts.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Id: id, Name: fmt.Sprintf("Bench partner %02d", n+1), Currency: "USD"})
		if twerr, ok := errors.AsType[twirp.Error](err); ok && twerr.Code() == twirp.AlreadyExists {
			err = nil
		}
		if err != nil {
			return b, fmt.Errorf("ensure bench partner %s: %w", id, err)
		}
		key, err := b.accounts.CreateKey(ctx, &accountsv1.CreateKeyRequest{AccountId: id, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Name: benchPartnerKeyName})
		if err != nil {
			return b, fmt.Errorf("create a sandbox key for bench partner %s: %w", id, err)
		}
		b.ids, b.keys, b.keyIDs = append(b.ids, id), append(b.keys, key.GetSecret()), append(b.keyIDs, key.GetKey().GetId())
		if _, err := wallet.TopUp(ctx, &walletv1.TopUpRequest{
			AccountId: id, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX, Currency: "USD",
			AmountMinor: partnerTopUpMinor, Reference: "make-bench-" + runID, Note: "make bench: the many-partner orders",
		}); err != nil {
			return b, fmt.Errorf("top up bench partner %s: %w", id, err)
		}
	}
	return b, nil
}

// revoke revokes the keys of this run: none outlives it.
func (b *benchPartners) revoke(ctx context.Context) error {
	var errs []error
	for i, id := range b.keyIDs {
		if _, err := b.accounts.RevokeKey(ctx, &accountsv1.RevokeKeyRequest{AccountId: b.ids[i], KeyId: id}); err != nil {
			errs = append(errs, fmt.Errorf("revoke bench partner %s's key: %w", b.ids[i], err))
		}
	}
	return errors.Join(errs...)
}

// orderTarget is a closed loop's orders of body spread over the partners:
// worker i orders for partner i mod pgbenchAccounts, with keys of its own.
func (b *benchPartners) orderTarget(name, url, keyPrefix string, body []byte) (target, error) {
	var spread []target
	seq, throttled := new(atomic.Uint64), new(atomic.Uint64)
	for i, key := range b.keys {
		t, err := newOrderTarget(name, url, key, fmt.Sprintf("%sp%d-", keyPrefix, i), body)
		if err != nil {
			return target{}, err
		}
		t.seq, t.throttled = seq, throttled
		spread = append(spread, t)
	}
	t := spread[0]
	t.spread = spread
	return t, nil
}
