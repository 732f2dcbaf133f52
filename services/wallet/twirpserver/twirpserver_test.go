package twirpserver_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twitchtv/twirp"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	"github.com/esimplatform/esim/services/wallet"
	"github.com/esimplatform/esim/services/wallet/postgres"
	"github.com/esimplatform/esim/services/wallet/twirpserver"
)

const (
	sandbox = accountsv1.Environment_ENVIRONMENT_SANDBOX
	live    = accountsv1.Environment_ENVIRONMENT_LIVE
)

// wallets serves the protected Twirp handler over a real HTTP server
// backed by a fresh database, accepting every caller's test token.
type wallets struct {
	ts   *httptest.Server
	pool *pgxpool.Pool
}

func newWallets(t *testing.T) *wallets {
	t.Helper()
	pool := pgtest.New(t, postgres.Migrations)
	svc := wallet.NewService(postgres.NewStore(pool))
	ts := httptest.NewServer(twirpserver.Handler(svc, slog.New(slog.DiscardHandler), internalauthtest.Callers()))
	t.Cleanup(ts.Close)
	return &wallets{ts: ts, pool: pool}
}

// as is the generated protobuf client calling as caller.
func (w *wallets) as(caller internalauth.Caller) walletv1.Wallet {
	return walletv1.NewWalletProtobufClient(w.ts.URL, internalauthtest.As(w.ts.Client(), caller))
}

// with is a client whose HTTP client sends what hc sends.
func (w *wallets) with(hc *http.Client) walletv1.Wallet {
	return walletv1.NewWalletProtobufClient(w.ts.URL, hc)
}

// wantTwirp fails unless err is a Twirp error with code (and, for
// InvalidArgument, naming argument).
func wantTwirp(t *testing.T, what string, err error, code twirp.ErrorCode, argument string) {
	t.Helper()
	var twerr twirp.Error
	if !errors.As(err, &twerr) {
		t.Errorf("%s: err = %v, want Twirp %s", what, err, code)
		return
	}
	if twerr.Code() != code {
		t.Errorf("%s: code = %s (%s), want %s", what, twerr.Code(), twerr.Msg(), code)
	}
	if argument != "" && twerr.Meta("argument") != argument {
		t.Errorf("%s: argument = %q (%s), want %q", what, twerr.Meta("argument"), twerr.Msg(), argument)
	}
	if code == twirp.InvalidArgument && (twerr.Meta("reason") == "" || strings.HasPrefix(twerr.Meta("reason"), argument+" ")) {
		t.Errorf("%s: reason = %q, want the reason alone", what, twerr.Meta("reason"))
	}
}

// tables reads every row of both tables, so that a call which changed
// anything at all shows up.
func tables(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var dump string
	err := pool.QueryRow(context.Background(), `SELECT
		coalesce((SELECT json_agg(b ORDER BY b.account_id, b.environment) FROM balances b)::text, '') || ' ' ||
		coalesce((SELECT json_agg(e ORDER BY e.id) FROM ledger_entries e)::text, '')`).Scan(&dump)
	if err != nil {
		t.Fatalf("read the tables: %v", err)
	}
	return dump
}

// TestPolicyCoversEveryMethod: every method of the contract has a rule and
// every rule a method, so a new method cannot ship callable by nobody (or
// a renamed one keep a stale rule).
func TestPolicyCoversEveryMethod(t *testing.T) {
	methods := walletv1.File_wallet_v1_wallet_proto.Services().ByName("Wallet").Methods()
	var names []string
	for i := range methods.Len() {
		names = append(names, string(methods.Get(i).Name()))
	}
	if len(names) != 5 {
		t.Fatalf("the contract has methods %v; review the policy for any new one", names)
	}
	if err := twirpserver.Policy.Check(names); err != nil {
		t.Error(err)
	}
	// Only ordering moves money for orders, only an operator tops up (and
	// the portal, in the sandbox alone: TestPortalTopsUpOnlyTheSandbox).
	for method, want := range map[string][]internalauth.Caller{
		"TopUp":  {internalauth.Operator, internalauth.Portal},
		"Debit":  {internalauth.Ordering},
		"Refund": {internalauth.Ordering},
	} {
		if got := twirpserver.Policy[method]; !slices.Equal(got, want) {
			t.Errorf("%s may be called by %v, want only %v", method, got, want)
		}
	}
}

