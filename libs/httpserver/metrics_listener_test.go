package httpserver_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
)

// app answers everything with 418, so a test can tell it from /metrics
// and from a listener's own 404.
var app = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })

var metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "requests_total 1\n") })

// listenAndServe runs ListenAndServe with cfg until the test ends, and
// returns the addresses it logged and a channel with its result.
func listenAndServe(t *testing.T, ctx context.Context, cfg httpserver.Config) (api, metricsAddr string, done <-chan error) {
	t.Helper()
	logw, listeners := telemetrytest.Listening()
	log := slog.New(slog.NewJSONHandler(logw, nil))
	result := make(chan error, 1)
	go func() {
		result <- httpserver.ListenAndServe(ctx, log, cfg, app, metrics)
		_ = logw.Close()
	}()
	api, metricsAddr = listeners.Wait(t, result, cfg.MetricsAddr != "")
	return api, metricsAddr, result
}

func status(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return httpservertest.Do(t, req)
}

func TestMetricsGetAPortOfTheirOwn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api, metricsAddr, done := listenAndServe(t, ctx, httpserver.Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second})

	for _, tc := range []struct {
		method, url string
		want        int
	}{
		// The API's port never serves /metrics: a NetworkPolicy opening
		// the metrics port to Prometheus opens nothing else.
		{http.MethodGet, "http://" + api + "/metrics", http.StatusTeapot},
		{http.MethodGet, "http://" + api + "/plans", http.StatusTeapot},
		{http.MethodGet, "http://" + metricsAddr + "/metrics", http.StatusOK},
		{http.MethodHead, "http://" + metricsAddr + "/metrics", http.StatusOK},
		// And the metrics port serves nothing but reading /metrics.
		{http.MethodPost, "http://" + metricsAddr + "/metrics", http.StatusNotFound},
		{http.MethodGet, "http://" + metricsAddr + "/plans", http.StatusNotFound},
		{http.MethodGet, "http://" + metricsAddr + "/readyz", http.StatusNotFound},
	} {
		if got, body := status(t, tc.method, tc.url); got != tc.want {
			t.Errorf("%s %s = %d %.100q, want %d", tc.method, tc.url, got, body, tc.want)
		}
	}
	if _, body := status(t, http.MethodGet, "http://"+metricsAddr+"/metrics"); body != "requests_total 1\n" {
		t.Errorf("metrics port /metrics = %q, not the metrics handler's", body)
	}

	// Both stop together, and cleanly.
	cancel()
	httpservertest.Returned(t, done, 10*time.Second)
	for _, addr := range []string{api, metricsAddr} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after ListenAndServe returned", addr)
		}
	}
}

func TestMetricsShareThePortWithoutMetricsAddr(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api, _, done := listenAndServe(t, ctx, httpserver.Config{Addr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second})
	if got, body := status(t, http.MethodGet, "http://"+api+"/metrics"); got != http.StatusOK || body != "requests_total 1\n" {
		t.Errorf("GET /metrics = %d %q, want the metrics handler's", got, body)
	}
	if got, _ := status(t, http.MethodPost, "http://"+api+"/metrics"); got != http.StatusTeapot {
		t.Errorf("POST /metrics = %d, want the app's answer", got)
	}
	if got, _ := status(t, http.MethodGet, "http://"+api+"/plans"); got != http.StatusTeapot {
		t.Errorf("GET /plans = %d, want the app's answer", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestATakenMetricsPortFailsTheStartAndFreesTheAPIPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := free.Addr().String()
	free.Close()

	err = httpserver.ListenAndServe(context.Background(), slog.New(slog.DiscardHandler),
		httpserver.Config{Addr: apiAddr, MetricsAddr: taken.Addr().String(), ShutdownTimeout: time.Second}, app, metrics)
	if err == nil || !strings.Contains(err.Error(), "METRICS_ADDR") || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Fatalf("ListenAndServe = %v, want an error naming METRICS_ADDR and %s", err, taken.Addr())
	}
	// The API's listener, opened first, was closed again.
	ln, err := net.Listen("tcp", apiAddr)
	if err != nil {
		t.Fatalf("the API's address is still held after the failed start: %v", err)
	}
	ln.Close()
}

// Requests the API finishes while it drains are counted, so the metrics
// listener stops only once the API's has.
func TestMetricsOutliveTheAPIsDrain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logw, listeners := telemetrytest.Listening()
	release, started := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
	})
	done := make(chan error, 1)
	go func() {
		done <- httpserver.ListenAndServe(ctx, slog.New(slog.NewJSONHandler(logw, nil)),
			httpserver.Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", ShutdownTimeout: 10 * time.Second}, slow, metrics)
		_ = logw.Close()
	}()
	api, metricsAddr := listeners.Wait(t, done, true)
	answered := make(chan int, 1)
	go func() {
		resp, err := http.Get("http://" + api + "/slow")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-started
	cancel()
	waitRefused(t, api) // the API is draining now
	if got, _ := status(t, http.MethodGet, "http://"+metricsAddr+"/metrics"); got != http.StatusOK {
		t.Errorf("/metrics during the API's drain = %d, want 200", got)
	}
	close(release)
	if code := <-answered; code != http.StatusOK {
		t.Errorf("the request in flight got %d, want 200", code)
	}
	if err := <-done; err != nil {
		t.Fatalf("ListenAndServe: %v", err)
	}
}

// waitRefused returns once addr refuses connections, as a listener does
// from the moment its server begins to shut down.
func waitRefused(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return
		}
		c.Close()
	}
	t.Fatalf("%s still accepts connections 10 s after the shutdown began", addr)
}

