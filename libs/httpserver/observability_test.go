package httpserver_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/esimplatform/esim/libs/httpserver"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
)

// A caller's Request-Id ends up in every log line and error body of the
// request: only ids that look like ids are kept, and a public endpoint
// keeps none, whatever wraps it.
func TestCallersRequestIDIsKeptOnlyWhenItLooksLikeOne(t *testing.T) {
	for _, public := range []bool{false, true} {
		var seen string
		srv := httptest.NewServer(httpserver.Handler(httpserver.Routes{
			Public: public,
			App:    http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { seen = telemetry.RequestID(r.Context()) }),
		}))
		for _, tc := range []struct {
			id   string
			keep bool
		}{
			{"req_0123456789abcdef01234567", true},
			{"0190c4c2-7d1e-7a3b-9f00-1234567890ab", true},
			{"abc.DEF:123_x-y", true},
			{strings.Repeat("a", 128), true},
			{strings.Repeat("a", 129), false},
			{`req_1","level":"ERROR","msg":"forged`, false},
			{"req_1 user=admin", false},
			{"req_\u202eevil", false}, // a bidi override reorders what an operator reads
			{"req_1\tmsg", false},
		} {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/x", nil)
			req.Header.Set("Request-Id", tc.id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			keep := tc.keep && !public
			if got := seen == tc.id; got != keep {
				t.Errorf("public=%v: Request-Id %q kept %v, want %v (context has %q)", public, tc.id, got, keep, seen)
			}
			if !keep && !strings.HasPrefix(seen, "req_") || resp.Header.Get("Request-Id") != seen {
				t.Errorf("public=%v: Request-Id %q gave context %q and header %q; want a fresh one in both", public, tc.id, seen, resp.Header.Get("Request-Id"))
			}
		}
		srv.Close()
	}
}

// The request line at debug level is logged outside the server span, yet
// it belongs to the trace like every other line of the request.
func TestRequestLineCarriesTraceAndSpanIDs(t *testing.T) {
	var logs telemetrytest.LogBuffer
	spans := tracetest.NewInMemoryExporter()
	tel := setupTelemetry(t, "debug", &logs, telemetry.WithSpanExporter(spans))
	srv := httptest.NewServer(httpserver.Handler(httpserver.Routes{
		Telemetry: tel,
		App: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpserver.SetRoute(r.Context(), "/things/{id}")
			tel.Logger.InfoContext(r.Context(), "deep in the handler")
		}),
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/things/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	server := spans.GetSpans()
	if len(server) != 1 {
		t.Fatalf("%d spans, want the server span", len(server))
	}
	want := server[0].SpanContext
	lines := map[string]map[string]any{}
	for l := range strings.Lines(logs.String()) {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) == nil {
			lines[line["msg"].(string)] = line
		}
	}
	for _, msg := range []string{"deep in the handler", "request"} {
		line := lines[msg]
		if line == nil || line["request_id"] != resp.Header.Get("Request-Id") ||
			line["trace_id"] != want.TraceID().String() || line["span_id"] != want.SpanID().String() {
			t.Errorf("line %q: %v; want request_id %s, trace_id %s, span_id %s", msg, line, resp.Header.Get("Request-Id"), want.TraceID(), want.SpanID())
		}
	}
}

// seriesOf scrapes tel's /metrics and returns the request count of every
// route|status label set of the request histogram.
func seriesOf(t *testing.T, tel *telemetry.Telemetry) map[string]string {
	t.Helper()
	rec := httptest.NewRecorder()
	tel.MetricsHandler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	counts := map[string]string{}
	for line := range strings.Lines(rec.Body.String()) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "http_server_request_duration_seconds_count{") {
			counts[labelValue(line, "http_route")+"|"+labelValue(line, "http_response_status_code")] = line[strings.LastIndexByte(line, ' ')+1:]
		}
	}
	return counts
}