// The portal tops up the sandbox balance of the partner signed in, and
// reads balances and ledgers; a live top-up from it is permission_denied
// and moves nothing, whatever else the request says.
func TestPortalTopsUpOnlyTheSandbox(t *testing.T) {
	ctx := context.Background()
	w := newWallets(t)
	portal := w.as(internalauth.Portal)
	a := uuid.NewString()

	before := tables(t, w.pool)
	for _, env := range []accountsv1.Environment{live, accountsv1.Environment_ENVIRONMENT_UNSPECIFIED, accountsv1.Environment(7)} {
		_, err := portal.TopUp(ctx, &walletv1.TopUpRequest{AccountId: a, Environment: env, Currency: "USD", AmountMinor: 100_00, Reference: "portal-1"})
		wantTwirp(t, "portal TopUp in "+env.String(), err, twirp.PermissionDenied, "")
	}
	if after := tables(t, w.pool); after != before {
		t.Errorf("refused top-ups changed the tables:\n%s\n%s", before, after)
	}

	top, err := portal.TopUp(ctx, &walletv1.TopUpRequest{AccountId: a, Environment: sandbox, Currency: "USD", AmountMinor: 100_00, Reference: "portal-1", Note: "portal"})
	if err != nil || top.GetActor() != "portal" || top.GetBalanceAfterMinor() != 100_00 || top.GetEnvironment() != sandbox {
		t.Fatalf("portal sandbox TopUp = %v, %v", top, err)
	}
	if b, err := portal.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: a, Environment: sandbox, Currency: "USD"}); err != nil || b.GetAmountMinor() != 100_00 {
		t.Errorf("portal GetBalance = %v, %v", b, err)
	}
	if l, err := portal.ListLedger(ctx, &walletv1.ListLedgerRequest{AccountId: a, Environment: sandbox}); err != nil || l.GetTotal() != 1 || !proto.Equal(l.GetEntries()[0], top) {
		t.Errorf("portal ListLedger = %v, %v", l, err)
	}
	// The operator still tops up live.
	if _, err := w.as(internalauth.Operator).TopUp(ctx, &walletv1.TopUpRequest{AccountId: a, Environment: live, Currency: "USD", AmountMinor: 1_00, Reference: "wire"}); err != nil {
		t.Errorf("operator live TopUp: %v", err)
	}
	// Nor may the portal debit or refund.
	_, err = portal.Debit(ctx, &walletv1.DebitRequest{AccountId: a, Environment: sandbox, Currency: "USD", AmountMinor: 1_00, Reference: "x"})
	wantTwirp(t, "portal Debit", err, twirp.PermissionDenied, "")
}

