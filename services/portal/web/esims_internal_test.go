package web

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
)

// The events of an eSIM's order are filed under that order whichever of
// its eSIMs they are about: the page keeps those whose data names this
// one, and those whose data names none.
func TestAboutEsim(t *testing.T) {
	const me, sibling = "01a22696-b8ab-7eba-8b4e-ed32171867c3", "01a22696-b8ab-7eba-8b4e-ed32171867c4"
	for _, c := range []struct {
		typ, payload string
		about        bool
		threshold    int
	}{
		{"esim.installed", `{"id":"evt_1","event":"esim.installed","data":{"id":"` + me + `","status":"INSTALLED"}}`, true, 0},
		{"esim.installed", `{"id":"evt_1","event":"esim.installed","data":{"id":"` + sibling + `","status":"INSTALLED"}}`, false, 0},
		{"esim.usage", `{"id":"evt_1","event":"esim.usage","threshold_percent":80,"data":{"id":"` + me + `"}}`, true, 80},
		{"esim.usage", `{"id":"evt_1","event":"esim.usage","threshold_percent":80,"data":{"id":"` + sibling + `"}}`, false, 80},
		{"topup.completed", `{"data":{"id":"01a22696-0000-7000-8000-000000000001","esim_id":"` + me + `"}}`, true, 0},
		{"topup.failed", `{"data":{"id":"01a22696-0000-7000-8000-000000000001","esim_id":"` + sibling + `"}}`, false, 0},
		{"order.completed", `{"data":{"id":"o","esims":[{"id":"` + sibling + `"},{"id":"` + me + `"}]}}`, true, 0},
		{"order.completed", `{"data":{"id":"o","esims":[{"id":"` + sibling + `"}]}}`, false, 0},
		// Nothing in the data says whose it is: it is of the eSIM's order.
		{"esim.expired", `{"data":{}}`, true, 0},
		{"order.failed", `{"data":{"id":"o","esims":[]}}`, true, 0},
		{"esim.activated", `not JSON`, true, 0},
	} {
		threshold, about := aboutEsim(&webhookv1.Event{Type: c.typ, Payload: c.payload}, me)
		if about != c.about || threshold != c.threshold {
			t.Errorf("%s %s: about %v, threshold %d; want %v, %d", c.typ, c.payload, about, threshold, c.about, c.threshold)
		}
	}
}

// An event's page links the eSIM an esim.* or topup.* event is about.
func TestEsimOf(t *testing.T) {
	const id = "01a22696-b8ab-7eba-8b4e-ed32171867c3"
	for _, c := range []struct{ typ, payload, want string }{
		{"esim.usage", `{"threshold_percent":50,"data":{"id":"` + id + `"}}`, id},
		{"topup.completed", `{"data":{"id":"01a22696-0000-7000-8000-000000000001","esim_id":"` + id + `"}}`, id},
		{"order.completed", `{"data":{"id":"` + id + `","esims":[{"id":"` + id + `"}]}}`, ""},
		{"ping", `{"data":{"message":"hi"}}`, ""},
		// Never a link made of what is not an id.
		{"esim.installed", `{"data":{"id":"../../keys"}}`, ""},
		{"esim.installed", `{"data":{}}`, ""},
		{"esim.installed", `[`, ""},
	} {
		if got := esimOf(&webhookv1.Event{Type: c.typ, Payload: c.payload}); got != c.want {
			t.Errorf("esimOf(%s %s) = %q, want %q", c.typ, c.payload, got, c.want)
		}
	}
}

func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	at := func(h int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(h) * time.Hour)) }
	labels := func(steps []step) string {
		var b strings.Builder
		for _, s := range steps {
			if s.Done {
				b.WriteString("+")
			} else {
				b.WriteString("-")
			}
			b.WriteString(s.Label)
			if s.At != nil {
				b.WriteString("@" + s.At.AsTime().Sub(t0).String())
			}
			b.WriteString(" ")
		}
		return strings.TrimSpace(b.String())
	}
	topUp := func(h int) *orderingv1.TopUp {
		return &orderingv1.TopUp{CreatedAt: at(h), Status: orderingv1.OrderStatus_ORDER_STATUS_COMPLETED}
	}
	for _, c := range []struct {
		name   string
		esim   *orderingv1.Esim
		events []esimEvent
		want   string
	}{{
		name: "fresh",
		esim: &orderingv1.Esim{Status: "ALLOCATED", CreatedAt: at(0), ValidityDays: 7},
		want: "+Issued@0s -Installed -Activated -Expires",
	}, {
		// A top-up bought before the profile was installed sits between.
		name: "active, topped up early",
		esim: &orderingv1.Esim{Status: "ACTIVE", CreatedAt: at(0), Topups: []*orderingv1.TopUp{topUp(1), topUp(5)},
			InstalledAt: at(2), ActivatedAt: at(3), ExpiresAt: at(200)},
		want: "+Issued@0s +Top-up@1h0m0s +Installed@2h0m0s +Activated@3h0m0s +Top-up@5h0m0s -Expires@200h0m0s",
	}, {
		name: "depleted",
		esim: &orderingv1.Esim{Status: "DEPLETED", CreatedAt: at(0), InstalledAt: at(1), ActivatedAt: at(2), ExpiresAt: at(170)},
		events: []esimEvent{
			{Event: &webhookv1.Event{Type: "esim.usage", CreatedAt: at(9)}, ThresholdPercent: 100},
			{Event: &webhookv1.Event{Type: "esim.usage", CreatedAt: at(8)}, ThresholdPercent: 80},
		},
		want: "+Issued@0s +Installed@1h0m0s +Activated@2h0m0s +Data used up@9h0m0s -Expires@170h0m0s",
	}, {
		name: "expired",
		esim: &orderingv1.Esim{Status: "EXPIRED", CreatedAt: at(0), InstalledAt: at(1), ActivatedAt: at(2), ExpiresAt: at(4)},
		want: "+Issued@0s +Installed@1h0m0s +Activated@2h0m0s +Expired@4h0m0s",
	}} {
		if got := labels(timeline(c.esim, c.events)); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

func TestUsageAndSizes(t *testing.T) {
	for _, c := range []struct {
		data *orderingv1.EsimData
		want usage
	}{
		{&orderingv1.EsimData{TotalBytes: 1 << 30, UsedBytes: 0}, usage{Total: 1 << 30, Remaining: 1 << 30}},
		{&orderingv1.EsimData{TotalBytes: 1 << 30, UsedBytes: 644245095}, usage{Total: 1 << 30, Used: 644245095, Remaining: 1<<30 - 644245095, Percent: 60}},
		// The network may count past the total before the eSIM is cut.
		{&orderingv1.EsimData{TotalBytes: 100, UsedBytes: 130}, usage{Total: 100, Used: 130, Remaining: 0, Percent: 100}},
		{&orderingv1.EsimData{Unlimited: true, UsedBytes: 5 << 20}, usage{Unlimited: true, Used: 5 << 20}},
	} {
		if got := usageOf(&orderingv1.Esim{Data: c.data}); got != c.want {
			t.Errorf("usage of %v = %+v, want %+v", c.data, got, c.want)
		}
	}
	for n, want := range map[int64]string{0: "0 bytes", 1: "1 byte", 1023: "1023 bytes", 1024: "1 KB", 1536: "1.5 KB",
		5 << 20: "5 MB", 1 << 30: "1 GB", 3 << 29: "1.5 GB", 20 << 30: "20 GB", 2 << 40: "2 TB"} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}
