package httpapi

import (
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"
)

// webhookEvents are the events partners receive: what each tells, and
// its data. The webhook service renders their bodies (services/webhook:
// envelope and render); the gateway's tests hold every delivery they
// receive to the schemas below.
var webhookEvents = []struct {
	name, summary, description, when string
	// data is the schema of the body's data; an order, an eSIM and a
	// top-up are the registry's.
	data func(reg huma.Registry) *huma.Schema
	// threshold: the body carries threshold_percent beside data.
	threshold bool
}{
	{"order.completed", "An order completed", "Sent when an order's eSIMs were issued. `data` is the order exactly as GET /v1/orders/{id} answers it: completed, with every eSIM.",
		"When the order completed.", orderSchema, false},
	{"order.failed", "An order failed", "Sent when issuing failed and the order was refunded in full. `data` is the order exactly as GET /v1/orders/{id} answers it: failed, with its error and no eSIMs.",
		"When the order failed.", orderSchema, false},
	{"esim.installed", "An eSIM was installed", "Sent when the eSIM's profile was downloaded and installed on a device: INSTALLED. `data` is the eSIM exactly as GET /v1/esims/{id} answers it.",
		"When the profile was installed.", esimSchema, false},
	{"esim.activated", "An eSIM was activated", "Sent when the eSIM first attached to a network: ACTIVE, its validity clock started (`activated_at`, `expires_at`). `data` is the eSIM exactly as GET /v1/esims/{id} answers it.",
		"When the eSIM attached.", esimSchema, false},
	{"esim.usage", "An eSIM crossed a usage threshold", "Sent once for each of 50, 80 and 100 percent of the eSIM's total bytes that its use crossed, the envelope's `threshold_percent` saying which (at 100 the eSIM is DEPLETED). Not sent for unlimited plans. `data` is the eSIM exactly as GET /v1/esims/{id} answers it.",
		"When the usage crossing the threshold was read.", esimSchema, true},
	{"esim.expiring", "An eSIM expires within 24 hours", "Sent once, 24 hours before `expires_at`; a top-up that extends the validity sends it again 24 hours before the new end. `data` is the eSIM exactly as GET /v1/esims/{id} answers it.",
		"When the notice was due.", esimSchema, false},
	{"esim.expired", "An eSIM expired", "Sent when the eSIM's validity ended: EXPIRED, final. `data` is the eSIM exactly as GET /v1/esims/{id} answers it.",
		"When the eSIM expired.", esimSchema, false},
	{"topup.completed", "A top-up completed", "Sent when a top-up was applied to its eSIM. `data` is the top-up exactly as POST /v1/esims/{id}/topups answers it: completed.",
		"When the top-up completed.", topUpSchema, false},
	{"topup.failed", "A top-up failed", "Sent when the provider refused a top-up and it was refunded in full. `data` is the top-up: failed, with its error.",
		"When the top-up failed.", topUpSchema, false},
	{"ping", "A test event", "Sent when a test event is asked for (the portal, `esimctl webhooks send-test`), to check the endpoint and its signature check.",
		"When the test was asked for.", func(huma.Registry) *huma.Schema {
			return &huma.Schema{Type: huma.TypeObject, AdditionalProperties: false, Required: []string{"message"}, Properties: map[string]*huma.Schema{
				"message": {Type: huma.TypeString, Examples: []any{"A test event from the eSIM platform: your endpoint works."}},
			}}
		}, false},
}

func orderSchema(reg huma.Registry) *huma.Schema {
	return reg.Schema(reflect.TypeFor[Order](), true, "")
}

func esimSchema(reg huma.Registry) *huma.Schema {
	return reg.Schema(reflect.TypeFor[Esim](), true, "")
}

func topUpSchema(reg huma.Registry) *huma.Schema {
	return reg.Schema(reflect.TypeFor[TopUp](), true, "")
}

