package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/esimplatform/esim/proto/limits"
	"github.com/esimplatform/esim/proto/partnerapi"

	"github.com/esimplatform/esim/services/gateway"
)

// TopUp is partnerapi's, which the webhook service sends too.
type (
	TopUp      = partnerapi.TopUp
	TopUpPrice = partnerapi.TopUpPrice
)

// TopUpRequest is the body of POST /esims/{id}/topups.
type TopUpRequest struct {
	PlanID string `json:"plan_id" format:"uuid" doc:"A plan from GET /v1/plans?topup_for=<the eSIM's id>: of the eSIM plan's type, covering every country it covers." example:"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c"`
	Days   *int   `json:"days,omitempty" doc:"Days of a per-day plan; 1 when left out. On a fixed plan only 1 is accepted."`
}

// SimulateRequest is the body of POST /sandbox/esims/{id}/simulate.
type SimulateRequest struct {
	Action string `json:"action" enum:"install,activate,consume,expire" doc:"install: ALLOCATED to INSTALLED; activate: INSTALLED to ACTIVE, starting the validity clock; consume: use bytes of data (ACTIVE only; past the total it is DEPLETED); expire: EXPIRED now."`
	Bytes  *int64 `json:"bytes,omitempty" minimum:"1" doc:"Bytes used, with consume only."`
}

type createTopUpInput struct {
	StrictQuery
	ID             string `path:"id" doc:"eSIM id (UUID)."`
	IdempotencyKey string `header:"Idempotency-Key" doc:"Up to 255 printable ASCII characters. A retry with the same key and body replays the first answer and never charges twice; send one with every top-up. Keys share one space with orders' keys."`
	Body           TopUpRequest
}

// Resolve refuses an Idempotency-Key as POST /orders does.
func (in *createTopUpInput) Resolve(ctx huma.Context) []error {
	return append(in.StrictQuery.Resolve(ctx), idempotencyKeyFault(ctx, in.IdempotencyKey)...)
}

type createTopUpOutput struct {
	Status int
	Replay string `header:"Idempotent-Replay" doc:"true when this answers an earlier request with the same Idempotency-Key."`
	Body   Envelope[TopUp]
}

type simulateInput struct {
	StrictQuery
	ID   string `path:"id" doc:"Sandbox eSIM id (UUID)."`
	Body SimulateRequest
}

type simulateOutput struct {
	Body Envelope[Esim]
}

// topUpBounds gives POST /esims/{id}/topups' days the bounds of
// proto/limits, as orderBounds does for orders.
func topUpBounds(oapi *huma.OpenAPI, op *huma.Operation) {
	if op.OperationID != "create-topup" {
		return
	}
	req := oapi.Components.Schemas.Map()["TopUpRequest"]
	if req == nil {
		panic("httpapi: TopUpRequest must be registered before its bounds are set")
	}
	days := req.Properties["days"]
	lo, hi := 1.0, float64(limits.MaxDays)
	days.Minimum, days.Maximum = &lo, &hi
	days.Description += fmt.Sprintf(" From 1 to %d.", limits.MaxDays)
	days.PrecomputeMessages()
}

// sandboxOnly marks an operation that a live key does not see: the
// middleware answers it not_found before anything else, its body
// unread, as it would a path that does not exist.
const sandboxOnly = "x-sandbox-only"

func (a *handlers) registerEsims(api huma.API) {
	huma.Register(api, huma.Operation{
		OperationID:   "create-topup",
		Method:        http.MethodPost,
		Path:          "/esims/{id}/topups",
		Summary:       "Top up an eSIM",
		Description:   "Buys more of the same for an eSIM, debited from the balance: a fixed plan adds its data and validity days, a per-day plan the days bought. The plan must be of the eSIM plan's type and cover every country the eSIM's plan covers (else 400 naming `plan_id`; GET /v1/plans?topup_for= lists those that do); an EXPIRED eSIM is 400 naming `id`. 201 for a new top-up; 200 with `Idempotent-Replay: true` for a retry with the same `Idempotency-Key` and body, which is never charged again. A top-up the provider refused answers 502 `provider_error` after refunding it in full.",
		Tags:          []string{"eSIMs"},
		Security:      bearerAuth,
		DefaultStatus: http.StatusCreated,
		Errors:        orderErrors,
		Responses: map[string]*huma.Response{
			"200": {Description: "A replay of an earlier request with the same Idempotency-Key: the same top-up, not charged again."},
		},
	}, a.createTopUp)

	huma.Register(api, huma.Operation{
		OperationID: "simulate-esim",
		Method:      http.MethodPost,
		Path:        "/sandbox/esims/{id}/simulate",
		Summary:     "Simulate an eSIM's lifecycle (sandbox)",
		Description: "Moves a sandbox eSIM as a device and the network would, with the events that follow: install, activate, consume `bytes` of data, expire. An action out of order (activate before install, consume when not ACTIVE) is 400 naming `action`. With a live key, and for another account's or environment's eSIM, not_found.",
		Tags:        []string{"eSIMs"},
		Security:    bearerAuth,
		Metadata:    map[string]any{sandboxOnly: true},
		Errors:      append([]int{http.StatusNotFound}, readErrors...),
	}, a.simulateEsim)
}

func (a *handlers) createTopUp(ctx context.Context, in *createTopUpInput) (*createTopUpOutput, error) {
	id, ok := canonicalID(in.ID)
	if !ok {
		return nil, fromDomain(ctx, withMessage(gateway.ErrNotFound, fmt.Sprintf("No eSIM %q in this environment.", in.ID)))
	}
	topUp, replayed, err := a.Orders.CreateTopUp(ctx, principalFrom(ctx), gateway.NewTopUp{
		EsimID: id, PlanID: in.Body.PlanID, Days: in.Body.Days, IdempotencyKey: in.IdempotencyKey,
	})
	failed := ""
	if err == nil && topUp.Status == partnerapi.OrderFailed {
		failed = fmt.Sprintf("The top-up failed (%s); top-up %s was refunded in full. Buy a new one with a new Idempotency-Key.", topUp.Error.Message, topUp.ID)
	}
	// Ordering does not say which of the two it did not find.
	notFound := fmt.Sprintf("No eSIM %q in this environment, or no plan %q on sale. GET /v1/plans?topup_for=%s lists the plans that may top it up.", in.ID, in.Body.PlanID, id)
	status, replay, err := a.purchased(ctx, err, notFound, replayed, failed)
	if err != nil {
		return nil, err
	}
	return &createTopUpOutput{Status: status, Replay: replay, Body: Envelope[TopUp]{Data: topUp}}, nil
}

func (a *handlers) simulateEsim(ctx context.Context, in *simulateInput) (*simulateOutput, error) {
	id, ok := canonicalID(in.ID)
	var esim Esim
	err := gateway.ErrNotFound
	if ok {
		esim, err = a.Orders.SimulateEsim(ctx, principalFrom(ctx), id, gateway.Simulation{Action: in.Body.Action, Bytes: in.Body.Bytes})
	}
	if errors.Is(err, gateway.ErrNotFound) {
		return nil, fromDomain(ctx, withMessage(err, fmt.Sprintf("No sandbox eSIM %q in this environment.", in.ID)))
	}
	if err != nil {
		return nil, a.problem(ctx, err)
	}
	return &simulateOutput{Body: Envelope[Esim]{Data: esim}}, nil
}
