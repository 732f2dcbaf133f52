package partnerapi_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/proto/partnerapi"
)

func order() *orderingv1.Order {
	at := timestamppb.New(time.Date(2025, 3, 14, 9, 26, 53, 589_793_000, time.FixedZone("CET", 3600)))
	return &orderingv1.Order{
		Id: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c", AccountId: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4d",
		Environment: accountsv1.Environment_ENVIRONMENT_LIVE, PlanId: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4e",
		Quantity: 1, Days: 3, PerDay: true, Status: orderingv1.OrderStatus_ORDER_STATUS_COMPLETED,
		Price:     &orderingv1.Price{UnitMinor: 1950, TotalMinor: 1950, Currency: "EUR"},
		Customer:  &orderingv1.Customer{Reference: "BK <&> 1"},
		CreatedAt: at,
		Esims: []*orderingv1.Esim{{
			Id: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4f", OrderId: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c", PlanName: "Japan unlimited",
			Iccid: "8988247000000000004", QrCodeUrl: "https://api.example.com/qr/t.png", ActivationCode: "LPA:1$smdp.example$M-1",
			SmdpAddress: "smdp.example", MatchingId: "M-1", Status: "ALLOCATED", ValidityDays: 3,
			Data:      &orderingv1.EsimData{Unlimited: true, TotalBytes: 7, UpdatedAt: at},
			Install:   &orderingv1.Install{Instructions: "Settings > Mobile & Data", IosUniversalLink: "https://i.example", AndroidUniversalLink: "https://a.example"},
			CreatedAt: at,
		}},
	}
}

