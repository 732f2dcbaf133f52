// Package orderingpb converts between the ordering domain and its
// protobuf contract (proto/ordering/v1). The Twirp server answers in it
// and the Kafka publisher sends events in it: one conversion, so that a
// consumer of an event sees an order exactly as GetOrder answers it, and
// neither adapter imports the other.
package orderingpb

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/ordering"
)

// Order is o in the contract.
func Order(o ordering.Order) *orderingv1.Order {
	po := &orderingv1.Order{
		Id:          o.ID.String(),
		AccountId:   o.Scope.AccountID.String(),
		Environment: Environment(o.Scope.Environment),
		PlanId:      o.PlanID.String(),
		Quantity:    o.Quantity,
		Days:        o.Days,
		Status:      Status(o.Status),
		Price:       &orderingv1.Price{UnitMinor: o.UnitMinor, TotalMinor: o.TotalMinor, Currency: string(o.Currency)},
		Customer:    &orderingv1.Customer{Name: o.Customer.Name, Email: o.Customer.Email, Reference: o.Customer.Reference},
		CreatedAt:   timestamppb.New(o.CreatedAt),
		Esims:       make([]*orderingv1.Esim, len(o.Esims)),
		PerDay:      o.PerDay,
		PlanName:    o.PlanName,
	}
	// A failing order is still being refunded: PENDING, without its error
	// until the refund is done.
	if o.Status == ordering.StatusFailed && o.Error != nil {
		po.Error = &orderingv1.OrderError{Code: o.Error.Code, Message: o.Error.Message}
	}
	for i, e := range o.Esims {
		po.Esims[i] = Esim(e)
	}
	return po
}

// Esim is e in the contract.
func Esim(e ordering.Esim) *orderingv1.Esim {
	pe := &orderingv1.Esim{
		Id:             e.ID.String(),
		OrderId:        e.OrderID.String(),
		PlanName:       e.PlanName,
		Iccid:          e.ICCID,
		QrCodeUrl:      e.QRCodeURL,
		ActivationCode: e.ActivationCode,
		SmdpAddress:    e.SMDPAddress,
		MatchingId:     e.MatchingID,
		Status:         e.Status,
		ValidityDays:   e.ValidityDays,
		Data: &orderingv1.EsimData{
			Unlimited:  e.Data.Unlimited,
			TotalBytes: e.Data.TotalBytes,
			UsedBytes:  e.Data.UsedBytes,
			UpdatedAt:  timestamppb.New(e.Data.UpdatedAt),
		},
		Install: &orderingv1.Install{
			Instructions:         e.Install.Instructions,
			IosUniversalLink:     e.Install.IOSUniversalLink,
			AndroidUniversalLink: e.Install.AndroidUniversalLink,
		},
		CreatedAt:   timestamppb.New(e.CreatedAt),
		PlanId:      e.PlanID.String(),
		PerDay:      e.PerDay,
		Countries:   e.Countries,
		InstalledAt: timestampOrNil(e.InstalledAt),
		ActivatedAt: timestampOrNil(e.ActivatedAt),
		ExpiresAt:   timestampOrNil(e.ExpiresAt),
		Topups:      make([]*orderingv1.TopUp, len(e.TopUps)),
		AccountId:   e.Scope.AccountID.String(),
		Environment: Environment(e.Scope.Environment),
	}
	for i, t := range e.TopUps {
		pe.Topups[i] = TopUp(t)
	}
	return pe
}

// TopUp is t in the contract.
func TopUp(t ordering.TopUp) *orderingv1.TopUp {
	pt := &orderingv1.TopUp{
		Id:          t.ID.String(),
		EsimId:      t.EsimID.String(),
		PlanId:      t.PlanID.String(),
		Days:        t.Days,
		Bytes:       t.Bytes,
		Price:       &orderingv1.Price{UnitMinor: t.AmountMinor, TotalMinor: t.AmountMinor, Currency: string(t.Currency)},
		Status:      Status(t.Status),
		CreatedAt:   timestamppb.New(t.CreatedAt),
		AccountId:   t.Scope.AccountID.String(),
		Environment: Environment(t.Scope.Environment),
		EsimOrderId: t.EsimOrderID.String(),
	}
	if t.Status == ordering.StatusFailed && t.Error != nil {
		pt.Error = &orderingv1.OrderError{Code: t.Error.Code, Message: t.Error.Message}
	}
	return pt
}

// timestampOrNil is t, or unset when zero.
func timestampOrNil(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// Status is s in the contract. A failing order is still pending to a
// caller: its refund is not done.
func Status(s ordering.Status) orderingv1.OrderStatus {
	switch s {
	case ordering.StatusPending, ordering.StatusFailing:
		return orderingv1.OrderStatus_ORDER_STATUS_PENDING
	case ordering.StatusCompleted:
		return orderingv1.OrderStatus_ORDER_STATUS_COMPLETED
	case ordering.StatusFailed:
		return orderingv1.OrderStatus_ORDER_STATUS_FAILED
	}
	return orderingv1.OrderStatus_ORDER_STATUS_UNSPECIFIED
}

// StatusFromProto is the status a caller filters on; ok is false for a
// value the contract does not define. UNSPECIFIED is "", any status.
func StatusFromProto(s orderingv1.OrderStatus) (status ordering.Status, ok bool) {
	switch s {
	case orderingv1.OrderStatus_ORDER_STATUS_UNSPECIFIED:
		return "", true
	case orderingv1.OrderStatus_ORDER_STATUS_PENDING:
		return ordering.StatusPending, true
	case orderingv1.OrderStatus_ORDER_STATUS_COMPLETED:
		return ordering.StatusCompleted, true
	case orderingv1.OrderStatus_ORDER_STATUS_FAILED:
		return ordering.StatusFailed, true
	}
	return "", false
}

// Environment is e in the contract.
func Environment(e ordering.Environment) accountsv1.Environment {
	pe, _ := accountsv1.EnvironmentByShortName(string(e))
	return pe
}

// EnvironmentFromProto spells e as the domain does ("sandbox", "live");
// the zero value, or a newer one, becomes a name the domain refuses (a
// validation error on the scope's environment).
func EnvironmentFromProto(e accountsv1.Environment) ordering.Environment {
	return ordering.Environment(e.ShortName())
}
