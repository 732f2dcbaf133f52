package httpserver_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/httpserver"
)

// A request still running when the grace period ends is cut: its context
// is cancelled, so it stops its work (database queries) before the service
// closes its pool, and Serve says what happened.
func TestRequestsPastTheGracePeriodAreCancelled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, cancelled := make(chan struct{}), make(chan bool, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			cancelled <- httpserver.CutByShutdown(r.Context())
		case <-time.After(10 * time.Second):
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- httpserver.Serve(ctx, slog.New(slog.DiscardHandler), ln, h, 200*time.Millisecond) }()
	go func() {
		if resp, err := http.Get("http://" + ln.Addr().String()); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	if err := <-served; err == nil || !strings.Contains(err.Error(), "grace") {
		t.Errorf("Serve: %v, want an error naming the grace period", err)
	}
	select {
	case byShutdown := <-cancelled:
		if !byShutdown {
			t.Error("the request's context does not say the service's shutdown cut it")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the request outliving the grace period was not cancelled")
	}
}

// A caller that hangs up is not the service's shutdown: handlers log the
// two apart.
func TestACallerHangingUpIsNotAShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, cancelled := make(chan struct{}), make(chan bool, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		cancelled <- httpserver.CutByShutdown(r.Context())
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = httpserver.Serve(ctx, slog.New(slog.DiscardHandler), ln, h, time.Second) }()
	reqCtx, hangUp := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(reqCtx, http.MethodGet, "http://"+ln.Addr().String(), nil)
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	hangUp()
	if <-cancelled {
		t.Error("a caller hanging up counts as the service's shutdown")
	}
}
