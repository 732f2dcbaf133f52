package es2plus

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Valid ICCIDs (19 digits, 89, Luhn).
const (
	iccid1 = "8988247000000000001"
	iccid2 = "8988247000000000019"
)

// seen is a request as the test server received it.
type seen struct {
	Method, Path string
	Header       http.Header
	Body         map[string]any
}

// smdp is a TLS test server requiring client certificates, whose handler
// each test sets. It records every request that reached the handler.
type smdp struct {
	*httptest.Server
	pki *pki

	mu      sync.Mutex
	handle  http.HandlerFunc
	records []seen
}

func newSMDP(t *testing.T, p *pki) *smdp {
	t.Helper()
	s := &smdp{pki: p}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(data, &body)
		s.mu.Lock()
		s.records = append(s.records, seen{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		h := s.handle
		s.mu.Unlock()
		if h == nil {
			http.Error(w, "no handler", http.StatusInternalServerError)
			return
		}
		h(w, r)
	}))
	// Handshakes the tests make fail on purpose are not news.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.TLS = p.serverTLS()
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *smdp) answer(status int, body string) {
	s.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	})
}

func (s *smdp) setHandler(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handle = h
}

func (s *smdp) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.records...)
}

func (s *smdp) config() Config {
	return Config{
		URL:         s.URL,
		CertFile:    s.pki.certFile,
		KeyFile:     s.pki.keyFile,
		CAFile:      s.pki.caFile,
		Timeout:     2 * time.Second,
		RequesterID: "operator-1",
	}
}

func newClient(t *testing.T, cfg Config, opts ...Option) *Client {
	t.Helper()
	c, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

const success = `{"header":{"functionExecutionStatus":{"status":"Executed-Success"}}}`

func successWith(fields string) string {
	return `{"header":{"functionExecutionStatus":{"status":"Executed-Success"}},` + fields + `}`
}

func failed(subject, reason, message string) string {
	return `{"header":{"functionExecutionStatus":{"status":"Failed","statusCodeData":{"subjectCode":"` + subject +
		`","reasonCode":"` + reason + `","subjectIdentifier":"` + iccid1 + `","message":"` + message + `"}}}}`
}

// checkRequest checks what every ES2+ call carries and returns its
// functionCallIdentifier.
func checkRequest(t *testing.T, r seen, function string) string {
	t.Helper()
	if r.Method != http.MethodPost {
		t.Errorf("method %s, want POST", r.Method)
	}
	if want := "/gsma/rsp2/es2plus/" + function; r.Path != want {
		t.Errorf("path %s, want %s", r.Path, want)
	}
	if got := r.Header.Get("X-Admin-Protocol"); got != "gsma/rsp/v2.5.0" {
		t.Errorf("X-Admin-Protocol %q", got)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json;charset=UTF-8" {
		t.Errorf("Content-Type %q", got)
	}
	h, ok := r.Body["header"].(map[string]any)
	if !ok {
		t.Fatalf("request has no header object: %v", r.Body)
	}
	if h["functionRequesterIdentifier"] != "operator-1" {
		t.Errorf("functionRequesterIdentifier %v", h["functionRequesterIdentifier"])
	}
	id, _ := h["functionCallIdentifier"].(string)
	if len(id) != 36 {
		t.Errorf("functionCallIdentifier %q is not a UUID", id)
	}
	return id
}

func TestDownloadOrder(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	c := newClient(t, s.config())
	s.answer(200, successWith(`"iccid":"`+iccid1+`"`))

	got, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ProfileType: "esim-1gb"})
	if err != nil {
		t.Fatal(err)
	}
	if got != iccid1 {
		t.Errorf("iccid %s, want %s", got, iccid1)
	}
	if _, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ProfileType: "esim-1gb", EID: "89049032000000000000000000000001", ICCID: iccid1}); err != nil {
		t.Fatal(err)
	}
	reqs := s.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	id1 := checkRequest(t, reqs[0], "downloadOrder")
	id2 := checkRequest(t, reqs[1], "downloadOrder")
	if id1 == id2 {
		t.Errorf("two calls share the functionCallIdentifier %s", id1)
	}
	if reqs[0].Body["profileType"] != "esim-1gb" {
		t.Errorf("profileType %v", reqs[0].Body["profileType"])
	}
	for _, f := range []string{"eid", "iccid"} {
		if _, ok := reqs[0].Body[f]; ok {
			t.Errorf("empty optional field %s was sent", f)
		}
	}
	if reqs[1].Body["eid"] != "89049032000000000000000000000001" || reqs[1].Body["iccid"] != iccid1 {
		t.Errorf("optional fields not sent: %v", reqs[1].Body)
	}
}

