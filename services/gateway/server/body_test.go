package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

// TestBodiesAreReadAsWrittenOrRefused sends order bodies that encoding/json
// would take in its own way (the last of two names, U+FFFD for bytes that
// are not UTF-8) or refuse in its own words against "body" (a whole number
// written 1.0): each is a 400 invalid_request naming the field and why,
// and nothing is ordered or charged. A well-written body still orders.
func TestBodiesAreReadAsWrittenOrRefused(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("USD", sandbox, 500_00)
	fixed, price, _ := p.planOf(pt.key, "fixed")
	perDay, _, _ := p.planOf(pt.key, "per_day")
	const (
		whole   = "must be a whole number written without a decimal point or exponent"
		twice   = "given more than once"
		notUTF8 = "must be valid UTF-8"
	)
	type fault struct{ field, reason string }
	for _, tc := range []struct {
		name, body string
		faults     []fault
	}{
		{"quantity 1.0", orderBody(fixed, `"quantity":1.0`), []fault{{"quantity", whole}}},
		{"quantity 1e0", orderBody(fixed, `"quantity":1e0`), []fault{{"quantity", whole}}},
		{"quantity 10E-1", orderBody(fixed, `"quantity":10E-1`), []fault{{"quantity", whole}}},
		{"quantity 2.5", orderBody(fixed, `"quantity":2.5`), []fault{{"quantity", whole}}},
		{"days 2.0 and quantity 1e1", orderBody(perDay, `"days":2.0,"quantity":1e1`), []fault{{"days", whole}, {"quantity", whole}}},
		{"quantity twice", orderBody(fixed, `"quantity":1,"quantity":50`), []fault{{"quantity", twice}}},
		{"plan_id twice", orderBody(fixed, `"plan_id":"`+perDay+`"`), []fault{{"plan_id", twice}}},
		{"customer twice", orderBody(fixed, `"customer":{"name":"Ada"},"customer":{}`), []fault{{"customer", twice}}},
		{"customer.name twice", orderBody(fixed, `"customer":{"name":"Ada","name":"Bob"}`), []fault{{"customer.name", twice}}},
		{"a name twice after a bad number", orderBody(fixed, `"quantity":1.0,"days":1,"days":1`), []fault{{"quantity", whole}, {"days", twice}}},
		{"customer.name not UTF-8", orderBody(fixed, "\"customer\":{\"name\":\"Ad\xffa\"}"), []fault{{"customer.name", notUTF8}}},
		{"customer.email not UTF-8", orderBody(fixed, "\"customer\":{\"email\":\"ad\xc3@example.com\"}"), []fault{{"customer.email", notUTF8}}},
		{"customer.reference not UTF-8", orderBody(fixed, "\"customer\":{\"reference\":\"\xed\xa0\x80\"}"), []fault{{"customer.reference", notUTF8}}},
		{"customer.reference a lone surrogate", orderBody(fixed, `"customer":{"reference":"x\ud800y"}`), []fault{{"customer.reference", notUTF8}}},
		{"a field name not UTF-8", orderBody(fixed, "\"quant\xffity\":2"), []fault{{"body", "field name that is not valid UTF-8"}}},
		{"a customer field name not UTF-8", orderBody(fixed, "\"customer\":{\"n\xe9\":\"x\"}"), []fault{{"customer", "field name that is not valid UTF-8"}}},
		{"a field named \"\"", orderBody(fixed, `"":1`), []fault{{`""`, "unknown field"}}},
		{"a field named \"\" twice", orderBody(fixed, `"":1,"":2`), []fault{{`""`, twice}}},
		{"two bodies in one", orderBody(fixed, "") + orderBody(fixed, `"quantity":50`), []fault{{"body", "more than one value"}}},
		{"malformed after the object", orderBody(fixed, "") + "]", []fault{{"body", "not valid JSON"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := p.expectError(pt.order("", tc.body), http.StatusBadRequest, "invalid_request")
			if len(e.Error.Details) != len(tc.faults) {
				t.Fatalf("details %+v, want %+v", e.Error.Details, tc.faults)
			}
			for i, want := range tc.faults {
				got := e.Error.Details[i]
				if got.Field != want.field || !strings.Contains(got.Reason, want.reason) {
					t.Errorf("detail %d: %+v, want field %s with a reason saying %q", i, got, want.field, want.reason)
				}
				if !strings.Contains(e.Error.Message, want.field+": ") {
					t.Errorf("message %q does not name %s", e.Error.Message, want.field)
				}
			}
		})
	}
	if got := pt.balance(); got != 500_00 {
		t.Errorf("balance %d after refused bodies, want 50000", got)
	}
	if l := pt.orders(""); l.Pagination.Total != 0 {
		t.Errorf("%d orders after refused bodies, want none", l.Pagination.Total)
	}
	pt.checkMoney()

	// What is written well still orders, escapes and all: two eSIMs for
	// "Zoë" (an escaped ë), charged once.
	r := pt.order("well-written", orderBody(fixed, `"quantity":2,"customer":{"name":"Zo\u00eb","reference":"caf`+"\u00e9"+`"}`))
	if r.status != http.StatusCreated {
		t.Fatalf("a well-written body: %d %s", r.status, r.body)
	}
	var made struct{ Data orderJSON }
	r.json(t, &made)
	if made.Data.Quantity != 2 || made.Data.Customer.Name == nil || *made.Data.Customer.Name != "Zoë" || *made.Data.Customer.Reference != "café" {
		t.Errorf("order %+v, want 2 eSIMs for Zoë, reference café", made.Data)
	}
	if got := pt.balance(); got != 500_00-2*price {
		t.Errorf("balance %d, want %d", got, 500_00-2*price)
	}
	pt.checkMoney()
}

// An order that takes longer than the 5 s a body has to arrive in is
// answered with its outcome: the deadline for reading the body ends with
// the body. Left in place, it fired in the connection's background read
// once the body was in, which cancels the request, and the order was cut
// short with a 500 after 5 s. Here the SM-DP+ holds the first
// downloadOrder for 6 s (within the ES2+ client's 10 s) and then fails it
// (the simulator's hang), so the order's outcome is a provider_error,
// refunded.
func TestAnOrderOutlastingTheBodyReadTimeIsAnswered(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: fmt.Sprintf("%s:%d", profileType, poolSize)})
	p := start(t, options{smdp: sim, smdpTimeout: 10 * time.Second})
	pt := p.partner("USD", live, 100_00)
	fixed, _, _ := p.planOf(pt.key, "fixed")
	if err := sim.Control.AddFault(t.Context(), smdpsim.Fault{Function: "downloadOrder", Mode: smdpsim.ModeHang, Hang: 6 * time.Second, Count: 1}); err != nil {
		t.Fatal(err)
	}
	e := p.expectError(pt.order("slow", orderBody(fixed, "")), http.StatusBadGateway, "provider_error")
	if failed := pt.orders("status=failed"); len(failed.Data) != 1 || !strings.Contains(e.Error.Message, failed.Data[0].ID) {
		t.Errorf("failed orders %+v; the 502 said %q", failed.Data, e.Error.Message)
	}
	if got := pt.balance(); got != 100_00 {
		t.Errorf("balance %d, want 10000 (refunded)", got)
	}
	pt.checkMoney()
}
