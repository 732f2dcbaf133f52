package httpapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/esimplatform/esim/libs/coalesce"
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
