package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/coalesce"
	"github.com/esimplatform/esim/libs/telemetry"
)

func TestAPanicInABackendCallIsLoggedWithItsStack(t *testing.T) {
	var logs bytes.Buffer
	a := &handlers{Deps: Deps{Log: slog.New(slog.NewJSONHandler(&logs, nil))}}
	err := fmt.Errorf("catalogue: %w", &coalesce.PanicError{Value: "boom", Stack: []byte("goroutine 7 [running]:\nmain.getPlans()")})
	a.logInternal(context.Background(), err)
	if !strings.Contains(logs.String(), `"stack":"goroutine 7 [running]:\nmain.getPlans()"`) || !strings.Contains(logs.String(), "boom") {
		t.Fatalf("log lacks the panic and its stack:\n%s", logs.String())
	}
}

// A handler's panic is answered in the contract's shape, with the request
// id a partner quotes to support.
func TestAnswerPanicIsTheContractsInternalError(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/v1/plans", nil)
	r = r.WithContext(telemetry.WithRequestID(r.Context(), "req_abc"))
	w := httptest.NewRecorder()
	AnswerPanic(w, r)
	var body struct{ Error ErrorBody }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusInternalServerError || w.Header().Get("Content-Type") != "application/json" ||
		body.Error.Code != "internal_error" || body.Error.RequestID != "req_abc" || body.Error.Details == nil {
		t.Fatalf("answered %d %s %s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
}