// eventSchema is the body of one event. Written out, not a Go type's: a
// component that only webhooks name is pruned by code generators
// (oapi-codegen) that then refer to it all the same, and the client they
// make does not compile.
func eventSchema(reg huma.Registry, name, when string, data func(huma.Registry) *huma.Schema, threshold bool) *huma.Schema {
	str := func(description string) *huma.Schema {
		return &huma.Schema{Type: huma.TypeString, Description: description}
	}
	id := str("The event id: webhook-id's value, the same on every attempt. Dedupe on it.")
	id.Pattern, id.Examples = eventIDPattern, []any{"evt_0193a4b2c3d47e8f9a0b1c2d3e4f5a6b"}
	created := str(when)
	created.Format = "date-time"
	env := str("The environment the event happened in; each has its own endpoint and secret.")
	env.Enum = []any{"sandbox", "live"}
	event := str("The event kind.")
	event.Enum = []any{name}
	body := &huma.Schema{
		Type:                 huma.TypeObject,
		AdditionalProperties: false,
		Required:             []string{"id", "event", "created_at", "environment", "data"},
		Properties:           map[string]*huma.Schema{"id": id, "event": event, "created_at": created, "environment": env, "data": data(reg)},
	}
	if threshold {
		body.Required = append(body.Required, "threshold_percent")
		body.Properties["threshold_percent"] = &huma.Schema{
			Type: huma.TypeInteger, Enum: []any{50, 80, 100},
			Description: "The percentage of the eSIM's total bytes whose use this event reports crossing.",
		}
	}
	return body
}

// eventIDPattern is the form of an event id.
const eventIDPattern = "^evt_[0-9a-f]{32}$"

// webhookDelivery says, on every event, how it is sent and signed.
const webhookDelivery = " A POST with `Content-Type: application/json` and `User-Agent: esim-webhooks/1`, signed as Standard Webhooks (www.standardwebhooks.com) specifies: " +
	"verify the raw body before parsing it, with the public libraries or by hand, and refuse a timestamp more than 5 minutes off. " +
	"Delivery is at least once: at most 3 attempts (at once, then about 1 s and 2 s after each failure), each failing on a status other than 2xx " +
	"(redirects are not followed), a refused or cut connection, or no answer within 10 s. GET /v1/events lists every attempt."

// declareWebhooks adds OpenAPI 3.1's webhooks section: each event's body
// and signing headers. It must run after registerAmount, whose money
// schema the orders in the bodies use.
func declareWebhooks(doc *huma.OpenAPI) {
	str := func(description, pattern, example string) *huma.Param {
		return &huma.Param{In: "header", Required: true, Description: description, Example: example,
			Schema: &huma.Schema{Type: huma.TypeString, Pattern: pattern}}
	}
	headers := []*huma.Param{
		str("The event id, the same on every attempt and the body's `id`.", eventIDPattern, "evt_0193a4b2c3d47e8f9a0b1c2d3e4f5a6b"),
		str("When this attempt was signed, in Unix seconds.", "^[0-9]+$", "1764237600"),
		str("`v1,` and the base64 of HMAC-SHA256 over `<webhook-id>.<webhook-timestamp>.<raw body>`, keyed with the bytes that the endpoint's secret (`whsec_` and base64) encodes after `whsec_`. "+
			"Space-separated when more than one secret signs (for 24 hours after a rotation): one matching is enough.",
			`^v1,[A-Za-z0-9+/]+={0,2}( v1,[A-Za-z0-9+/]+={0,2})*$`, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
	}
	for i, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		headers[i].Name = name
	}
	doc.Webhooks = map[string]*huma.PathItem{}
	for _, e := range webhookEvents {
		body := eventSchema(doc.Components.Schemas, e.name, e.when, e.data, e.threshold)
		doc.Webhooks[e.name] = &huma.PathItem{Post: &huma.Operation{
			Method:      http.MethodPost,
			OperationID: "webhook-" + e.name,
			Summary:     e.summary,
			Description: e.description + webhookDelivery,
			Tags:        []string{"Webhooks"},
			// No scheme OpenAPI names fits a signature over the body: the
			// signing headers say it, and the requirement is declared
			// empty rather than left out.
			Security:    []map[string][]string{},
			Parameters:  headers,
			RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {Schema: body}}},
			Responses: map[string]*huma.Response{
				"2XX": {Description: "Received: any 2xx status ends the delivery. The answer's body is ignored (its first 1 KiB is recorded)."},
				"4XX": {Description: "Any other status (a refused signature, say) fails the attempt; it is retried until 3 attempts failed."},
				"5XX": {Description: "Fails the attempt, as any status other than 2xx does; it is retried until 3 attempts failed."},
			},
		}}
	}
}