// A listener that fails stops the other, and ListenAndServe says which
// failed: a process serving its API without metrics, or metrics without
// its API, would look alive to one check and dead to the other.
func TestAFailingListenerStopsTheOther(t *testing.T) {
	for _, failing := range []string{"api", "metrics"} {
		t.Run(failing, func(t *testing.T) {
			api, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			metricsLn, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				done <- httpserver.ServeWithMetrics(context.Background(), slog.New(slog.DiscardHandler), api, metricsLn, app, metrics, 5*time.Second)
			}()
			// Both serve before one fails.
			if got, _ := status(t, http.MethodGet, "http://"+api.Addr().String()+"/plans"); got != http.StatusTeapot {
				t.Fatalf("API: %d", got)
			}
			if got, _ := status(t, http.MethodGet, "http://"+metricsLn.Addr().String()+"/metrics"); got != http.StatusOK {
				t.Fatalf("metrics: %d", got)
			}
			broken, other := api, metricsLn
			if failing == "metrics" {
				broken, other = metricsLn, api
			}
			broken.Close() // its Accept fails from now on
			select {
			case err := <-done:
				if err == nil || strings.Contains(err.Error(), "metrics listener") != (failing == "metrics") {
					t.Errorf("with the %s listener failing: %v", failing, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("the %s listener failed and the other kept serving", failing)
			}
			waitRefused(t, other.Addr().String())
		})
	}
}

// The charts budget SHUTDOWN_TIMEOUT once between SIGTERM and SIGKILL: the
// metrics listener, stopped after the API's drain, gets only what is left
// of it, not a grace period of its own.
func TestBothListenersStopWithinOneGracePeriod(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hang := make(chan struct{})
	defer close(hang)
	var started sync.WaitGroup
	started.Add(2)
	hung := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		started.Done()
		<-hang
	})
	const grace = time.Second
	logw, listeners := telemetrytest.Listening()
	done := make(chan error, 1)
	go func() {
		done <- httpserver.ListenAndServe(ctx, slog.New(slog.NewJSONHandler(logw, nil)),
			httpserver.Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", ShutdownTimeout: grace}, hung, hung)
		_ = logw.Close()
	}()
	api, metricsAddr := listeners.Wait(t, done, true)
	for _, url := range []string{"http://" + api + "/slow", "http://" + metricsAddr + "/metrics"} {
		go func() {
			if resp, err := http.Get(url); err == nil {
				resp.Body.Close()
			}
		}()
	}
	started.Wait()
	stopped := time.Now()
	cancel()
	err := <-done
	// A bound, not a speed: one grace period, where two in a row take
	// twice as long.
	if took := time.Since(stopped); took >= grace*3/2 {
		t.Errorf("stopping took %s with a grace period of %s", took, grace)
	}
	if err == nil || !strings.Contains(err.Error(), "metrics listener, stopped after the API's drain: ") || !strings.Contains(err.Error(), "were cut") {
		t.Errorf("ListenAndServe = %v, want both cut requests reported, the metrics listener's named", err)
	}
}

// Pages cannot read /metrics, wherever it is served: not a page rebinding
// its name to 127.0.0.1 (its Host is no internal name), nor one on another
// local port (browsers send it Sec-Fetch-Site). A person opening the
// address, and Prometheus by pod IP, can.
func TestPagesCannotReadMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	shared, _, _ := listenAndServe(t, ctx, httpserver.Config{Addr: "127.0.0.1:0", ShutdownTimeout: time.Second})
	_, own, _ := listenAndServe(t, ctx, httpserver.Config{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", ShutdownTimeout: time.Second})
	for _, addr := range []string{shared, own} {
		for _, tc := range []struct {
			host, site string
			want       int
		}{
			{"", "same-site", http.StatusMisdirectedRequest},
			{"", "cross-site", http.StatusMisdirectedRequest},
			{"rebind.attacker.example", "", http.StatusMisdirectedRequest},
			{"", "none", http.StatusOK},
			{"", "", http.StatusOK},
			{"10.244.0.7:9090", "", http.StatusOK},
			{"catalogue.esim.svc:9090", "", http.StatusOK},
		} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.site != "" {
				req.Header.Set("Sec-Fetch-Site", tc.site)
			}
			if got, body := httpservertest.Do(t, req); got != tc.want {
				t.Errorf("%s/metrics, Host %q, Sec-Fetch-Site %q: %d %s, want %d", addr, tc.host, tc.site, got, body, tc.want)
			}
		}
	}
}