// The document a partner reads, byte for byte: amounts with two decimals,
// times in UTC, absent customer fields null, no error unless failed, days
// on a per-day plan, no total_bytes when unlimited, and <, > and & as
// they are.
func TestOrderDocument(t *testing.T) {
	o, err := partnerapi.OrderFromProto(order())
	if err != nil {
		t.Fatal(err)
	}
	got, err := partnerapi.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c","status":"completed","environment":"live","plan_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4e","quantity":1,"days":3,` +
		`"price":{"unit":19.50,"total":19.50,"currency":"EUR"},"customer":{"name":null,"email":null,"reference":"BK <&> 1"},"error":null,"created_at":"2025-03-14T08:26:53.589793Z",` +
		`"esims":[{"id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4f","order_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c","plan_name":"Japan unlimited","iccid":"8988247000000000004",` +
		`"qr_code_url":"https://api.example.com/qr/t.png","activation_code":"LPA:1$smdp.example$M-1","smdp_address":"smdp.example","status":"ALLOCATED","validity_days":3,` +
		`"data":{"unlimited":true,"total_bytes":null,"used_bytes":0,"remaining_bytes":null,"updated_at":"2025-03-14T08:26:53.589793Z"},` +
		`"install":{"instructions":"Settings > Mobile & Data","ios_universal_link":"https://i.example","android_universal_link":"https://a.example"},` +
		`"installed_at":null,"activated_at":null,"expires_at":null,"topups":[],"created_at":"2025-03-14T08:26:53.589793Z"}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	var buf bytes.Buffer
	if err := partnerapi.Encode(&buf, o); err != nil || buf.String() != want+"\n" {
		t.Errorf("Encode = %q, %v; want Marshal's bytes and a newline", buf.String(), err)
	}

	failed := order()
	failed.Status = orderingv1.OrderStatus_ORDER_STATUS_FAILED
	failed.PerDay, failed.Esims = false, nil
	failed.Error = &orderingv1.OrderError{Code: "provider_error", Message: "no profiles"}
	f, err := partnerapi.OrderFromProto(failed)
	if err != nil {
		t.Fatal(err)
	}
	if f.Status != partnerapi.OrderFailed || f.Error == nil || *f.Error != (partnerapi.OrderError{Code: "provider_error", Message: "no profiles"}) || f.Days != nil || f.Esims == nil {
		t.Errorf("failed order: %+v", f)
	}
}

// A status or environment the partner API does not define (a newer
// ordering's, or none) is an error, never shown as another value.
func TestUnknownValuesAreErrors(t *testing.T) {
	for name, change := range map[string]func(*orderingv1.Order){
		"status 7":       func(o *orderingv1.Order) { o.Status = 7 },
		"no status":      func(o *orderingv1.Order) { o.Status = orderingv1.OrderStatus_ORDER_STATUS_UNSPECIFIED },
		"environment 7":  func(o *orderingv1.Order) { o.Environment = 7 },
		"no environment": func(o *orderingv1.Order) { o.Environment = accountsv1.Environment_ENVIRONMENT_UNSPECIFIED },
	} {
		o := order()
		change(o)
		got, err := partnerapi.OrderFromProto(o)
		if !errors.Is(err, partnerapi.ErrUnknown) {
			t.Errorf("%s: %+v, %v; want ErrUnknown", name, got, err)
		}
	}
	for _, s := range []orderingv1.OrderStatus{orderingv1.OrderStatus_ORDER_STATUS_PENDING, orderingv1.OrderStatus_ORDER_STATUS_COMPLETED, orderingv1.OrderStatus_ORDER_STATUS_FAILED} {
		for _, e := range []accountsv1.Environment{accountsv1.Environment_ENVIRONMENT_SANDBOX, accountsv1.Environment_ENVIRONMENT_LIVE} {
			o := order()
			o.Status, o.Environment = s, e
			got, err := partnerapi.OrderFromProto(o)
			if err != nil || got.Status != strings.ToLower(strings.TrimPrefix(s.String(), "ORDER_STATUS_")) || got.Environment != e.ShortName() {
				t.Errorf("%s %s: %+v, %v", s, e, got, err)
			}
		}
	}
}

// An eSIM after its order: its times in UTC, the bytes left (never
// below zero), and its top-ups as a top-up's own document shows them.
func TestEsimAfterTheSale(t *testing.T) {
	at := timestamppb.New(time.Date(2025, 3, 14, 9, 0, 0, 0, time.FixedZone("CET", 3600)))
	e := order().GetEsims()[0]
	e.Status, e.InstalledAt, e.ActivatedAt, e.ExpiresAt = "DEPLETED", at, at, at
	e.Data = &orderingv1.EsimData{TotalBytes: 100, UsedBytes: 100, UpdatedAt: at}
	e.Topups = []*orderingv1.TopUp{{
		Id: "t1", EsimId: e.GetId(), PlanId: "p1", Days: 7, Bytes: 50, Status: orderingv1.OrderStatus_ORDER_STATUS_FAILED,
		Price: &orderingv1.Price{UnitMinor: 450, TotalMinor: 450, Currency: "EUR"}, CreatedAt: at,
		Error: &orderingv1.OrderError{Code: "provider_error", Message: "refused"},
	}}
	got, err := partnerapi.EsimFromProto(e)
	if err != nil {
		t.Fatal(err)
	}
	b, err := partnerapi.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"status":"DEPLETED"`, `"installed_at":"2025-03-14T08:00:00Z"`, `"expires_at":"2025-03-14T08:00:00Z"`,
		`"total_bytes":100,"used_bytes":100,"remaining_bytes":0`,
		`"topups":[{"id":"t1","esim_id":"0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4f","plan_id":"p1","days":7,"price":{"amount":4.50,"currency":"EUR"},"status":"failed","error":{"code":"provider_error","message":"refused"},"created_at":"2025-03-14T08:00:00Z"}]`,
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("eSIM document lacks %s:\n%s", want, b)
		}
	}
	e.Status = "LOST"
	if _, err := partnerapi.EsimFromProto(e); !errors.Is(err, partnerapi.ErrUnknown) {
		t.Errorf("an unknown eSIM status = %v, want ErrUnknown", err)
	}
	e.Status = "ACTIVE"
	e.Topups[0].Status = 9
	if _, err := partnerapi.EsimFromProto(e); !errors.Is(err, partnerapi.ErrUnknown) {
		t.Errorf("an unknown top-up status = %v, want ErrUnknown", err)
	}
}