func TestConfirmOrder(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	c := newClient(t, s.config())
	s.answer(200, successWith(`"eid":"E1","matchingId":"MATCH-1","smdpAddress":"smdp.example.com"`))

	got, err := c.ConfirmOrder(t.Context(), ConfirmOrderRequest{ICCID: iccid1, ReleaseFlag: true})
	if err != nil {
		t.Fatal(err)
	}
	want := ConfirmOrderResponse{MatchingID: "MATCH-1", SMDPAddress: "smdp.example.com", EID: "E1"}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	reqs := s.requests()
	checkRequest(t, reqs[0], "confirmOrder")
	if reqs[0].Body["iccid"] != iccid1 || reqs[0].Body["releaseFlag"] != true {
		t.Errorf("body %v", reqs[0].Body)
	}
	for _, f := range []string{"eid", "matchingId", "smdsAddress"} {
		if _, ok := reqs[0].Body[f]; ok {
			t.Errorf("empty optional field %s was sent", f)
		}
	}

	// releaseFlag false is sent, not omitted, and the optional fields go
	// out when set.
	if _, err := c.ConfirmOrder(t.Context(), ConfirmOrderRequest{ICCID: iccid1, EID: "E1", MatchingID: "M", SMDSAddress: "smds.example.com"}); err != nil {
		t.Fatal(err)
	}
	b := s.requests()[1].Body
	if b["releaseFlag"] != false || b["eid"] != "E1" || b["matchingId"] != "M" || b["smdsAddress"] != "smds.example.com" {
		t.Errorf("body %v", b)
	}
}

func TestCancelOrder(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	c := newClient(t, s.config())
	s.answer(200, success)

	if err := c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: FinalProfileStatusAvailable}); err != nil {
		t.Fatal(err)
	}
	r := s.requests()[0]
	checkRequest(t, r, "cancelOrder")
	if r.Body["iccid"] != iccid1 || r.Body["finalProfileStatusIndicator"] != "Available" {
		t.Errorf("body %v", r.Body)
	}
}

func TestFailedIsFunctionError(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	c := newClient(t, s.config())
	s.answer(200, failed("8.2.1", "3.9", "Profile not available"))

	_, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ProfileType: "esim-1gb"})
	var fe *FunctionError
	if !errors.As(err, &fe) {
		t.Fatalf("err %v (%T), want *FunctionError", err, err)
	}
	callID := checkRequest(t, s.requests()[0], "downloadOrder")
	want := FunctionError{Function: "downloadOrder", FunctionCallIdentifier: callID, Status: StatusFailed, SubjectCode: "8.2.1", ReasonCode: "3.9", SubjectIdentifier: iccid1, Message: "Profile not available"}
	if *fe != want {
		t.Errorf("got %+v, want %+v", *fe, want)
	}
	if got := Outcome(err); got != "failed:8.2.1/3.9" {
		t.Errorf("Outcome %q", got)
	}
	if !IsDefinitive(err) {
		t.Error("a Failed answer is not definitive")
	}
	for _, kind := range []error{ErrTimeout, ErrTransport, ErrProtocol} {
		if errors.Is(err, kind) {
			t.Errorf("a Failed answer is %v", kind)
		}
	}

	// Each function reports Failed the same way.
	if _, err := c.ConfirmOrder(t.Context(), ConfirmOrderRequest{ICCID: iccid1, ReleaseFlag: true}); Outcome(err) != "failed:8.2.1/3.9" {
		t.Errorf("confirmOrder: %v", err)
	}
	if err := c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Unavailable"}); Outcome(err) != "failed:8.2.1/3.9" {
		t.Errorf("cancelOrder: %v", err)
	}
}

