package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/esimplatform/esim/proto/limits"
	"github.com/esimplatform/esim/services/gateway"
)

// GET /v1/events takes every event type the platform sends as its filter,
// and the document lists exactly those, for the filter and for an
// event's kind.
func TestEventsFilterByEveryEventType(t *testing.T) {
	h, b := fuzzAPI()
	for _, typ := range limits.EventTypes {
		a := serve(t, h, b, httptest.NewRequest(http.MethodGet, "/v1/events?event="+typ, nil))
		if q, _ := b.query.(gateway.EventQuery); a.status != http.StatusOK || q.Type != typ {
			t.Errorf("event=%s: %d %s; the webhook service was asked %+v", typ, a.status, a.raw, b.query)
		}
	}
	checkRefusal(t, "event=esim.deleted", serve(t, h, b, httptest.NewRequest(http.MethodGet, "/v1/events?event=esim.deleted", nil)))

	a := serve(t, h, b, httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil))
	var doc struct {
		Paths map[string]struct {
			Get struct {
				Parameters []struct {
					Name   string `json:"name"`
					Schema struct {
						Enum []string `json:"enum"`
					} `json:"schema"`
				} `json:"parameters"`
			} `json:"get"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
		Webhooks map[string]any `json:"webhooks"`
	}
	if err := json.Unmarshal(a.raw, &doc); err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(limits.EventTypes))
	for _, p := range doc.Paths["/events"].Get.Parameters {
		if p.Name == "event" && !slices.Equal(slices.Sorted(slices.Values(p.Schema.Enum)), want) {
			t.Errorf("the event filter takes %v, want %v", p.Schema.Enum, want)
		}
	}
	if got := doc.Components.Schemas["Event"].Properties["event"].Enum; !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("an event's kind is one of %v, want %v", got, want)
	}
	var hooks []string
	for name := range doc.Webhooks {
		hooks = append(hooks, name)
	}
	if slices.Sort(hooks); !slices.Equal(hooks, want) {
		t.Errorf("webhooks %v, want %v", hooks, want)
	}
}