// Money moves through every method, each call made by the caller the
// policy names, who is recorded as the entry's actor.
func TestMovementsOverTheWire(t *testing.T) {
	ctx := context.Background()
	w := newWallets(t)
	operator, ordering, gateway := w.as(internalauth.Operator), w.as(internalauth.Ordering), w.as(internalauth.Gateway)
	a := uuid.NewString()

	zero, err := gateway.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: a, Environment: live, Currency: "EUR"})
	want := &walletv1.Balance{AccountId: a, Environment: live, Currency: "EUR"}
	if err != nil || !proto.Equal(zero, want) {
		t.Errorf("GetBalance never topped up = %v, %v; want %v", zero, err, want)
	}

	top, err := operator.TopUp(ctx, &walletv1.TopUpRequest{AccountId: a, Environment: live, Currency: "EUR", AmountMinor: 50_00, Reference: "wire 2026-03", Note: "March"})
	if err != nil {
		t.Fatalf("TopUp: %v", err)
	}
	if top.GetKind() != walletv1.EntryKind_ENTRY_KIND_TOP_UP || top.GetActor() != "operator" || top.GetAmountMinor() != 50_00 ||
		top.GetBalanceAfterMinor() != 50_00 || top.GetNote() != "March" || top.GetEnvironment() != live || top.GetAccountId() != a ||
		top.GetCurrency() != "EUR" || top.GetCreatedAt() == nil {
		t.Errorf("TopUp = %v", top)
	}
	if id, err := uuid.Parse(top.GetId()); err != nil || id.Version() != 7 {
		t.Errorf("entry id %q is not a UUID v7", top.GetId())
	}
	again, err := operator.TopUp(ctx, &walletv1.TopUpRequest{AccountId: a, Environment: live, Currency: "EUR", AmountMinor: 50_00, Reference: "wire 2026-03"})
	if err != nil || !proto.Equal(again, top) {
		t.Errorf("repeated TopUp = %v, %v; want the first entry %v", again, err, top)
	}

	d, err := ordering.Debit(ctx, &walletv1.DebitRequest{AccountId: a, Environment: live, Currency: "EUR", AmountMinor: 12_50, Reference: "order-1"})
	if err != nil || d.GetKind() != walletv1.EntryKind_ENTRY_KIND_DEBIT || d.GetActor() != "ordering" || d.GetBalanceAfterMinor() != 37_50 {
		t.Fatalf("Debit = %v, %v", d, err)
	}
	r, err := ordering.Refund(ctx, &walletv1.RefundRequest{AccountId: a, Environment: live, DebitReference: "order-1"})
	if err != nil || r.GetKind() != walletv1.EntryKind_ENTRY_KIND_REFUND || r.GetAmountMinor() != 12_50 || r.GetCurrency() != "EUR" ||
		r.GetReference() != "order-1" || r.GetBalanceAfterMinor() != 50_00 || r.GetActor() != "ordering" {
		t.Fatalf("Refund = %v, %v", r, err)
	}
	if again, err := ordering.Refund(ctx, &walletv1.RefundRequest{AccountId: a, Environment: live, DebitReference: "order-1"}); err != nil || !proto.Equal(again, r) {
		t.Errorf("second Refund = %v, %v; want the first refund", again, err)
	}

	for name, c := range map[string]walletv1.Wallet{"gateway": gateway, "operator": operator, "ordering": ordering} {
		b, err := c.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: a, Environment: live, Currency: "EUR"})
		if err != nil || b.GetAmountMinor() != 50_00 || !b.GetUpdatedAt().AsTime().Equal(r.GetCreatedAt().AsTime()) {
			t.Errorf("GetBalance by %s = %v, %v; want 50.00 updated at the refund", name, b, err)
		}
	}
	if b, err := gateway.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: a, Environment: sandbox, Currency: "USD"}); err != nil || b.GetAmountMinor() != 0 || b.GetUpdatedAt() != nil {
		t.Errorf("sandbox balance = %v, %v; want 0, apart from live", b, err)
	}

	list, err := operator.ListLedger(ctx, &walletv1.ListLedgerRequest{AccountId: a, Environment: live})
	if err != nil || list.GetTotal() != 3 || len(list.GetEntries()) != 3 {
		t.Fatalf("ListLedger = %v, %v; want 3 entries", list, err)
	}
	for i, want := range []*walletv1.LedgerEntry{r, d, top} {
		if !proto.Equal(list.GetEntries()[i], want) {
			t.Errorf("ListLedger entry %d = %v, want %v", i, list.GetEntries()[i], want)
		}
	}
	page2, err := operator.ListLedger(ctx, &walletv1.ListLedgerRequest{AccountId: a, Environment: live, Page: 2, Limit: 2})
	if err != nil || page2.GetTotal() != 3 || len(page2.GetEntries()) != 1 || !proto.Equal(page2.GetEntries()[0], top) {
		t.Errorf("ListLedger page 2 of 2 = %v, %v; want the top-up alone", page2, err)
	}
	if empty, err := operator.ListLedger(ctx, &walletv1.ListLedgerRequest{AccountId: a, Environment: sandbox}); err != nil || len(empty.GetEntries()) != 0 || empty.GetTotal() != 0 {
		t.Errorf("ListLedger of the sandbox = %v, %v; want none", empty, err)
	}
}

