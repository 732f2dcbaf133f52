// Package partnerapi holds the JSON shapes of the partner API's resources
// that more than one service writes: the gateway answers orders and eSIMs
// in them, and the webhook service sends an order in them as an event's
// data. One definition keeps a webhook's data and GET /v1/orders/{id}
// the same document. The struct tags also document the gateway's OpenAPI
// schemas (doc, enum, format, nullable).
package partnerapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/libs/money"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
)

// Amount is money in minor units that goes on the wire as a JSON number
// with two decimals (1250 -> 12.50). It never passes through a float.
type Amount int64

// MarshalJSON writes the amount as a JSON number with two decimals.
func (a Amount) MarshalJSON() ([]byte, error) { return []byte(money.Decimal(int64(a))), nil }

// Order is an order and every eSIM it issued.
type Order struct {
	ID          string      `json:"id" format:"uuid"`
	Status      string      `json:"status" enum:"pending,completed,failed" doc:"completed: the eSIMs were issued; failed: issuing failed and the order was refunded in full; pending: still being issued."`
	Environment string      `json:"environment" enum:"sandbox,live"`
	PlanID      string      `json:"plan_id" format:"uuid"`
	Quantity    int         `json:"quantity"`
	Days        *int        `json:"days,omitempty" doc:"Days ordered; present on per-day plans only."`
	Price       OrderPrice  `json:"price"`
	Customer    Customer    `json:"customer"`
	Error       *OrderError `json:"error" doc:"null unless the order failed."`
	CreatedAt   time.Time   `json:"created_at"`
	Esims       []Esim      `json:"esims" doc:"One per eSIM issued; empty unless completed."`
}

// OrderPrice is what one eSIM cost and what the order debited.
type OrderPrice struct {
	Unit     Amount `json:"unit" doc:"One eSIM: the plan's price, times the days on per-day plans."`
	Total    Amount `json:"total" doc:"unit x quantity: what was debited from the balance."`
	Currency string `json:"currency" enum:"USD,EUR,GBP"`
}

// Customer is the order's customer; null where the order gave none.
type Customer struct {
	Name      *string `json:"name" nullable:"true"`
	Email     *string `json:"email" nullable:"true"`
	Reference *string `json:"reference" nullable:"true"`
}

// OrderError says why an order failed; an order that did not fail has
// null in its place (huma takes nullable for a struct from its blank
// field).
type OrderError struct {
	_       struct{} `nullable:"true"`
	Code    string   `json:"code" enum:"provider_error"`
	Message string   `json:"message"`
}

// Esim is one issued profile with everything needed to install it.
type Esim struct {
	ID             string      `json:"id" format:"uuid"`
	OrderID        string      `json:"order_id" format:"uuid"`
	PlanName       string      `json:"plan_name"`
	ICCID          string      `json:"iccid" doc:"18 to 20 digits starting 89, the last a Luhn check digit (19 in the sandbox)."`
	QRCodeURL      string      `json:"qr_code_url" format:"uri" doc:"A PNG of a QR code that encodes activation_code. Public and unguessable: share it with the traveller only."`
	ActivationCode string      `json:"activation_code" doc:"LPA:1$<smdp_address>$<matching id>."`
	SMDPAddress    string      `json:"smdp_address"`
	Status         string      `json:"status" enum:"ALLOCATED,INSTALLED,ACTIVE,DEPLETED,EXPIRED" doc:"Moves only forward: ALLOCATED (issued) -> INSTALLED (downloaded and installed on a device) -> ACTIVE (first network attach; the validity clock starts) -> DEPLETED (a fixed plan's data used up; a top-up makes it ACTIVE again) or EXPIRED (validity over; final)."`
	ValidityDays   int         `json:"validity_days" doc:"Days of validity from activation, top-ups included."`
	Data           EsimData    `json:"data"`
	Install        EsimInstall `json:"install"`
	InstalledAt    *time.Time  `json:"installed_at" nullable:"true" doc:"When the profile was installed on a device; null before."`
	ActivatedAt    *time.Time  `json:"activated_at" nullable:"true" doc:"When the eSIM first attached to a network; null before."`
	ExpiresAt      *time.Time  `json:"expires_at" nullable:"true" doc:"activated_at plus the validity, extended by top-ups; null until ACTIVE."`
	TopUps         []TopUp     `json:"topups" doc:"Every top-up bought for the eSIM, oldest first."`
	CreatedAt      time.Time   `json:"created_at"`
}

