package httpserver_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/httpserver"
)

// stuckRequest serves one request that runs until its context ends, with
// the given grace period, and sends it. It returns when the handler has
// started: cancel stops the service, hangUp the caller; cutByShutdown says
// how the request's context ended, and served what Serve returned.
func stuckRequest(t *testing.T, grace time.Duration) (cancel, hangUp context.CancelFunc, cutByShutdown <-chan bool, served <-chan error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, ended, done := make(chan struct{}), make(chan bool, 1), make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		ended <- httpserver.CutByShutdown(r.Context())
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { done <- httpserver.Serve(ctx, slog.New(slog.DiscardHandler), ln, h, grace) }()
	reqCtx, hangUp := context.WithCancel(context.Background())
	t.Cleanup(hangUp)
	req, _ := http.NewRequestWithContext(reqCtx, http.MethodGet, "http://"+ln.Addr().String(), nil)
	go func() {
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	return cancel, hangUp, ended, done
}

// A request still running when the grace period ends is cut: its context
// is cancelled, so it stops its work (database queries) before the service
// closes its pool, and Serve says what happened.
func TestRequestsPastTheGracePeriodAreCancelled(t *testing.T) {
	cancel, _, cutByShutdown, served := stuckRequest(t, 200*time.Millisecond)
	cancel()
	if err := <-served; err == nil || !strings.Contains(err.Error(), "grace") {
		t.Errorf("Serve: %v, want an error naming the grace period", err)
	}
	select {
	case byShutdown := <-cutByShutdown:
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
	_, hangUp, cutByShutdown, _ := stuckRequest(t, time.Second)
	hangUp()
	if <-cutByShutdown {
		t.Error("a caller hanging up counts as the service's shutdown")
	}
}

// A grace period of zero or less would cut every in-flight request at
// SIGTERM: refused, naming the variable.
func TestConfigRefusesANonPositiveShutdownTimeout(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		err := httpserver.Config{Addr: ":0", ShutdownTimeout: d}.Validate()
		if err == nil || !strings.Contains(err.Error(), "SHUTDOWN_TIMEOUT") {
			t.Errorf("ShutdownTimeout %s: %v, want an error naming SHUTDOWN_TIMEOUT", d, err)
		}
	}
	if err := (httpserver.Config{Addr: ":0", ShutdownTimeout: time.Nanosecond}).Validate(); err != nil {
		t.Errorf("a positive timeout: %v", err)
	}
}

// A client that announces a body and never sends it, or never reads the
// answer it asked for, loses its connection at the server's deadlines
// instead of holding it, and a goroutine, forever.
func TestStalledClientsAreCutAtTheDeadlines(t *testing.T) {
	defer httpserver.SetIOTimeouts(300*time.Millisecond, 300*time.Millisecond)()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	big := strings.Repeat("x", 8<<20) // more than the socket buffers hold
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = io.WriteString(w, big)
			return
		}
		w.WriteHeader(http.StatusUnauthorized) // answers without reading the body
	})
	go func() { served <- httpserver.Serve(ctx, slog.New(slog.DiscardHandler), ln, h, time.Second) }()
	defer func() { cancel(); <-served }()

	for _, raw := range []string{
		"GET /v1/plans HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n",
		"POST /v1/plans HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET /big HTTP/1.1\r\nHost: x\r\n\r\n", // and never read
	} {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, raw); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(raw, "/big") {
			// Let the server fill the buffers and stall, then read on.
			time.Sleep(time.Second)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.Copy(io.Discard, conn)
		conn.Close()
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			t.Errorf("%q: the server still held the connection after 10 s", strings.SplitN(raw, "\r\n", 2)[0])
		}
	}
}