func TestMetricsAddrMustDifferFromAddr(t *testing.T) {
	if err := (httpserver.Config{ShutdownTimeout: time.Second}).Validate(); err != nil {
		t.Errorf("no addresses at all: %v; METRICS_ADDR unset is not HTTP_ADDR", err)
	}
	err := httpserver.Config{Addr: ":8080", MetricsAddr: ":8080", ShutdownTimeout: time.Second}.Validate()
	if err == nil || !strings.Contains(err.Error(), `METRICS_ADDR ":8080" is HTTP_ADDR too`) {
		t.Errorf("Validate = %v, want METRICS_ADDR refused", err)
	}
	for _, metricsAddr := range []string{"", ":9090", "127.0.0.1:0"} {
		addr := ":8080"
		if strings.HasSuffix(metricsAddr, ":0") {
			addr = metricsAddr
		}
		if err := (httpserver.Config{Addr: addr, MetricsAddr: metricsAddr, ShutdownTimeout: time.Second}).Validate(); err != nil {
			t.Errorf("METRICS_ADDR %q: %v", metricsAddr, err)
		}
	}
}

// An address net.Listen would refuse for its form is refused with the
// rest of the configuration, naming the variable, instead of alone once
// the service has connected to everything else.
func TestConfigRefusesAddressesListenWouldRefuse(t *testing.T) {
	for _, tc := range []struct{ addr, metricsAddr, want string }{
		{"nonsense", "", `HTTP_ADDR "nonsense": want [host]:port`},
		{"8080", "", `HTTP_ADDR "8080": want [host]:port`},
		{":80a", "", `port "80a" is not a number from 0 to 65535`},
		{":8080", ":65536", `METRICS_ADDR ":65536": want [host]:port`},
		{":8080", "localhost", `METRICS_ADDR "localhost"`},
	} {
		err := httpserver.Config{Addr: tc.addr, MetricsAddr: tc.metricsAddr, ShutdownTimeout: time.Second}.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("HTTP_ADDR %q, METRICS_ADDR %q: %v, want an error saying %s", tc.addr, tc.metricsAddr, err, tc.want)
		}
	}
	for _, addr := range []string{":8080", "127.0.0.1:0", "[::1]:8080", "localhost:9090", "0.0.0.0:65535"} {
		if err := (httpserver.Config{Addr: addr, ShutdownTimeout: time.Second}).Validate(); err != nil {
			t.Errorf("HTTP_ADDR %q: %v", addr, err)
		}
	}
}

// TestMaxConnectionsHoldsNewConnectionsUntilOneCloses: at MAX_CONNECTIONS
// open connections, idle keep-alive ones included, a new connection is
// not served until one of them closes; then it is.
func TestMaxConnectionsHoldsNewConnectionsUntilOneCloses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api, _, done := listenAndServe(t, ctx, httpserver.Config{Addr: "127.0.0.1:0", MaxConnections: 2, ShutdownTimeout: 5 * time.Second})
	url := "http://" + api + "/plans"
	get := func(c *http.Client) error {
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusTeapot {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	// Two clients, each keeping its connection open after its answer.
	holders := []*http.Transport{{}, {}}
	for _, tr := range holders {
		if err := get(&http.Client{Transport: tr}); err != nil {
			t.Fatalf("a connection under the cap: %v", err)
		}
	}
	// A third connection waits in the accept queue: no answer while both
	// are open.
	if err := get(&http.Client{Transport: &http.Transport{}, Timeout: 300 * time.Millisecond}); err == nil {
		t.Fatal("a third connection was served with MAX_CONNECTIONS=2 and two open")
	}
	holders[0].CloseIdleConnections()
	if err := get(&http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}); err != nil {
		t.Fatalf("a new connection once one had closed: %v", err)
	}
	holders[1].CloseIdleConnections()
	cancel()
	httpservertest.Returned(t, done, 10*time.Second)
}

func TestMaxConnectionsIsBounded(t *testing.T) {
	for _, n := range []int{-1, 1_000_001} {
		err := httpserver.Config{Addr: ":8080", MaxConnections: n, ShutdownTimeout: time.Second}.Validate()
		if err == nil || !strings.Contains(err.Error(), "MAX_CONNECTIONS") {
			t.Errorf("MAX_CONNECTIONS %d: %v, want it refused", n, err)
		}
	}
	for _, n := range []int{0, 1, 4096} {
		if err := (httpserver.Config{Addr: ":8080", MaxConnections: n, ShutdownTimeout: time.Second}).Validate(); err != nil {
			t.Errorf("MAX_CONNECTIONS %d: %v", n, err)
		}
	}
}
