package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
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
