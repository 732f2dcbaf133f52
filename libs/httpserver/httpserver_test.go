package httpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
)

func TestProbesAndRequestIDs(t *testing.T) {
	var seen string
	ready := errors.New("postgres: connection refused")
	h := httpserver.Handler(httpserver.Routes{
		App: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = telemetry.RequestID(r.Context())
		}),
		Ready: map[string]httpserver.Check{"postgres": func(context.Context) error { return ready }},
	})
	srv := httptest.NewServer(h)
	defer srv.Close()

	get := func(path string, header ...string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		if len(header) == 2 {
			req.Header.Set(header[0], header[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	if r := get("/healthz"); r.StatusCode != http.StatusOK {
		t.Fatalf("healthz %d", r.StatusCode)
	}
	r := get("/readyz")
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusServiceUnavailable || string(body) != `{"failed":["postgres"],"status":"unavailable"}`+"\n" {
		t.Fatalf("readyz with a failing check: %d %s; want the check named and its error kept in the log", r.StatusCode, body)
	}
	ready = nil
	if r := get("/readyz"); r.StatusCode != http.StatusOK {
		t.Fatalf("readyz %d", r.StatusCode)
	}

	// A caller's id is kept (the gateway's reaches every service); a
	// missing one is made.
	if r := get("/x", "Request-Id", "req_from_gateway"); r.Header.Get("Request-Id") != "req_from_gateway" || seen != "req_from_gateway" {
		t.Fatalf("kept id: header %q, context %q", r.Header.Get("Request-Id"), seen)
	}
	if r := get("/x"); !strings.HasPrefix(seen, "req_") || r.Header.Get("Request-Id") != seen {
		t.Fatalf("made id: header %q, context %q", r.Header.Get("Request-Id"), seen)
	}
}

func TestServeDrainsInFlightRequestsOnShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(200 * time.Millisecond)
		_, _ = io.WriteString(w, "done")
	})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- httpserver.Serve(ctx, slog.New(slog.DiscardHandler), ln, h, 5*time.Second) }()

	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-started
	cancel() // what SIGTERM does
	if body := <-got; body != "done" {
		t.Fatalf("in-flight request got %q, want it to finish", body)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := http.Get("http://" + ln.Addr().String()); err == nil {
		t.Fatal("server still accepts after shutdown")
	}
}

func TestRequestsAreMeasuredByRouteWithBoundedLabels(t *testing.T) {
	tel := setupTelemetry(t, "error", io.Discard)
	app := http.NewServeMux()
	app.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		httpserver.SetRoute(r.Context(), "/things/{id}")
		w.WriteHeader(http.StatusTeapot)
	})
	// Answered, but not named by the app: each path is a route, as a
	// Twirp method's is.
	app.HandleFunc("GET /many/{i}", func(w http.ResponseWriter, r *http.Request) {})
	srv := httptest.NewServer(httpserver.Handler(httpserver.Routes{App: app, Telemetry: tel}))
	defer srv.Close()

	get := func(path string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	get("/things/1")
	get("/things/2")
	// Paths nothing routes are one series, however many there are.
	for i := range 300 {
		get("/junk/" + strconv.Itoa(i))
	}
	// Paths the app serves without naming them are named by the default,
	// the path, until the label sets run out; then they are "other".
	for i := range 300 {
		get("/many/" + strconv.Itoa(i))
	}
	get("/healthz") // probes are not measured

	rec := httptest.NewRecorder()
	tel.MetricsHandler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	// Services answer in well under the 5 ms where the semantic
	// conventions' default buckets start: the histogram must resolve them.
	if !strings.Contains(rec.Body.String(), `http_route="/things/{id}"`) || !strings.Contains(rec.Body.String(), `le="0.0005"`) {
		t.Errorf("no sub-millisecond bucket in the request histogram")
	}
	counts := map[string]string{} // route|status -> count
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if !strings.HasPrefix(line, "http_server_request_duration_seconds_count{") {
			continue
		}
		route := labelValue(line, "http_route")
		counts[route+"|"+labelValue(line, "http_response_status_code")] = line[strings.LastIndexByte(line, ' ')+1:]
		if labelValue(line, "http_request_method") != "GET" {
			t.Errorf("method label in %s", line)
		}
	}
	if counts["/things/{id}|418"] != "2" {
		t.Errorf("routed requests: %v", counts)
	}
	if counts["unmatched|404"] != "300" || counts["/junk/0|404"] != "" {
		t.Errorf("unrouted requests: unmatched=%q /junk/0=%q", counts["unmatched|404"], counts["/junk/0|404"])
	}
	if counts["/many/0|200"] != "1" || counts["other|200"] == "" || counts["/healthz|200"] != "" {
		t.Errorf("unnamed routes: /many/0=%q other=%q healthz=%q", counts["/many/0|200"], counts["other|200"], counts["/healthz|200"])
	}
	if len(counts) > 256+1 {
		t.Errorf("%d label sets, want at most 257", len(counts))
	}
}