// TestEveryRefusalLeavesMoneyUntouched sends every kind of refused call:
// each answer has the code the contract promises (with the field, or the
// reason, in its meta), and not a row changes: no balance, no entry.
func TestEveryRefusalLeavesMoneyUntouched(t *testing.T) {
	ctx := context.Background()
	w := newWallets(t)
	operator, ordering, gateway := w.as(internalauth.Operator), w.as(internalauth.Ordering), w.as(internalauth.Gateway)
	nobody := w.with(w.ts.Client())
	forger := w.with(internalauth.Client(w.ts.Client(), internalauth.NewToken()))
	hashHolder := w.with(internalauth.Client(w.ts.Client(), internalauth.Hash(internalauthtest.Token(internalauth.Operator))))

	a := uuid.NewString()
	if _, err := operator.TopUp(ctx, &walletv1.TopUpRequest{AccountId: a, Environment: live, Currency: "USD", AmountMinor: 10_00, Reference: "wire-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ordering.Debit(ctx, &walletv1.DebitRequest{AccountId: a, Environment: live, Currency: "USD", AmountMinor: 4_00, Reference: "order-1"}); err != nil {
		t.Fatal(err)
	}
	before := tables(t, w.pool)

	topUp := func(c walletv1.Wallet, r *walletv1.TopUpRequest) func() error {
		return func() error { _, err := c.TopUp(ctx, r); return err }
	}
	debit := func(c walletv1.Wallet, r *walletv1.DebitRequest) func() error {
		return func() error { _, err := c.Debit(ctx, r); return err }
	}
	refund := func(c walletv1.Wallet, r *walletv1.RefundRequest) func() error {
		return func() error { _, err := c.Refund(ctx, r); return err }
	}
	getBalance := func(c walletv1.Wallet, r *walletv1.GetBalanceRequest) func() error {
		return func() error { _, err := c.GetBalance(ctx, r); return err }
	}
	listLedger := func(c walletv1.Wallet, r *walletv1.ListLedgerRequest) func() error {
		return func() error { _, err := c.ListLedger(ctx, r); return err }
	}
	okTopUp := func(change func(*walletv1.TopUpRequest)) *walletv1.TopUpRequest {
		r := &walletv1.TopUpRequest{AccountId: a, Environment: live, Currency: "USD", AmountMinor: 1_00, Reference: "wire-2"}
		change(r)
		return r
	}
	okDebit := func(change func(*walletv1.DebitRequest)) *walletv1.DebitRequest {
		r := &walletv1.DebitRequest{AccountId: a, Environment: live, Currency: "USD", AmountMinor: 1_00, Reference: "order-2"}
		change(r)
		return r
	}
	goodTopUp, goodDebit := okTopUp(func(*walletv1.TopUpRequest) {}), okDebit(func(*walletv1.DebitRequest) {})
	goodRefund := &walletv1.RefundRequest{AccountId: a, Environment: live, DebitReference: "order-1"}

	for _, tc := range []struct {
		name     string
		call     func() error
		code     twirp.ErrorCode
		argument string
	}{
		// invalid_argument, naming the field.
		{"TopUp malformed account", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.AccountId = "acme" })), twirp.InvalidArgument, "account_id"},
		{"TopUp nil account", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.AccountId = uuid.Nil.String() })), twirp.InvalidArgument, "account_id"},
		{"TopUp unspecified environment", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Environment = 0 })), twirp.InvalidArgument, "environment"},
		{"TopUp unknown environment", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Environment = 7 })), twirp.InvalidArgument, "environment"},
		{"TopUp lower-case currency", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Currency = "usd" })), twirp.InvalidArgument, "currency"},
		{"TopUp in another currency than held", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Currency = "EUR" })), twirp.InvalidArgument, "currency"},
		{"TopUp zero", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.AmountMinor = 0 })), twirp.InvalidArgument, "amount_minor"},
		{"TopUp negative", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.AmountMinor = -1_00 })), twirp.InvalidArgument, "amount_minor"},
		{"TopUp over the cap", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.AmountMinor = wallet.MaxAmountMinor + 1 })), twirp.InvalidArgument, "amount_minor"},
		{"TopUp no reference", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Reference = "" })), twirp.InvalidArgument, "reference"},
		{"TopUp non-ASCII reference", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Reference = "virement-é" })), twirp.InvalidArgument, "reference"},
		{"TopUp long reference", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Reference = strings.Repeat("r", 256) })), twirp.InvalidArgument, "reference"},
		{"TopUp long note", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Note = strings.Repeat("n", 256) })), twirp.InvalidArgument, "note"},
		{"TopUp note with a bidi override", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Note = "paid \u202e" })), twirp.InvalidArgument, "note"},
		{"Debit malformed account", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.AccountId = "" })), twirp.InvalidArgument, "account_id"},
		{"Debit unspecified environment", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.Environment = 0 })), twirp.InvalidArgument, "environment"},
		{"Debit unsold currency", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.Currency = "JPY" })), twirp.InvalidArgument, "currency"},
		{"Debit in another currency than held", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.Currency = "GBP" })), twirp.InvalidArgument, "currency"},
		{"Debit zero", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.AmountMinor = 0 })), twirp.InvalidArgument, "amount_minor"},
		{"Debit reference with a newline", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.Reference = "order\n2" })), twirp.InvalidArgument, "reference"},
		{"Refund malformed account", refund(ordering, &walletv1.RefundRequest{AccountId: "x", Environment: live, DebitReference: "order-1"}), twirp.InvalidArgument, "account_id"},
		{"Refund unspecified environment", refund(ordering, &walletv1.RefundRequest{AccountId: a, DebitReference: "order-1"}), twirp.InvalidArgument, "environment"},
		{"Refund no reference", refund(ordering, &walletv1.RefundRequest{AccountId: a, Environment: live}), twirp.InvalidArgument, "debit_reference"},
		{"GetBalance malformed account", getBalance(gateway, &walletv1.GetBalanceRequest{AccountId: "../etc", Environment: live, Currency: "USD"}), twirp.InvalidArgument, "account_id"},
		{"GetBalance no currency", getBalance(gateway, &walletv1.GetBalanceRequest{AccountId: a, Environment: live}), twirp.InvalidArgument, "currency"},
		{"GetBalance in another currency than held", getBalance(gateway, &walletv1.GetBalanceRequest{AccountId: a, Environment: live, Currency: "EUR"}), twirp.InvalidArgument, "currency"},
		{"ListLedger malformed account", listLedger(operator, &walletv1.ListLedgerRequest{AccountId: "1", Environment: live}), twirp.InvalidArgument, "account_id"},
		{"ListLedger page -1", listLedger(operator, &walletv1.ListLedgerRequest{AccountId: a, Environment: live, Page: -1}), twirp.InvalidArgument, "page"},
		{"ListLedger page over the bound", listLedger(operator, &walletv1.ListLedgerRequest{AccountId: a, Environment: live, Page: wallet.MaxPage + 1}), twirp.InvalidArgument, "page"},
		{"ListLedger limit 101", listLedger(operator, &walletv1.ListLedgerRequest{AccountId: a, Environment: live, Limit: 101}), twirp.InvalidArgument, "limit"},

		// not_found: no such debit in the account and environment.
		{"Refund of no debit", refund(ordering, &walletv1.RefundRequest{AccountId: a, Environment: live, DebitReference: "order-9"}), twirp.NotFound, ""},
		{"Refund of a top-up", refund(ordering, &walletv1.RefundRequest{AccountId: a, Environment: live, DebitReference: "wire-1"}), twirp.NotFound, ""},
		{"Refund in the other environment", refund(ordering, &walletv1.RefundRequest{AccountId: a, Environment: sandbox, DebitReference: "order-1"}), twirp.NotFound, ""},
		{"Refund in another account", refund(ordering, &walletv1.RefundRequest{AccountId: uuid.NewString(), Environment: live, DebitReference: "order-1"}), twirp.NotFound, ""},

		// already_exists: a used reference, another amount or currency.
		{"TopUp used reference, other amount", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Reference = "wire-1" })), twirp.AlreadyExists, ""},
		{"TopUp used reference, other currency", topUp(operator, okTopUp(func(r *walletv1.TopUpRequest) { r.Reference, r.AmountMinor, r.Currency = "wire-1", 10_00, "EUR" })), twirp.AlreadyExists, ""},
		{"Debit used reference, other amount", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.Reference = "order-1" })), twirp.AlreadyExists, ""},
		{"Debit used reference, more than held", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.Reference, r.AmountMinor = "order-1", 99_00 })), twirp.AlreadyExists, ""},

		// failed_precondition, reason insufficient_funds (checked below).
		{"Debit over the balance", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.AmountMinor = 6_01 })), twirp.FailedPrecondition, ""},
		{"Debit of a balance never topped up", debit(ordering, okDebit(func(r *walletv1.DebitRequest) { r.Environment = sandbox })), twirp.FailedPrecondition, ""},

		// unauthenticated: no credential, or one that is no caller's.
		{"TopUp without a credential", topUp(nobody, goodTopUp), twirp.Unauthenticated, ""},
		{"Debit without a credential", debit(nobody, goodDebit), twirp.Unauthenticated, ""},
		{"Refund without a credential", refund(nobody, goodRefund), twirp.Unauthenticated, ""},
		{"GetBalance without a credential", getBalance(nobody, &walletv1.GetBalanceRequest{AccountId: a, Environment: live, Currency: "USD"}), twirp.Unauthenticated, ""},
		{"ListLedger without a credential", listLedger(nobody, &walletv1.ListLedgerRequest{AccountId: a, Environment: live}), twirp.Unauthenticated, ""},
		{"TopUp with a wrong token", topUp(forger, goodTopUp), twirp.Unauthenticated, ""},
		{"Debit with a wrong token", debit(forger, goodDebit), twirp.Unauthenticated, ""},
		{"Refund with a wrong token", refund(forger, goodRefund), twirp.Unauthenticated, ""},
		{"TopUp with the token's hash", topUp(hashHolder, goodTopUp), twirp.Unauthenticated, ""},

		// permission_denied: a known caller outside the method's rule.
		{"gateway TopUp", topUp(gateway, goodTopUp), twirp.PermissionDenied, ""},
		{"gateway Debit", debit(gateway, goodDebit), twirp.PermissionDenied, ""},
		{"gateway Refund", refund(gateway, goodRefund), twirp.PermissionDenied, ""},
		{"gateway ListLedger", listLedger(gateway, &walletv1.ListLedgerRequest{AccountId: a, Environment: live}), twirp.PermissionDenied, ""},
		{"ordering TopUp", topUp(ordering, goodTopUp), twirp.PermissionDenied, ""},
		{"ordering ListLedger", listLedger(ordering, &walletv1.ListLedgerRequest{AccountId: a, Environment: live}), twirp.PermissionDenied, ""},
		{"operator Debit", debit(operator, goodDebit), twirp.PermissionDenied, ""},
		{"operator Refund", refund(operator, goodRefund), twirp.PermissionDenied, ""},
	} {
		err := tc.call()
		wantTwirp(t, tc.name, err, tc.code, tc.argument)
		var twerr twirp.Error
		if errors.As(err, &twerr) {
			if reason := twerr.Meta("reason"); tc.code == twirp.FailedPrecondition && reason != "insufficient_funds" {
				t.Errorf("%s: reason = %q, want insufficient_funds", tc.name, reason)
			}
			if strings.Contains(twerr.Msg(), "SELECT") || strings.Contains(twerr.Msg(), "postgres") {
				t.Errorf("%s: the message shows storage details: %s", tc.name, twerr.Msg())
			}
		}
	}

	if after := tables(t, w.pool); after != before {
		t.Errorf("refused calls changed the tables:\n%s\nwant\n%s", after, before)
	}
	b, err := gateway.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: a, Environment: live, Currency: "USD"})
	if err != nil || b.GetAmountMinor() != 6_00 {
		t.Errorf("balance after refused calls = %v, %v; want 6.00", b, err)
	}
	if list, err := operator.ListLedger(ctx, &walletv1.ListLedgerRequest{AccountId: a, Environment: live}); err != nil || list.GetTotal() != 2 {
		t.Errorf("ledger after refused calls = %v, %v; want the top-up and the debit", list, err)
	}
}

