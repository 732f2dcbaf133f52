package rollout

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/internalauth"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	cataloguev1 "github.com/esimplatform/esim/proto/catalogue/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	walletv1 "github.com/esimplatform/esim/proto/wallet/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
)

// workload is what a test asks of a service over its Twirp API, as its
// callers would.
type workload struct {
	// needs are the services its writes call, started before it.
	needs []string
	// prepare readies the stack for writes, once, after needs are up.
	prepare func(ctx context.Context, st *stack) error
	// read reads from the replica at base; write writes to it and reads
	// back what it wrote.
	read, write func(ctx context.Context, st *stack, base string) error
}

var sandbox = accountsv1.Environment_ENVIRONMENT_SANDBOX

// calls numbers the writes of the test run, for names and references of
// their own.
var calls atomic.Int64

// partner is the account whose money, orders and endpoint the tests
// move: no service checks that accounts knows it.
var partner = uuid.Must(uuid.NewV7()).String()

var workloads = map[string]workload{
	"accounts": {
		read: func(ctx context.Context, st *stack, base string) error {
			_, err := accountsv1.NewAccountsProtobufClient(base, st.client(internalauth.Operator)).ListAccounts(ctx, &accountsv1.ListAccountsRequest{Limit: 5})
			return err
		},
		write: func(ctx context.Context, st *stack, base string) error {
			c := accountsv1.NewAccountsProtobufClient(base, st.client(internalauth.Operator))
			a, err := c.CreateAccount(ctx, &accountsv1.CreateAccountRequest{Name: fmt.Sprintf("Rollout %d", calls.Add(1))})
			if err != nil {
				return err
			}
			_, err = c.GetAccount(ctx, &accountsv1.GetAccountRequest{Id: a.GetId()})
			return err
		},
	},
	"catalogue": {
		read: func(ctx context.Context, st *stack, base string) error {
			list, err := cataloguev1.NewCatalogueProtobufClient(base, st.client(internalauth.Operator)).ListPlans(ctx, &cataloguev1.ListPlansRequest{Currency: "USD", Limit: 1})
			if err == nil && len(list.GetPlans()) == 0 {
				err = errors.New("no plans: SEED_CATALOGUE seeded none")
			}
			return err
		},
		write: func(ctx context.Context, st *stack, base string) error {
			c := cataloguev1.NewCatalogueProtobufClient(base, st.client(internalauth.Operator))
			// A plan of its own among the first hundred, so that writes to
			// two replicas at once rename different plans.
			n := calls.Add(1)
			list, err := c.ListPlans(ctx, &cataloguev1.ListPlansRequest{Currency: "USD", Limit: 1, Page: int32(n%100) + 1})
			if err != nil {
				return err
			}
			if len(list.GetPlans()) == 0 {
				return fmt.Errorf("no plan %d: SEED_CATALOGUE seeded fewer", n%100+1)
			}
			plan := list.GetPlans()[0]
			plan.Name = fmt.Sprintf("Rollout plan %d", n)
			if _, err := c.UpsertPlans(ctx, &cataloguev1.UpsertPlansRequest{Plans: []*cataloguev1.Plan{plan}}); err != nil {
				return err
			}
			got, err := c.GetPlan(ctx, &cataloguev1.GetPlanRequest{Id: plan.GetId()})
			if err == nil && got.GetName() != plan.GetName() {
				err = fmt.Errorf("plan %s is named %q after renaming it %q", plan.GetId(), got.GetName(), plan.GetName())
			}
			return err
		},
	},
	"wallet": {
		read: func(ctx context.Context, st *stack, base string) error {
			_, err := walletv1.NewWalletProtobufClient(base, st.client(internalauth.Operator)).GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: partner, Environment: sandbox, Currency: "USD"})
			return err
		},
		write: func(ctx context.Context, st *stack, base string) error {
			c := walletv1.NewWalletProtobufClient(base, st.client(internalauth.Operator))
			entry, err := c.TopUp(ctx, &walletv1.TopUpRequest{AccountId: partner, Environment: sandbox, Currency: "USD", AmountMinor: 100,
				Reference: fmt.Sprintf("rollout-%s-%d", partner, calls.Add(1))})
			if err != nil {
				return err
			}
			b, err := c.GetBalance(ctx, &walletv1.GetBalanceRequest{AccountId: partner, Environment: sandbox, Currency: "USD"})
			if err == nil && b.GetAmountMinor() < entry.GetBalanceAfterMinor() {
				err = fmt.Errorf("balance %d after a top-up to %d", b.GetAmountMinor(), entry.GetBalanceAfterMinor())
			}
			return err
		},
	},
	"ordering": {
		needs: []string{"catalogue", "wallet"},
		prepare: func(ctx context.Context, st *stack) error {
			list, err := cataloguev1.NewCatalogueProtobufClient(st.urls["catalogue"], st.client(internalauth.Operator)).ListPlans(ctx,
				&cataloguev1.ListPlansRequest{Currency: "USD", Type: cataloguev1.PlanType_PLAN_TYPE_FIXED, Limit: 1})
			if err != nil {
				return err
			}
			if len(list.GetPlans()) == 0 {
				return errors.New("the catalogue has no fixed plan priced in USD")
			}
			st.plan = list.GetPlans()[0].GetId()
			_, err = walletv1.NewWalletProtobufClient(st.urls["wallet"], st.client(internalauth.Operator)).TopUp(ctx, &walletv1.TopUpRequest{
				AccountId: partner, Environment: sandbox, Currency: "USD", AmountMinor: 1_000_000_000, Reference: "rollout-" + uuid.NewString()})
			return err
		},
		read: func(ctx context.Context, st *stack, base string) error {
			_, err := orderingv1.NewOrderingProtobufClient(base, st.client(internalauth.Operator)).ListOrders(ctx, &orderingv1.ListOrdersRequest{Limit: 5})
			return err
		},
		write: func(ctx context.Context, st *stack, base string) error {
			scope := &orderingv1.Scope{AccountId: partner, Environment: sandbox}
			created, err := orderingv1.NewOrderingProtobufClient(base, st.client(internalauth.Gateway)).CreateOrder(ctx, &orderingv1.CreateOrderRequest{
				Scope: scope, Currency: "USD", PlanId: st.plan, IdempotencyKey: fmt.Sprintf("rollout-%d", calls.Add(1))})
			if err != nil {
				return err
			}
			if s := created.GetOrder().GetStatus(); s != orderingv1.OrderStatus_ORDER_STATUS_COMPLETED {
				return fmt.Errorf("order %s is %s: %s", created.GetOrder().GetId(), s, created.GetOrder().GetError())
			}
			_, err = orderingv1.NewOrderingProtobufClient(base, st.client(internalauth.Operator)).GetOrder(ctx, &orderingv1.GetOrderRequest{Id: created.GetOrder().GetId(), Scope: scope})
			return err
		},
	},
	"webhook": {
		read: func(ctx context.Context, st *stack, base string) error {
			_, err := webhookv1.NewWebhookProtobufClient(base, st.client(internalauth.Operator)).ListEvents(ctx, &webhookv1.ListEventsRequest{Limit: 5})
			return err
		},
		write: func(ctx context.Context, st *stack, base string) error {
			c := webhookv1.NewWebhookProtobufClient(base, st.client(internalauth.Operator))
			// An account of its own, so that writes to two replicas at once
			// set different endpoints.
			scope := &webhookv1.Scope{AccountId: uuid.Must(uuid.NewV7()).String(), Environment: sandbox}
			url := fmt.Sprintf("https://hooks.example.com/rollout/%d", calls.Add(1))
			if _, err := c.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: url}); err != nil {
				return err
			}
			got, err := c.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: scope})
			if err == nil && got.GetUrl() != url {
				err = fmt.Errorf("endpoint is %s after setting %s", got.GetUrl(), url)
			}
			return err
		},
	},
}