// TestAnswersVendorsGive: Executed-WithWarning is a success (its codes
// logged); Expired, and Failed without status codes, are refusals; an
// ICCID padded with F comes back without it; a confirmOrder without
// smdpAddress answers the matching id alone.
func TestAnswersVendorsGive(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	var logs strings.Builder
	c := newClient(t, s.config(), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	warning := `{"header":{"functionExecutionStatus":{"status":"Executed-WithWarning","statusCodeData":{"subjectCode":"8.2.5","reasonCode":"3.7","message":"pool running low"}}},"iccid":"` + iccid1 + `F"}`
	s.answer(200, warning)
	got, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ProfileType: "p"})
	if err != nil || got != iccid1 {
		t.Fatalf("Executed-WithWarning with a padded ICCID: %q, %v; want %s", got, err, iccid1)
	}
	if !strings.Contains(logs.String(), "subject_code=8.2.5") || !strings.Contains(logs.String(), "pool running low") {
		t.Errorf("the warning was not logged: %s", logs.String())
	}
	s.answer(200, successWith(`"matchingId":"M"`))
	res, err := c.ConfirmOrder(t.Context(), ConfirmOrderRequest{ICCID: iccid1, ReleaseFlag: true, ConfirmationCode: "1234"})
	if err != nil || res != (ConfirmOrderResponse{MatchingID: "M"}) {
		t.Errorf("confirmOrder without smdpAddress: %+v, %v", res, err)
	}
	if b := s.requests()[1].Body; b["confirmationCode"] != "1234" {
		t.Errorf("confirmationCode not sent: %v", b)
	}
	for name, body := range map[string]string{
		"expired":               `{"header":{"functionExecutionStatus":{"status":"Expired"}}}`,
		"failed without codes":  `{"header":{"functionExecutionStatus":{"status":"Failed"}}}`,
		"failed without reason": `{"header":{"functionExecutionStatus":{"status":"Failed","statusCodeData":{"subjectCode":"8.1"}}}}`,
	} {
		s.answer(200, body)
		err := c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"})
		var fe *FunctionError
		if !errors.As(err, &fe) || !IsDefinitive(err) || errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want a definitive refusal", name, err)
		}
	}
	if got := Outcome(&FunctionError{Status: StatusExpired}); got != OutcomeExpired {
		t.Errorf("Outcome of Expired %q", got)
	}

	// The protocol version is a setting.
	cfg := s.config()
	cfg.ProtocolVersion = "gsma/rsp/v2.2.0"
	s.answer(200, success)
	if err := newClient(t, cfg).CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"}); err != nil {
		t.Fatal(err)
	}
	reqs := s.requests()
	if got := reqs[len(reqs)-1].Header.Get("X-Admin-Protocol"); got != "gsma/rsp/v2.2.0" {
		t.Errorf("X-Admin-Protocol %q, want the configured one", got)
	}
	cfg.ProtocolVersion = "gsma/rsp/v3.0.0"
	if _, err := New(cfg); err == nil {
		t.Error("a version other than v2.x.y was accepted")
	}
}