// Twirp services name routes by path (their paths are their methods), so
// random paths must not become series: a flood of them adds one series
// for all, and does not use up the room real routes need later.
func TestNotFoundFloodOfRandomPathsAddsOneSeries(t *testing.T) {
	tel := setupTelemetry(t, "error", io.Discard)
	fail := false
	app := http.NewServeMux() // routes like Twirp's: one path per method, no SetRoute
	app.HandleFunc("POST /twirp/svc.v1.Svc/Get", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case fail:
			w.WriteHeader(http.StatusInternalServerError)
		case r.URL.Query().Get("id") == "missing":
			w.WriteHeader(http.StatusNotFound) // Twirp's not_found
		}
	})
	srv := httptest.NewServer(httpserver.Handler(httpserver.Routes{App: app, Telemetry: tel}))
	defer srv.Close()
	post := func(path string) {
		resp, err := http.Post(srv.URL+path, "application/protobuf", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	post("/twirp/svc.v1.Svc/Get")
	before := seriesOf(t, tel)
	for i := range 1000 {
		post("/twirp/svc.v1.Svc/Nope" + strconv.Itoa(i))
	}
	post("/twirp/svc.v1.Svc/Get?id=missing") // a real method's 404 keeps its route
	fail = true
	post("/twirp/svc.v1.Svc/Get") // so does its first 500, after the flood
	after := seriesOf(t, tel)

	if len(after) != len(before)+3 {
		t.Errorf("%d series before the flood, %d after, want 3 more (unmatched, the method's 404 and 500)", len(before), len(after))
	}
	for key, want := range map[string]string{
		"unmatched|404":             "1000",
		"/twirp/svc.v1.Svc/Get|200": "1",
		"/twirp/svc.v1.Svc/Get|404": "1",
		"/twirp/svc.v1.Svc/Get|500": "1",
	} {
		if after[key] != want {
			t.Errorf("%s counted %q, want %s", key, after[key], want)
		}
	}
}

// Span names follow the metrics' labels: a trace backend indexes them, so
// made-up methods and paths get one name each kind, never one apiece.
func TestSpanNamesStayBoundedUnderMadeUpMethodsAndPaths(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tel := setupTelemetry(t, "error", io.Discard, telemetry.WithSpanExporter(spans))
	app := http.NewServeMux()
	app.HandleFunc("POST /twirp/svc.v1.Svc/Get", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("id") == "missing" {
			w.WriteHeader(http.StatusNotFound) // Twirp's not_found
		}
	})
	app.HandleFunc("/named/{id}", func(w http.ResponseWriter, r *http.Request) {
		httpserver.SetRoute(r.Context(), "/named/{id}")
	})
	srv := httptest.NewServer(httpserver.Handler(httpserver.Routes{App: app, Telemetry: tel}))
	defer srv.Close()
	send := func(method, path string) {
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	send(http.MethodPost, "/twirp/svc.v1.Svc/Get") // its very first request
	send(http.MethodPost, "/twirp/svc.v1.Svc/Get?id=missing")
	for i := range 20 {
		send(http.MethodPost, "/twirp/svc.v1.Svc/Nope"+strconv.Itoa(i))
		send("ZZQ"+strconv.Itoa(i), "/r"+strconv.Itoa(i))
		send("ZZQ"+strconv.Itoa(i), "/named/"+strconv.Itoa(i))
	}

	names := map[string]int{}
	for _, s := range spans.GetSpans() {
		names[s.Name]++
	}
	want := map[string]int{
		"POST /twirp/svc.v1.Svc/Get": 2,
		"POST unmatched":             20,
		"_OTHER unmatched":           20,
		"_OTHER /named/{id}":         20,
	}
	if !maps.Equal(names, want) {
		t.Errorf("span names %v, want %v", names, want)
	}
}

// A panic is a 500 the metrics count and one JSON line that names the
// request, not net/http's id-less "http: panic serving" line.
func TestPanicIsCountedAndLoggedWithTheRequestsIDs(t *testing.T) {
	var logs telemetrytest.LogBuffer
	spans := tracetest.NewInMemoryExporter()
	tel := setupTelemetry(t, "info", &logs, telemetry.WithSpanExporter(spans))
	// Setup routed the log package, where net/http logs panics, into logs.
	srv := httptest.NewServer(httpserver.Handler(httpserver.Routes{
		Telemetry: tel,
		App: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpserver.SetRoute(r.Context(), "/boom")
			panic("boom")
		}),
	}))
	defer srv.Close()
	if resp, err := http.Get(srv.URL + "/boom"); err == nil {
		resp.Body.Close()
	}
	srv.Close() // the server logs its panic line before closing the connection; wait for it

	if got := seriesOf(t, tel)["/boom|500"]; got != "1" {
		t.Errorf("panicking request counted %q times as a 500, want 1", got)
	}
	var panics []map[string]any
	for l := range strings.Lines(logs.String()) {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Errorf("log line is not JSON: %q", l)
			continue
		}
		if strings.Contains(l, "panic") {
			panics = append(panics, line)
		}
	}
	traceID := ""
	if s := spans.GetSpans(); len(s) == 1 {
		traceID = s[0].SpanContext.TraceID().String()
	}
	if len(panics) != 1 || panics[0]["level"] != "ERROR" || panics[0]["panic"] != "boom" ||
		!strings.HasPrefix(panics[0]["request_id"].(string), "req_") || panics[0]["trace_id"] != traceID ||
		!strings.Contains(panics[0]["stack"].(string), "TestPanicIsCountedAndLoggedWithTheRequestsIDs") {
		t.Errorf("want one ERROR line with the panic, its stack, request and trace ids (%s); got %d panic lines, the first:\n%.300v", traceID, len(panics), panics)
	}
}