func labelValue(line, name string) string {
	_, rest, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func TestNotReadyLogsTheCause(t *testing.T) {
	var logs telemetrytest.LogBuffer
	tel := setupTelemetry(t, "warn", &logs)
	srv := httptest.NewServer(httpserver.Handler(httpserver.Routes{
		App: http.NotFoundHandler(), Telemetry: tel,
		Ready: map[string]httpserver.Check{"postgres": func(context.Context) error {
			return errors.New("failed to connect to `user=svc database=svc`: dial error")
		}},
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(body), "user=svc") || !strings.Contains(logs.String(), "user=svc") || !strings.Contains(logs.String(), `"check":"postgres"`) {
		t.Fatalf("body %s\nlogs %s\nwant the cause in the log only", body, logs.String())
	}
}

func TestDebugLevelLogsEveryRequest(t *testing.T) {
	for level, want := range map[string]bool{"debug": true, "info": false} {
		var logs telemetrytest.LogBuffer
		tel := setupTelemetry(t, level, &logs)
		srv := httptest.NewServer(httpserver.Handler(httpserver.Routes{
			Telemetry: tel,
			App: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				httpserver.SetRoute(r.Context(), "/things/{id}")
				w.WriteHeader(http.StatusTeapot)
			}),
		}))
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/things/42", nil)
		req.Header.Set("Request-Id", "req_logged")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		srv.Close()

		var line struct {
			Msg, Method, Route string
			RequestID          string `json:"request_id"`
			Status             int
		}
		found := false
		for l := range strings.Lines(logs.String()) {
			if err := json.Unmarshal([]byte(l), &line); err == nil && line.Msg == "request" {
				found = true
				break
			}
		}
		if found != want {
			t.Fatalf("LOG_LEVEL=%s: request logged %v, want %v:\n%s", level, found, want, logs.String())
		}
		if want && (line.Method != "GET" || line.Route != "/things/{id}" || line.Status != http.StatusTeapot || line.RequestID != "req_logged") {
			t.Fatalf("request line %+v:\n%s", line, logs.String())
		}
	}
}

// setupTelemetry is telemetry for a test service named "svc", shut down
// when the test ends.
func setupTelemetry(t *testing.T, level string, logs io.Writer, opts ...telemetry.Option) *telemetry.Telemetry {
	t.Helper()
	tel, err := telemetry.Setup(context.Background(), "svc", telemetry.Config{LogLevel: level}, logs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel
}

// ServeMux would redirect an unclean path with an HTML page; the app
// answers it instead, in its own shape.
func TestUncleanPathsReachTheApp(t *testing.T) {
	var reached []string
	h := httpserver.Handler(httpserver.Routes{
		App: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			reached = append(reached, r.URL.Path)
			w.WriteHeader(http.StatusTeapot)
		}),
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	paths := []string{"//x", "/v1//plans", "/a/./b", "/a/../healthz", "/healthz/.", "/x/.."}
	for _, p := range paths {
		resp, err := noRedirects.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTeapot || resp.Header.Get("Request-Id") == "" {
			t.Errorf("%s: %d (Location %q), Request-Id %q; want the app's answer", p, resp.StatusCode, resp.Header.Get("Location"), resp.Header.Get("Request-Id"))
		}
	}
	if len(reached) != len(paths) {
		t.Errorf("the app saw %q", reached)
	}
	for _, clean := range []string{"/", "/x/", "/v1/plans", "/v1/plans/"} {
		if httpserver.Unroutable(httptest.NewRequest(http.MethodGet, clean, nil)) {
			t.Errorf("%q is clean", clean)
		}
	}

	// The request target "*", which ServeMux answers with a bare 400.
	status, _, _ := httpservertest.RawExchange(t, srv.Listener.Addr().String(), "GET * HTTP/1.1\r\nHost: svc\r\n\r\n")
	if status != http.StatusTeapot || reached[len(reached)-1] != "*" {
		t.Errorf("GET *: %d, the app saw %q; want the app's answer", status, reached)
	}
}

// A body past the cap fails the handler's read; one at the cap is whole.
func TestRequestBodiesAreCapped(t *testing.T) {
	var read []int
	var tooLarge []bool
	h := httpserver.Handler(httpserver.Routes{
		MaxBodyBytes: 1000,
		App: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, err := io.ReadAll(r.Body)
			var mbe *http.MaxBytesError
			read, tooLarge = append(read, len(b)), append(tooLarge, errors.As(err, &mbe))
			if err != nil {
				w.WriteHeader(http.StatusRequestEntityTooLarge)
			}
		}),
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, n := range []int{1000, 1001, 1 << 20} {
		resp, err := http.Post(srv.URL+"/twirp/x", "application/json", strings.NewReader(strings.Repeat("a", n)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := n > 1000; (resp.StatusCode == http.StatusRequestEntityTooLarge) != want {
			t.Errorf("%d bytes: status %d", n, resp.StatusCode)
		}
	}
	if !slices.Equal(tooLarge, []bool{false, true, true}) || read[0] != 1000 || read[1] > 1000 || read[2] > 1000 {
		t.Errorf("read %v, too large %v", read, tooLarge)
	}
	if httpserver.DefaultMaxBodyBytes < 1<<20 {
		t.Errorf("default cap %d is under the catalogue's largest upsert", httpserver.DefaultMaxBodyBytes)
	}
}

func TestHeadersPastTheCapAreRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = httpserver.Serve(ctx, slog.New(slog.DiscardHandler), ln, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), time.Second)
	}()
	for size, want := range map[int]int{1 << 10: http.StatusOK, 2 * httpserver.MaxHeaderBytes: http.StatusRequestHeaderFieldsTooLarge} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+"/", nil)
		req.Header.Set("X-Padding", strings.Repeat("a", size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%d bytes of headers: %d, want %d", size, resp.StatusCode, want)
		}
	}
}