// A debit refused for insufficient funds stored nothing: the same
// reference debits once the balance is topped up.
func TestRefusedDebitCanBeRetriedAfterATopUp(t *testing.T) {
	ctx := context.Background()
	w := newWallets(t)
	operator, ordering := w.as(internalauth.Operator), w.as(internalauth.Ordering)
	a := uuid.NewString()
	order := &walletv1.DebitRequest{AccountId: a, Environment: sandbox, Currency: "GBP", AmountMinor: 9_99, Reference: "order-7"}

	_, err := ordering.Debit(ctx, order)
	wantTwirp(t, "debit before any top-up", err, twirp.FailedPrecondition, "")
	if _, err := operator.TopUp(ctx, &walletv1.TopUpRequest{AccountId: a, Environment: sandbox, Currency: "GBP", AmountMinor: 9_98, Reference: "wire-1"}); err != nil {
		t.Fatal(err)
	}
	_, err = ordering.Debit(ctx, order)
	wantTwirp(t, "debit of 9.99 from 9.98", err, twirp.FailedPrecondition, "")
	if _, err := operator.TopUp(ctx, &walletv1.TopUpRequest{AccountId: a, Environment: sandbox, Currency: "GBP", AmountMinor: 1, Reference: "wire-2"}); err != nil {
		t.Fatal(err)
	}
	d, err := ordering.Debit(ctx, order)
	if err != nil || d.GetBalanceAfterMinor() != 0 {
		t.Fatalf("debit after the top-up = %v, %v; want it to empty the balance", d, err)
	}
	if again, err := ordering.Debit(ctx, order); err != nil || !proto.Equal(again, d) {
		t.Errorf("repeated debit on the emptied balance = %v, %v; want the first entry", again, err)
	}
}