// With AnswerPanic set, a handler that panics before writing gets that
// answer instead of a dropped connection; one that panicked mid-answer is
// still cut, since its status and part of its body are already sent.
func TestAnswerPanicWritesTheAnswerWhenNothingWasWritten(t *testing.T) {
	var logs telemetrytest.LogBuffer
	tel := setupTelemetry(t, "info", &logs)
	srv := httptest.NewServer(httpserver.Handler(httpserver.Routes{
		Telemetry: tel,
		App: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpserver.SetRoute(r.Context(), r.URL.Path)
			if r.URL.Path == "/late" {
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "half")
				_ = http.NewResponseController(w).Flush()
			}
			panic("boom")
		}),
		AnswerPanic: func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":"internal","request_id":"`+telemetry.RequestID(r.Context())+`"}`)
		},
	}))
	defer srv.Close()
	// A fresh connection each: the client retries a GET whose reused
	// connection broke, which would serve the panic twice.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	resp, err := client.Get(srv.URL + "/early")
	if err != nil {
		t.Fatalf("early panic: %v; want the answer, not a dropped connection", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"request_id":"`+resp.Header.Get("Request-Id")+`"`) {
		t.Fatalf("early panic answered %d %s", resp.StatusCode, body)
	}
	if resp, err := client.Get(srv.URL + "/late"); err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("a panic after the answer began must cut the connection")
		}
	}
	srv.Close()

	series := seriesOf(t, tel)
	if series["/early|500"] != "1" || series["/late|200"] != "1" {
		t.Errorf("series %v, want /early|500 and /late|200 once each", series)
	}
	if n := strings.Count(logs.String(), `"panic serving request"`); n != 2 {
		t.Errorf("%d panic lines, want one per panic", n)
	}
}

// One trace crosses a service hop as parent and child: the public server
// span is a root (a caller's trace context is only linked), the client
// span its child, the internal server span the client span's child, and
// the internal service's own spans (pgx queries) children of that.
func TestTraceCrossesServicesAsParentAndChild(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	tel := setupTelemetry(t, "error", io.Discard, telemetry.WithSpanExporter(spans))

	var internalRequestID, internalBaggage string
	internal := httptest.NewServer(httpserver.Handler(httpserver.Routes{
		Telemetry: tel,
		App: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			internalRequestID = telemetry.RequestID(r.Context())
			internalBaggage = r.Header.Get("baggage")
			_, query := tel.TracerProvider.Tracer("db").Start(r.Context(), "SELECT")
			query.End()
		}),
	}))
	defer internal.Close()
	client := tel.HTTPClient(0)
	public := httptest.NewServer(httpserver.Handler(httpserver.Routes{
		Telemetry: tel, Public: true,
		App: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, internal.URL+"/twirp/svc.v1.Svc/Get", nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		}),
	}))
	defer public.Close()

	const partnerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest(http.MethodGet, public.URL+"/v1/plans", nil)
	req.Header.Set("traceparent", "00-"+partnerTrace+"-00f067aa0ba902b7-01")
	req.Header.Set("baggage", "tenant=someone-else")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	byName := map[string]trace.SpanContext{}
	parent := map[string]trace.SpanID{}
	var root []string
	got := spans.GetSpans()
	for _, s := range got {
		// A call's client and server spans share its name; kind tells them apart.
		name := s.SpanKind.String() + " " + s.Name
		byName[name] = s.SpanContext
		parent[name] = s.Parent.SpanID()
		if !s.Parent.IsValid() {
			root = append(root, name)
		}
		if s.SpanContext.TraceID().String() == partnerTrace {
			t.Errorf("span %q continues the partner's trace", s.Name)
		}
	}
	chain := []string{"server GET /v1/plans", "client POST /twirp/svc.v1.Svc/Get", "server POST /twirp/svc.v1.Svc/Get", "internal SELECT"}
	if len(got) != len(chain) || len(root) != 1 || root[0] != chain[0] {
		t.Fatalf("spans %v with roots %v, want %v with the first the only root", byName, root, chain)
	}
	for i := 1; i < len(chain); i++ {
		p, c := byName[chain[i-1]], chain[i]
		if parent[c] != p.SpanID() || byName[c].TraceID() != p.TraceID() {
			t.Errorf("span %q: parent %s in trace %s, want %q (%s in %s)", c, parent[c], byName[c].TraceID(), chain[i-1], p.SpanID(), p.TraceID())
		}
	}
	for _, s := range got {
		if s.SpanKind.String()+" "+s.Name == chain[0] && (len(s.Links) != 1 || s.Links[0].SpanContext.TraceID().String() != partnerTrace) {
			t.Errorf("public span links %v, want the partner's trace linked", s.Links)
		}
	}
	if internalBaggage != "" {
		t.Errorf("the partner's baggage reached the internal service: %q", internalBaggage)
	}
	if internalRequestID != resp.Header.Get("Request-Id") {
		t.Errorf("internal service saw request id %q, the public one answered %q", internalRequestID, resp.Header.Get("Request-Id"))
	}
}