func TestProtocolErrors(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	c := newClient(t, s.config())
	download := func() error {
		_, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ProfileType: "p"})
		return err
	}
	downloadICCID := func() error {
		_, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ICCID: iccid2})
		return err
	}
	confirm := func() error {
		_, err := c.ConfirmOrder(t.Context(), ConfirmOrderRequest{ICCID: iccid1, ReleaseFlag: true})
		return err
	}
	cancel := func() error {
		return c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"})
	}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		call   func() error
	}{
		{"500", 500, successWith(`"iccid":"` + iccid1 + `"`), download},
		{"404 cancel", 404, success, cancel},
		{"204", 204, "", cancel},
		{"garbage", 200, "<html>oops</html>", download},
		{"empty", 200, "", cancel},
		{"truncated", 200, `{"header":{"functionExecutionStatus":`, confirm},
		{"trailing garbage", 200, success + "x", cancel},
		{"array", 200, `[]`, cancel},
		{"no header", 200, `{"iccid":"` + iccid1 + `"}`, download},
		{"header not an object", 200, `{"header":"ok"}`, cancel},
		{"no status", 200, `{"header":{"functionExecutionStatus":{}}}`, cancel},
		{"unknown status", 200, `{"header":{"functionExecutionStatus":{"status":"Executed-Maybe"}}}`, cancel},
		{"no iccid", 200, success, download},
		{"iccid not a string", 200, successWith(`"iccid":8988247000000000001`), download},
		{"iccid bad luhn", 200, successWith(`"iccid":"8988247000000000004"`), download},
		{"iccid 18 digits, bad luhn", 200, successWith(`"iccid":"898824700000000000"`), download},
		{"iccid 21 digits", 200, successWith(`"iccid":"898824700000000000005"`), download},
		{"iccid not 89", 200, successWith(`"iccid":"7988247000000000004"`), download},
		{"iccid with letters", 200, successWith(`"iccid":"89882470000000000F3"`), download},
		{"iccid other than asked", 200, successWith(`"iccid":"` + iccid1 + `"`), downloadICCID},
		{"no matchingId", 200, successWith(`"smdpAddress":"smdp.example.com"`), confirm},
		{"too large", 200, successWith(`"iccid":"` + iccid1 + `","pad":"` + strings.Repeat("x", MaxResponseBytes) + `"`), download},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.answer(tc.status, tc.body)
			err := tc.call()
			if !errors.Is(err, ErrProtocol) {
				t.Fatalf("err %v, want a protocol error", err)
			}
			if Outcome(err) != "protocol_error" || IsDefinitive(err) {
				t.Errorf("Outcome %q, IsDefinitive %v", Outcome(err), IsDefinitive(err))
			}
			var ce *CallError
			if !errors.As(err, &ce) || ce.Function == "" || ce.FunctionCallIdentifier == "" {
				t.Errorf("error does not name its call: %#v", ce)
			}
		})
	}
}

// hang answers nothing until the client gives up.
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

