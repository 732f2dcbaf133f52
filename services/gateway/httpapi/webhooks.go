package httpapi

import (
	"net/http"
	"reflect"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// The bodies the webhook service POSTs to a partner's endpoint, one type
// per event so that each names its event and the shape of its data. The
// webhook service renders them (services/webhook: envelope and render);
// the gateway's tests hold every delivery they receive to these schemas.
// The fields' order is the body's.

// OrderCompletedEvent is the body of an order.completed delivery.
type OrderCompletedEvent struct {
	ID          string    `json:"id" pattern:"^evt_[0-9a-f]{32}$" doc:"The event id: webhook-id's value, the same on every attempt. Dedupe on it." example:"evt_0193a4b2c3d47e8f9a0b1c2d3e4f5a6b"`
	Event       string    `json:"event" enum:"order.completed"`
	CreatedAt   time.Time `json:"created_at" doc:"When the order completed."`
	Environment string    `json:"environment" enum:"sandbox,live" doc:"The order's environment; each environment has its own endpoint and secret."`
	Data        Order     `json:"data" doc:"The order, exactly as GET /v1/orders/{id} answers it: completed, with every eSIM."`
}

// OrderFailedEvent is the body of an order.failed delivery.
type OrderFailedEvent struct {
	ID          string    `json:"id" pattern:"^evt_[0-9a-f]{32}$" doc:"The event id: webhook-id's value, the same on every attempt. Dedupe on it." example:"evt_0193a4b2c3d47e8f9a0b1c2d3e4f5a6b"`
	Event       string    `json:"event" enum:"order.failed"`
	CreatedAt   time.Time `json:"created_at" doc:"When the order failed."`
	Environment string    `json:"environment" enum:"sandbox,live" doc:"The order's environment; each environment has its own endpoint and secret."`
	Data        Order     `json:"data" doc:"The order, exactly as GET /v1/orders/{id} answers it: failed, with its error, no eSIMs, and refunded in full."`
}

// PingEvent is the body of a ping delivery, the test event sent on request
// (the portal's "Send a test event", esimctl webhooks send-test).
type PingEvent struct {
	ID          string    `json:"id" pattern:"^evt_[0-9a-f]{32}$" doc:"The event id: webhook-id's value, the same on every attempt." example:"evt_0193a4b2c3d47e8f9a0b1c2d3e4f5a6b"`
	Event       string    `json:"event" enum:"ping"`
	CreatedAt   time.Time `json:"created_at" doc:"When the test was asked for."`
	Environment string    `json:"environment" enum:"sandbox,live" doc:"The environment whose endpoint is tested."`
	Data        PingData  `json:"data"`
}

// PingData is a test event's data.
type PingData struct {
	Message string `json:"message" example:"A test event from the eSIM platform: your endpoint works."`
}

// webhookEvents are the events partners receive, each with what it tells.
var webhookEvents = []struct {
	name, summary, description string
	body                       reflect.Type
}{
	{"order.completed", "An order completed", "Sent when an order's eSIMs were issued.", reflect.TypeFor[OrderCompletedEvent]()},
	{"order.failed", "An order failed", "Sent when issuing failed and the order was refunded in full.", reflect.TypeFor[OrderFailedEvent]()},
	{"ping", "A test event", "Sent when a test event is asked for, to check the endpoint and its signature check.", reflect.TypeFor[PingEvent]()},
}

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
		str("The event id, the same on every attempt and the body's `id`.", "^evt_[0-9a-f]{32}$", "evt_0193a4b2c3d47e8f9a0b1c2d3e4f5a6b"),
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
		body := doc.Components.Schemas.Schema(e.body, true, "")
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
