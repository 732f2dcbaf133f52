package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/danielgtaylor/huma/v2"
)

type openAPIInput struct {
	StrictQuery
}

type openAPIOutput struct {
	ContentType string `header:"Content-Type"`
	Body        []byte
}

func (a *handlers) registerOpenAPI(api huma.API) {
	// Rendered once, on first request, after every operation is registered.
	render := sync.OnceValues(func() ([]byte, error) { return json.Marshal(api.OpenAPI()) })
	huma.Register(api, huma.Operation{
		OperationID: "get-openapi",
		Method:      http.MethodGet,
		Path:        "/openapi.json",
		Summary:     "The OpenAPI 3.1 contract of this API",
		Description: "Generated from the same definitions as the handlers. No API key needed. The document itself, not wrapped in `{\"data\": ...}`, so that OpenAPI tools can read it.",
		Tags:        []string{"Meta"},
		// Declared public, not left without a security requirement: an
		// empty list says "no key" to a reader and to lint tools alike.
		Security: []map[string][]string{},
		Errors:   []int{http.StatusBadRequest, http.StatusInternalServerError},
		Responses: map[string]*huma.Response{
			"200": {Description: "OpenAPI 3.1 document", Content: map[string]*huma.MediaType{
				// Any object: generators would otherwise type it as an
				// object with no properties.
				"application/json": {Schema: &huma.Schema{Type: huma.TypeObject, Description: "OpenAPI 3.1 document", AdditionalProperties: true}},
			}},
		},
	}, func(ctx context.Context, _ *openAPIInput) (*openAPIOutput, error) {
		doc, err := render()
		if err != nil {
			return nil, a.problem(ctx, err)
		}
		return &openAPIOutput{ContentType: "application/json", Body: doc}, nil
	})
}

// license is the document's: the repository's LICENSE.
var license = &huma.License{Name: "Apache 2.0", Identifier: "Apache-2.0"}

// documentReplays describes the replays of create-order and create-topup
// as they are sent: the 200 of a retry carries the order (or top-up) as
// the 201 did, with its Location if any and Idempotent-Replay: true; a
// replayed 502 carries Idempotent-Replay too; a first answer never does.
// huma documents a response body and headers on the default status (201)
// alone.
func documentReplays(_ *huma.OpenAPI, op *huma.Operation) {
	if op.OperationID != "create-order" && op.OperationID != "create-topup" {
		return
	}
	created, replay, failed := op.Responses["201"], op.Responses["200"], op.Responses["502"]
	if created == nil || replay == nil || failed == nil {
		panic("httpapi: " + op.OperationID + " must document 200, 201 and 502")
	}
	replayed := created.Headers["Idempotent-Replay"]
	delete(created.Headers, "Idempotent-Replay")
	replay.Content = created.Content
	if location := created.Headers["Location"]; location != nil {
		replay.Headers["Location"] = location
	}
	replay.Headers["Idempotent-Replay"] = &huma.Param{
		Description: "Always true: this answers an earlier request with the same Idempotency-Key.",
		Required:    true,
		Schema:      &huma.Schema{Type: huma.TypeString, Enum: []any{"true"}, Description: replayed.Description},
	}
	failed.Headers["Idempotent-Replay"] = &huma.Param{
		Description: "true when this replays the failure of an earlier request with the same Idempotency-Key; absent on the first answer.",
		Schema:      &huma.Schema{Type: huma.TypeString, Enum: []any{"true"}},
	}
}

// documentIDs says, in the document alone, that a path id or a query
// parameter naming one (order_id, topup_for) is a UUID. The schema huma checks
// requests with stays without the format: a malformed id in a path is
// not_found, as an unknown one is (DESIGN section 3), and a malformed
// order_id is worded by its handler.
func documentIDs(_ *huma.OpenAPI, op *huma.Operation) {
	for _, p := range op.Parameters {
		isID := p.In == "path" && p.Name == "id" || p.In == "query" && (strings.HasSuffix(p.Name, "_id") || p.Name == "topup_for")
		if !isID || p.Schema == nil {
			continue
		}
		documented := *p.Schema
		documented.Format = "uuid"
		p.Schema = &documented
	}
}
