package orderingpb_test

import (
	"testing"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/orderingpb"
)

// Every status an order can be in has a value in the contract, and a
// caller filtering on it finds it again; failing shows as pending, since
// its refund is not done.
func TestStatusesRoundTrip(t *testing.T) {
	for s, want := range map[ordering.Status]ordering.Status{
		ordering.StatusPending:   ordering.StatusPending,
		ordering.StatusFailing:   ordering.StatusPending,
		ordering.StatusCompleted: ordering.StatusCompleted,
		ordering.StatusFailed:    ordering.StatusFailed,
	} {
		pb := orderingpb.Status(s)
		if pb == orderingv1.OrderStatus_ORDER_STATUS_UNSPECIFIED {
			t.Errorf("%s has no status in the contract", s)
		}
		if got, ok := orderingpb.StatusFromProto(pb); !ok || got != want {
			t.Errorf("%s -> %s -> %q, %v; want %q", s, pb, got, ok, want)
		}
	}
	if _, ok := orderingpb.StatusFromProto(7); ok {
		t.Error("status 7 taken as a filter")
	}
}

func TestEnvironmentsRoundTrip(t *testing.T) {
	for _, e := range []ordering.Environment{ordering.Sandbox, ordering.Live} {
		if got := orderingpb.EnvironmentFromProto(orderingpb.Environment(e)); got != e {
			t.Errorf("%s -> %s -> %s", e, orderingpb.Environment(e), got)
		}
	}
	if got := orderingpb.EnvironmentFromProto(accountsv1.Environment_ENVIRONMENT_UNSPECIFIED); got.Valid() {
		t.Errorf("unspecified read as %s", got)
	}
}