func TestTimeout(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	cfg := s.config()
	cfg.Timeout = 200 * time.Millisecond
	c := newClient(t, cfg)
	s.setHandler(hang)

	start := time.Now()
	_, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ProfileType: "p"})
	if !errors.Is(err, ErrTimeout) || Outcome(err) != "timeout" || IsDefinitive(err) {
		t.Fatalf("err %v, outcome %s, want a timeout", err, Outcome(err))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the call took %s with a 200ms timeout", d)
	}
	// The request reached the SM-DP+: this is the unknown outcome.
	if len(s.requests()) != 1 {
		t.Errorf("%d requests reached the server", len(s.requests()))
	}

	// A caller's deadline shorter than the client's timeout counts too.
	cfg.Timeout = time.Minute
	c = newClient(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := c.CancelOrder(ctx, CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"}); !errors.Is(err, ErrTimeout) {
		t.Errorf("caller deadline: err %v, want a timeout", err)
	}

	// A server that sends headers and then stalls the body times out too.
	s.setHandler(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"header":`)
		w.(http.Flusher).Flush()
		hang(w, r)
	})
	cfg.Timeout = 200 * time.Millisecond
	c = newClient(t, cfg)
	if _, err := c.ConfirmOrder(t.Context(), ConfirmOrderRequest{ICCID: iccid1, ReleaseFlag: true}); !errors.Is(err, ErrTimeout) {
		t.Errorf("stalled body: err %v, want a timeout", err)
	}
}

func TestCanceled(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	c := newClient(t, s.config())
	s.setHandler(hang)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel)
	err := c.CancelOrder(ctx, CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"})
	if !errors.Is(err, ErrCanceled) || Outcome(err) != "canceled" || IsDefinitive(err) {
		t.Fatalf("err %v, want canceled", err)
	}
}

func TestUntrustedServerIsRefusedBeforeSending(t *testing.T) {
	p := newPKI(t)
	s := newSMDP(t, p)
	s.answer(200, success)
	// A CA file of another CA: the SM-DP+'s certificate is not signed by it.
	cfg := s.config()
	cfg.CAFile = otherCA(t).CACert
	c := newClient(t, cfg)

	err := c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"})
	if !errors.Is(err, ErrTransport) || Outcome(err) != "transport_error" {
		t.Fatalf("err %v, want a transport error", err)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("the untrusted server received %d requests", n)
	}
}

func TestServerRefusesClientWithoutValidCertificate(t *testing.T) {
	p := newPKI(t)
	s := newSMDP(t, p)
	s.answer(200, success)

	// A certificate the SM-DP+ does not trust: another CA issued it.
	intruder := otherCA(t)
	cfg := s.config()
	cfg.CertFile, cfg.KeyFile = intruder.ClientCert, intruder.ClientKey
	c := newClient(t, cfg)
	err := c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"})
	if !errors.Is(err, ErrTransport) {
		t.Errorf("untrusted client certificate: err %v, want a transport error", err)
	}

	// No certificate at all.
	c = newClient(t, s.config())
	c.transport.TLSClientConfig.Certificates = nil
	err = c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"})
	if !errors.Is(err, ErrTransport) {
		t.Errorf("no client certificate: err %v, want a transport error", err)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("the handler saw %d requests from clients it must refuse", n)
	}
}

func TestConnectionRefused(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	cfg := s.config()
	s.Close()
	c := newClient(t, cfg)
	_, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ProfileType: "p"})
	if !errors.Is(err, ErrTransport) || Outcome(err) != "transport_error" || IsDefinitive(err) {
		t.Fatalf("err %v, want a transport error", err)
	}
}

func TestInvalidRequestIsNotSent(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	c := newClient(t, s.config())
	s.answer(200, success)
	for name, call := range map[string]func() error{
		"cancel indicator": func() error {
			return c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Gone"})
		},
		"cancel no iccid": func() error {
			return c.CancelOrder(t.Context(), CancelOrderRequest{FinalProfileStatusIndicator: "Available"})
		},
		"confirm no iccid": func() error {
			_, err := c.ConfirmOrder(t.Context(), ConfirmOrderRequest{ReleaseFlag: true})
			return err
		},
		"download nothing": func() error {
			_, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{})
			return err
		},
		"invalid utf-8": func() error {
			_, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ProfileType: "p\xff"})
			return err
		},
	} {
		err := call()
		if !errors.Is(err, ErrInvalidRequest) || Outcome(err) != "invalid_request" || !IsDefinitive(err) {
			t.Errorf("%s: err %v, want an invalid request", name, err)
		}
		var ce *CallError
		if !errors.As(err, &ce) || ce.Function == "" {
			t.Errorf("%s: error does not name its function: %v", name, err)
		}
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("%d invalid requests were sent", n)
	}
}

func TestNewConfigErrors(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	good := Config{URL: "https://127.0.0.1:1", CertFile: p.certFile, KeyFile: p.keyFile, CAFile: p.caFile, RequesterID: "op"}
	if _, err := New(good); err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(p.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	// Another CA's client key does not match the client certificate.
	mismatched := otherCA(t).ClientKey
	otherKey, err := os.ReadFile(mismatched)
	if err != nil {
		t.Fatal(err)
	}
	notPEM := writeFile(t, dir, "not-pem.txt", []byte("hello"))
	missing := dir + "/missing.pem"

	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"http", func(c *Config) { c.URL = "http://127.0.0.1:1" }, "https"},
		{"no url", func(c *Config) { c.URL = "" }, "https"},
		{"no requester", func(c *Config) { c.RequesterID = "" }, "RequesterID"},
		{"negative timeout", func(c *Config) { c.Timeout = -1 }, "negative"},
		{"no cert file", func(c *Config) { c.CertFile = "" }, "CertFile"},
		{"no key file", func(c *Config) { c.KeyFile = "" }, "KeyFile"},
		{"no CA file", func(c *Config) { c.CAFile = "" }, "CAFile"},
		{"missing cert", func(c *Config) { c.CertFile = missing }, missing},
		{"missing key", func(c *Config) { c.KeyFile = missing }, missing},
		{"missing CA", func(c *Config) { c.CAFile = missing }, missing},
		{"key not PEM", func(c *Config) { c.KeyFile = notPEM }, notPEM},
		{"mismatched key", func(c *Config) { c.KeyFile = mismatched }, mismatched},
		{"CA not PEM", func(c *Config) { c.CAFile = notPEM }, notPEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			_, err := New(cfg)
			if err == nil {
				t.Fatal("New accepted it")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
			// Whatever goes wrong, the key never shows in an error.
			for _, line := range strings.Split(string(keyPEM)+string(otherKey), "\n") {
				if len(line) > 20 && strings.Contains(err.Error(), line) {
					t.Errorf("error %q contains the key", err)
				}
			}
		})
	}
}

func TestTelemetry(t *testing.T) {
	s := newSMDP(t, newPKI(t))
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	c := newClient(t, s.config(), WithTracerProvider(tp), WithMeterProvider(mp))

	s.answer(200, successWith(`"iccid":"`+iccid1+`"`))
	if _, err := c.DownloadOrder(t.Context(), DownloadOrderRequest{ProfileType: "p"}); err != nil {
		t.Fatal(err)
	}
	s.answer(200, failed("8.1.1", "3.8", "no"))
	_ = c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"})
	s.answer(200, failed("8.1.1", "3.8", "no"))
	_ = c.CancelOrder(t.Context(), CancelOrderRequest{ICCID: iccid1, FinalProfileStatusIndicator: "Available"})

	ended := spans.Ended()
	if len(ended) != 3 {
		t.Fatalf("%d spans, want 3", len(ended))
	}
	reqs := s.requests()
	for i, sp := range ended {
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range sp.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		if sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %d kind %v", i, sp.SpanKind())
		}
		callID := reqs[i].Body["header"].(map[string]any)["functionCallIdentifier"]
		if attrs["es2plus.function_call_identifier"].AsString() != callID {
			t.Errorf("span %d call id %v, request %v", i, attrs["es2plus.function_call_identifier"], callID)
		}
		if i == 0 {
			if sp.Name() != "es2plus downloadOrder" || attrs["es2plus.function"].AsString() != "downloadOrder" || attrs["es2plus.outcome"].AsString() != "success" {
				t.Errorf("span %s %v", sp.Name(), attrs)
			}
		} else {
			if sp.Name() != "es2plus cancelOrder" || attrs["es2plus.outcome"].AsString() != "failed:8.1.1/3.8" ||
				attrs["es2plus.subject_code"].AsString() != "8.1.1" || attrs["es2plus.reason_code"].AsString() != "3.8" {
				t.Errorf("span %s %v", sp.Name(), attrs)
			}
			if sp.Status().Code.String() != "Error" {
				t.Errorf("span %s status %v", sp.Name(), sp.Status())
			}
		}
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "es2plus.client.call.duration" {
				continue
			}
			if m.Unit != "s" {
				t.Errorf("unit %q", m.Unit)
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				fn, _ := dp.Attributes.Value("function")
				out, _ := dp.Attributes.Value("outcome")
				counts[fn.AsString()+" "+out.AsString()] += dp.Count
			}
		}
	}
	want := map[string]uint64{"downloadOrder success": 1, "cancelOrder failed:8.1.1/3.8": 2}
	if len(counts) != len(want) || counts["downloadOrder success"] != 1 || counts["cancelOrder failed:8.1.1/3.8"] != 2 {
		t.Errorf("histogram counts %v, want %v", counts, want)
	}
}

func TestOutcomeBoundsServerCodes(t *testing.T) {
	err := &FunctionError{SubjectCode: strings.Repeat("9", 100), ReasonCode: "a b"}
	if got := Outcome(err); got != "failed:other/other" {
		t.Errorf("Outcome %q", got)
	}
	if got := Outcome(errors.New("x")); got != "error" {
		t.Errorf("Outcome %q", got)
	}
}

func TestNormalizeICCID(t *testing.T) {
	for s, want := range map[string]string{
		iccid1:                  iccid1,
		iccid2:                  iccid2,
		iccid1 + "F":            iccid1, // pySim pads 19 digits to 20 with F
		iccid1 + "f":            iccid1,
		"898824700000000000":    "",                     // 18 digits, Luhn off
		"898824700000000006":    "898824700000000006",   // 18 digits
		"89882470000000000014":  "89882470000000000014", // 20 digits
		"8988247000000000004":   "",
		"89882470000000000030":  "89882470000000000030", // 20 digits
		"89882470000000000031":  "",
		"9988247000000000003":   "",
		"8988247000000000003F":  "", // Luhn off once unpadded
		"898824700000000000F":   "", // F pads 19 digits only
		"89882470000000000001F": "",
		"F988247000000000003":   "",
		"":                      "",
		"89882470000000000 3":   "",
	} {
		got, ok := NormalizeICCID(s)
		if got != want || ok != (want != "") {
			t.Errorf("NormalizeICCID(%q) = %q, %v; want %q", s, got, ok, want)
		}
	}
}