// TopUp is a purchase of more data or days for an eSIM.
type TopUp struct {
	ID        string      `json:"id" format:"uuid"`
	EsimID    string      `json:"esim_id" format:"uuid"`
	PlanID    string      `json:"plan_id" format:"uuid"`
	Days      int         `json:"days" doc:"Days added: those bought on per-day plans, the plan's validity on fixed ones."`
	Price     TopUpPrice  `json:"price"`
	Status    string      `json:"status" enum:"pending,completed,failed" doc:"completed: applied to the eSIM; failed: the provider refused it and it was refunded in full; pending: still being applied."`
	Error     *OrderError `json:"error" doc:"null unless the top-up failed."`
	CreatedAt time.Time   `json:"created_at"`
}

// TopUpPrice is what a top-up debited.
type TopUpPrice struct {
	Amount   Amount `json:"amount" doc:"The plan's price, times the days on per-day plans: what was debited from the balance."`
	Currency string `json:"currency" enum:"USD,EUR,GBP"`
}

// EsimData is the data allowance and its use.
type EsimData struct {
	Unlimited      bool      `json:"unlimited"`
	TotalBytes     *int64    `json:"total_bytes" nullable:"true" doc:"null when unlimited; grows with top-ups."`
	UsedBytes      int64     `json:"used_bytes"`
	RemainingBytes *int64    `json:"remaining_bytes" nullable:"true" doc:"total_bytes - used_bytes; null when unlimited."`
	UpdatedAt      time.Time `json:"updated_at" doc:"When usage was last read from the network."`
}

// EsimInstall is how a traveller installs the eSIM.
type EsimInstall struct {
	Instructions         string `json:"instructions" doc:"iOS and Android steps, with the SM-DP+ address and activation code for manual entry."`
	IOSUniversalLink     string `json:"ios_universal_link" format:"uri"`
	AndroidUniversalLink string `json:"android_universal_link" format:"uri"`
}

// An eSIM's statuses, as Esim.Status spells them.
const (
	EsimAllocated = "ALLOCATED"
	EsimInstalled = "INSTALLED"
	EsimActive    = "ACTIVE"
	EsimDepleted  = "DEPLETED"
	EsimExpired   = "EXPIRED"
)

// EsimStatuses lists them in their order.
var EsimStatuses = []string{EsimAllocated, EsimInstalled, EsimActive, EsimDepleted, EsimExpired}

// An order's statuses, as Order.Status spells them.
const (
	OrderPending   = "pending"
	OrderCompleted = "completed"
	OrderFailed    = "failed"
)

// ErrUnknown is what OrderFromProto fails with on a status or environment
// the partner API does not define (a newer ordering's): an order is not
// shown to a partner with a value made up in its place.
var ErrUnknown = errors.New("partnerapi: a value the partner API does not define")

var (
	statuses = map[orderingv1.OrderStatus]string{
		orderingv1.OrderStatus_ORDER_STATUS_PENDING:   OrderPending,
		orderingv1.OrderStatus_ORDER_STATUS_COMPLETED: OrderCompleted,
		orderingv1.OrderStatus_ORDER_STATUS_FAILED:    OrderFailed,
	}
	environments = map[accountsv1.Environment]string{
		accountsv1.Environment_ENVIRONMENT_SANDBOX: "sandbox",
		accountsv1.Environment_ENVIRONMENT_LIVE:    "live",
	}
)

// OrderFromProto is o as the partner API shows it: GET /v1/orders/{id}
// and a webhook event's data alike. It fails with ErrUnknown rather than
// show a status or environment the API does not define.
func OrderFromProto(o *orderingv1.Order) (Order, error) {
	status, ok := statuses[o.GetStatus()]
	if !ok {
		return Order{}, fmt.Errorf("%w: order %s has status %s", ErrUnknown, o.GetId(), o.GetStatus())
	}
	env, ok := environments[o.GetEnvironment()]
	if !ok {
		return Order{}, fmt.Errorf("%w: order %s has environment %s", ErrUnknown, o.GetId(), o.GetEnvironment())
	}
	out := Order{
		ID:          o.GetId(),
		Status:      status,
		Environment: env,
		PlanID:      o.GetPlanId(),
		Quantity:    int(o.GetQuantity()),
		Price: OrderPrice{
			Unit: Amount(o.GetPrice().GetUnitMinor()), Total: Amount(o.GetPrice().GetTotalMinor()), Currency: o.GetPrice().GetCurrency(),
		},
		Customer: Customer{
			Name: orNull(o.GetCustomer().GetName()), Email: orNull(o.GetCustomer().GetEmail()), Reference: orNull(o.GetCustomer().GetReference()),
		},
		CreatedAt: o.GetCreatedAt().AsTime().UTC(),
		Esims:     make([]Esim, len(o.GetEsims())),
	}
	if o.GetPerDay() {
		days := int(o.GetDays())
		out.Days = &days
	}
	if status == OrderFailed {
		out.Error = &OrderError{Code: o.GetError().GetCode(), Message: o.GetError().GetMessage()}
	}
	for i, e := range o.GetEsims() {
		var err error
		if out.Esims[i], err = EsimFromProto(e); err != nil {
			return Order{}, err
		}
	}
	return out, nil
}