// A storage failure is Internal with a bland message: no SQL, no
// connection details, and not insufficient funds or not found, which
// callers would act on.
func TestStorageFailureIsInternal(t *testing.T) {
	ctx := context.Background()
	w := newWallets(t)
	a := uuid.NewString()
	w.pool.Close()

	_, err := w.as(internalauth.Ordering).Debit(ctx, &walletv1.DebitRequest{AccountId: a, Environment: live, Currency: "USD", AmountMinor: 1, Reference: "order-1"})
	wantTwirp(t, "debit during an outage", err, twirp.Internal, "")
	_, err = w.as(internalauth.Gateway).GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: a, Environment: live, Currency: "USD"})
	wantTwirp(t, "balance during an outage", err, twirp.Internal, "")
	var twerr twirp.Error
	if errors.As(err, &twerr) && twerr.Msg() != "internal error" {
		t.Errorf("internal error message = %q, want the bland %q", twerr.Msg(), "internal error")
	}
}

// The Twirp server outside Protect has no caller to record, and moves no
// money rather than an anonymous one.
func TestServerWithoutProtectMovesNothing(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t, postgres.Migrations)
	srv := twirpserver.New(wallet.NewService(postgres.NewStore(pool)))
	_, err := srv.TopUp(ctx, &walletv1.TopUpRequest{AccountId: uuid.NewString(), Environment: live, Currency: "USD", AmountMinor: 1, Reference: "wire-1"})
	wantTwirp(t, "TopUp without a caller", err, twirp.Internal, "")
	if dump := tables(t, pool); dump != " " {
		t.Errorf("a call without a caller stored %s", dump)
	}
	ctx = internalauth.WithCaller(ctx, internalauth.Operator)
	if e, err := srv.TopUp(ctx, &walletv1.TopUpRequest{AccountId: uuid.NewString(), Environment: live, Currency: "USD", AmountMinor: 1, Reference: "wire-1"}); err != nil || e.GetActor() != "operator" {
		t.Errorf("TopUp as the operator = %v, %v", e, err)
	}
}
