package httpsender_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/httpsender"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

func post(s *httpsender.Sender, env webhook.Environment, url string) webhook.Response {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return s.Post(ctx, webhook.Request{
		URL: url, Environment: env, EventID: "evt_1", Timestamp: 1700000000,
		Signature: "v1,abc", Attempt: 1, Body: []byte(`{"id":"evt_1"}`),
	})
}

// listed opens the host:port of srv to sandbox endpoints.
func listed(srv *httptest.Server) httpsender.Options {
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	return httpsender.Options{PrivateEndpoints: webhook.HostPorts{webhook.Sandbox: {ap}}}
}

// The check holds on the address dialled, whatever the URL names: a
// loopback server is unreachable by its IP and by a name resolving to it,
// but in sandbox on the very host:port listed. Another port of the same
// host is refused before connecting.
func TestRefusesLoopbackWhenConnecting(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":"):]
	s := httpsender.New(listed(srv))
	for _, url := range []string{srv.URL, "http://localhost" + port + "/hooks"} {
		resp := post(s, webhook.Live, url)
		if resp.StatusCode != 0 || !strings.HasPrefix(resp.Err, "refused: ") || !strings.Contains(resp.Err, "is a loopback address") {
			t.Errorf("live %s: %+v; want refused as loopback", url, resp)
		}
		if resp := post(s, webhook.Sandbox, url); resp.StatusCode != 200 || resp.Err != "" {
			t.Errorf("sandbox %s: %+v; want it delivered", url, resp)
		}
	}
	if hits.Load() != 2 {
		t.Errorf("the server got %d requests, want the 2 sandbox ones", hits.Load())
	}
	other, accepted := webhooktest.CountingListener(t)
	for _, env := range webhook.Environments {
		if resp := post(s, env, "http://"+other+"/hooks"); resp.Err != "refused: 127.0.0.1 is a loopback address" {
			t.Errorf("%s to another port of the host listed: %+v; want it refused", env, resp)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the port not listed got %d connections", n)
	}
}

// The request carries the Standard Webhooks headers and the body, and
// the answer is recorded as it came: a redirect is not followed, a body
// is cut at 1 KiB.
func TestPostSendsTheDeliveryAndRecordsTheAnswer(t *testing.T) {
	var got *http.Request
	var gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/hooks", http.StatusFound)
		case "/hooks":
			got = r.Clone(context.Background())
			b := make([]byte, 100)
			n, _ := r.Body.Read(b)
			gotBody = string(b[:n])
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(strings.Repeat("x", 3000)))
		}
	}))
	defer srv.Close()
	s := httpsender.New(listed(srv))

	resp := post(s, webhook.Sandbox, srv.URL+"/moved")
	if resp.StatusCode != http.StatusFound || resp.Err != "" || got != nil {
		t.Errorf("redirect: %+v, followed %v; want the 302 itself", resp, got != nil)
	}
	resp = post(s, webhook.Sandbox, srv.URL+"/hooks")
	if resp.StatusCode != http.StatusAccepted || resp.Err != "" || len(resp.Body) != webhook.ResponseBodyLimit {
		t.Errorf("answer: %d %q, %d bytes; want 202 and 1 KiB", resp.StatusCode, resp.Err, len(resp.Body))
	}
	if got == nil {
		t.Fatal("nothing arrived")
	}
	for k, v := range map[string]string{
		"webhook-id": "evt_1", "webhook-timestamp": "1700000000", "webhook-signature": "v1,abc",
		"Content-Type": "application/json", "User-Agent": httpsender.UserAgent,
	} {
		if got.Header.Get(k) != v {
			t.Errorf("header %s = %q, want %q", k, got.Header.Get(k), v)
		}
	}
	if got.Header.Get("traceparent") != "" {
		t.Error("the request carries our trace context to the partner")
	}
	if gotBody != `{"id":"evt_1"}` || got.Method != http.MethodPost {
		t.Errorf("%s with body %q", got.Method, gotBody)
	}
}

// An answer cut off, a connection closed or refused: no whole answer,
// and the error says which.
func TestPostSaysWhyNoAnswerCame(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/truncate" {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte("partial"))
			_ = http.NewResponseController(w).Flush()
		}
		conn, _, _ := http.NewResponseController(w).Hijack()
		_ = conn.Close()
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()
	s := httpsender.New(httpsender.Options{PrivateEndpoints: webhook.HostPorts{webhook.Sandbox: {
		netip.MustParseAddrPort(srv.Listener.Addr().String()), netip.MustParseAddrPort(closed.Listener.Addr().String()),
	}}})
	for url, want := range map[string]string{
		srv.URL + "/truncate": "the answer was cut off: connection closed before a whole answer",
		srv.URL + "/cut":      "connection closed before a whole answer",
		closedURL:             "connection refused",
		"http://host.invalid": "cannot resolve host.invalid",
	} {
		if resp := post(s, webhook.Sandbox, url); !strings.HasPrefix(resp.Err, want) {
			t.Errorf("%s: %+v, want the error %q", url, resp, want)
		}
	}
}

// A proxy named in the environment is not used: it would connect for
// us, to wherever, past the check.
func TestIgnoresTheEnvironmentsProxy(t *testing.T) {
	var proxied atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	s := httpsender.New(httpsender.Options{})
	if resp := post(s, webhook.Live, "http://127.0.0.1:9/hooks"); !strings.Contains(resp.Err, "loopback") || proxied.Load() != 0 {
		t.Errorf("%+v, %d proxied; want refused, none through the proxy", resp, proxied.Load())
	}
}

// An https endpoint is trusted through the system's authorities and
// RootCAs only.
func TestTLSTrust(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	open := webhook.HostPorts{webhook.Live: {ap}}
	if resp := post(httpsender.New(httpsender.Options{PrivateEndpoints: open}), webhook.Live, srv.URL); !strings.HasPrefix(resp.Err, "TLS: ") {
		t.Errorf("untrusted: %+v, want a TLS error", resp)
	}
	roots := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	if resp := post(httpsender.New(httpsender.Options{PrivateEndpoints: open, RootCAs: roots}), webhook.Live, srv.URL); resp.StatusCode != http.StatusNoContent || resp.Err != "" {
		t.Errorf("trusted: %+v, want 204", resp)
	}
}