// EsimFromProto is e as the partner API shows it.
func EsimFromProto(e *orderingv1.Esim) (Esim, error) {
	if !slices.Contains(EsimStatuses, e.GetStatus()) {
		return Esim{}, fmt.Errorf("%w: eSIM %s has status %q", ErrUnknown, e.GetId(), e.GetStatus())
	}
	out := Esim{
		ID:             e.GetId(),
		OrderID:        e.GetOrderId(),
		PlanName:       e.GetPlanName(),
		ICCID:          e.GetIccid(),
		QRCodeURL:      e.GetQrCodeUrl(),
		ActivationCode: e.GetActivationCode(),
		SMDPAddress:    e.GetSmdpAddress(),
		Status:         e.GetStatus(),
		ValidityDays:   int(e.GetValidityDays()),
		Data: EsimData{
			Unlimited: e.GetData().GetUnlimited(), UsedBytes: e.GetData().GetUsedBytes(), UpdatedAt: e.GetData().GetUpdatedAt().AsTime().UTC(),
		},
		Install: EsimInstall{
			Instructions:         e.GetInstall().GetInstructions(),
			IOSUniversalLink:     e.GetInstall().GetIosUniversalLink(),
			AndroidUniversalLink: e.GetInstall().GetAndroidUniversalLink(),
		},
		InstalledAt: timeOrNull(e.GetInstalledAt()),
		ActivatedAt: timeOrNull(e.GetActivatedAt()),
		ExpiresAt:   timeOrNull(e.GetExpiresAt()),
		TopUps:      make([]TopUp, len(e.GetTopups())),
		CreatedAt:   e.GetCreatedAt().AsTime().UTC(),
	}
	if !out.Data.Unlimited {
		total, used := e.GetData().GetTotalBytes(), e.GetData().GetUsedBytes()
		remaining := max(total-used, 0)
		out.Data.TotalBytes, out.Data.RemainingBytes = &total, &remaining
	}
	for i, t := range e.GetTopups() {
		var err error
		if out.TopUps[i], err = TopUpFromProto(t); err != nil {
			return Esim{}, err
		}
	}
	return out, nil
}

// TopUpFromProto is t as the partner API shows it: POST
// /v1/esims/{id}/topups, an eSIM's topups and a topup.* event's data.
func TopUpFromProto(t *orderingv1.TopUp) (TopUp, error) {
	status, ok := statuses[t.GetStatus()]
	if !ok {
		return TopUp{}, fmt.Errorf("%w: top-up %s has status %s", ErrUnknown, t.GetId(), t.GetStatus())
	}
	out := TopUp{
		ID:        t.GetId(),
		EsimID:    t.GetEsimId(),
		PlanID:    t.GetPlanId(),
		Days:      int(t.GetDays()),
		Price:     TopUpPrice{Amount: Amount(t.GetPrice().GetTotalMinor()), Currency: t.GetPrice().GetCurrency()},
		Status:    status,
		CreatedAt: t.GetCreatedAt().AsTime().UTC(),
	}
	if status == OrderFailed {
		out.Error = &OrderError{Code: t.GetError().GetCode(), Message: t.GetError().GetMessage()}
	}
	return out, nil
}

// timeOrNull is t in UTC, or null when unset.
func timeOrNull(t *timestamppb.Timestamp) *time.Time {
	if t == nil {
		return nil
	}
	v := t.AsTime().UTC()
	return &v
}

// orNull is s, or null when empty.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Encode writes v's JSON and a newline to w without escaping <, > and &
// (install instructions hold them). The gateway writes every answer with
// it, so GET /v1/orders/{id}'s data and a webhook's (Marshal) are the
// same bytes.
func Encode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Marshal is v's JSON as Encode writes it, without the newline: a
// webhook event's data.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := Encode(&buf, v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
