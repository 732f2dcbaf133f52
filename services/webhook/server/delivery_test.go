package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/proto/partnerapi"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"

	"github.com/esimplatform/esim/services/webhook/server"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

const (
	sandbox = accountsv1.Environment_ENVIRONMENT_SANDBOX
	live    = accountsv1.Environment_ENVIRONMENT_LIVE

	pending   = webhookv1.DeliveryStatus_DELIVERY_STATUS_PENDING
	delivered = webhookv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED
	failed    = webhookv1.DeliveryStatus_DELIVERY_STATUS_FAILED
)

// service is the webhook service as the platform runs it, on a Kafka
// broker and a database of its own, and an operator's client.
type service struct {
	cfg      server.Config
	url      string
	operator webhookv1.Webhook
	logs     *telemetrytest.LogBuffer
	spans    *tracetest.InMemoryExporter
}

// start starts the service with webhooktest's configuration changed by
// tune, on a Kafka broker of its own.
func start(t *testing.T, tune ...func(*server.Config)) *service {
	t.Helper()
	cfg := webhooktest.Config(t, kafkatest.New(t))
	for _, f := range tune {
		f(&cfg)
	}
	return startWith(t, cfg)
}

// startWith starts the service with cfg, logging at debug level and
// tracing into an in-memory exporter.
func startWith(t *testing.T, cfg server.Config) *service {
	t.Helper()
	s := &service{cfg: cfg, logs: &telemetrytest.LogBuffer{}, spans: tracetest.NewInMemoryExporter()}
	tel, err := telemetry.Setup(context.Background(), "webhook", telemetry.Config{LogLevel: "debug"}, s.logs, telemetry.WithSpanExporter(s.spans))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	_, s.url = webhooktest.StartServer(t, cfg, tel)
	s.operator = webhooktest.Client(s.url, internalauth.Operator)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the service's log:\n%s", s.logs)
		}
	})
	return s
}

// endpoint gives a fresh account an endpoint in env at url and returns
// its scope and signing secret.
func (s *service) endpoint(t *testing.T, env accountsv1.Environment, url string) (*webhookv1.Scope, string) {
	t.Helper()
	scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: env}
	e, err := s.operator.SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{Scope: scope, Url: url})
	if err != nil {
		t.Fatalf("SetEndpoint %s: %v", url, err)
	}
	return scope, e.GetSecret()
}

func (s *service) publish(t *testing.T, events ...*orderingv1.OrderEvent) {
	t.Helper()
	webhooktest.Publish(context.Background(), t, s.cfg, events...)
}

func (s *service) wait(t *testing.T, id string, status webhookv1.DeliveryStatus, within time.Duration) *webhookv1.Event {
	t.Helper()
	return webhooktest.WaitForStatus(t, s.operator, id, status, within)
}

func event(scope *webhookv1.Scope, eventType string) *orderingv1.OrderEvent {
	return webhooktest.OrderEvent(scope.GetAccountId(), scope.GetEnvironment(), eventType)
}

// body is a delivery's body as a receiver reads it.
type body struct {
	ID          string          `json:"id"`
	Event       string          `json:"event"`
	CreatedAt   time.Time       `json:"created_at"`
	Environment string          `json:"environment"`
	Data        json.RawMessage `json:"data"`
}

func decode(t *testing.T, d webhooktest.Delivery) body {
	t.Helper()
	var b body
	if err := json.Unmarshal(d.Body, &b); err != nil {
		t.Fatalf("delivery body %s: %v", d.Body, err)
	}
	return b
}

// A sandbox event goes to the sandbox URL, a live one to the live URL,
// https with a certificate ENDPOINT_CA_FILE trusts; completed and failed
// orders alike, each exactly once, signed as the public library verifies
// with the scope's secret and no other, carrying the partner API's order.
func TestDeliversEachEventToItsScopesURL(t *testing.T) {
	t.Parallel()
	sandboxHooks, liveHooks := webhooktest.NewReceiver(t), webhooktest.NewTLSReceiver(t)
	s := start(t, func(c *server.Config) { c.EndpointCAFile = liveHooks.CAFile(t) })
	account := uuid.NewString()
	set := func(env accountsv1.Environment, url string) (*webhookv1.Scope, string) {
		scope := &webhookv1.Scope{AccountId: account, Environment: env}
		e, err := s.operator.SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{Scope: scope, Url: url})
		if err != nil {
			t.Fatal(err)
		}
		return scope, e.GetSecret()
	}
	sandboxScope, sandboxSecret := set(sandbox, sandboxHooks.URL)
	liveScope, liveSecret := set(live, liveHooks.URL)
	if sandboxSecret == liveSecret {
		t.Fatal("sandbox and live share a secret")
	}
	for _, r := range []*webhooktest.Receiver{sandboxHooks, liveHooks} {
		r.Trust(sandboxSecret, liveSecret)
	}
	events := map[string]*orderingv1.OrderEvent{}
	published := []*orderingv1.OrderEvent{event(sandboxScope, "order.completed"), event(liveScope, "order.completed"), event(liveScope, "order.failed")}
	for _, e := range published {
		events[e.GetId()] = e
	}
	s.publish(t, published...)

	for _, id := range []string{published[0].GetId(), published[1].GetId(), published[2].GetId()} {
		e := s.wait(t, id, delivered, 30*time.Second)
		if len(e.GetAttempts()) != 1 || e.GetAttempts()[0].GetStatusCode() != 200 || e.GetAttempts()[0].GetError() != "" {
			t.Errorf("event %s: attempts %v, want one answered 200", id, e.GetAttempts())
		}
	}
	check := func(r *webhooktest.Receiver, secret, otherSecret string, env string, want int) {
		t.Helper()
		got := r.Deliveries()
		if len(got) != want {
			t.Fatalf("%s receiver got %d deliveries, want %d", env, len(got), want)
		}
		for _, d := range got {
			b := decode(t, d)
			src := events[b.ID]
			if src == nil || b.ID != d.ID() {
				t.Fatalf("delivery %s with webhook-id %s: not the id of an event published", b.ID, d.ID())
			}
			if !d.VerifiedBy(secret) || d.VerifiedBy(otherSecret) {
				t.Errorf("%s delivery %s: verified by its scope's secret %v (%v), by the other scope's %v; want true, false", env, b.ID, d.VerifiedBy(secret), d.Checks[secret], d.VerifiedBy(otherSecret))
			}
			order, err := partnerapi.OrderFromProto(src.GetOrder())
			if err != nil {
				t.Fatal(err)
			}
			wantData, err := partnerapi.Marshal(order)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b.Data, wantData) {
				t.Errorf("data = %s\nwant   %s", b.Data, wantData)
			}
			if b.Event != src.GetType() || b.Environment != env || !b.CreatedAt.Equal(src.GetCreatedAt().AsTime()) || b.CreatedAt.Location() != time.UTC {
				t.Errorf("envelope %s %s %s, want %s %s %s in UTC", b.Event, b.Environment, b.CreatedAt, src.GetType(), env, src.GetCreatedAt().AsTime())
			}
		}
	}
	check(sandboxHooks, sandboxSecret, liveSecret, "sandbox", 1)
	check(liveHooks, liveSecret, sandboxSecret, "live", 2)
}

// A message read twice (published twice, or read again by a consumer
// whose offsets were never committed: here a second replica in a group
// of its own) is one event and one delivery.
func TestAMessageReadTwiceIsOneDelivery(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t)
	s := start(t)
	scope, secret := s.endpoint(t, sandbox, hooks.URL)
	hooks.Trust(secret)
	e := event(scope, "order.completed")
	s.publish(t, e, e)
	s.publish(t, e)
	// After them on their partition (one order, one key), so consumed
	// after them.
	last := event(scope, "order.completed")
	last.Order, last.OrderId = e.GetOrder(), e.GetOrderId()
	s.publish(t, last)
	s.wait(t, last.GetId(), delivered, 30*time.Second)
	s.wait(t, e.GetId(), delivered, 30*time.Second)

	again := s.cfg
	again.Group += ".again"
	second := startWith(t, again)
	// The four messages, each read and found stored already.
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(second.logs.String(), `"msg":"event consumed"`) < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("the second replica did not read the topic:\n%s", second.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := strings.Count(second.logs.String(), `"new":true`); n != 0 {
		t.Errorf("the second replica stored %d events anew", n)
	}

	page, err := s.operator.ListEvents(context.Background(), &webhookv1.ListEventsRequest{Scope: scope})
	if err != nil || page.GetTotal() != 2 {
		t.Fatalf("ListEvents = %d events, %v; want the 2 published", page.GetTotal(), err)
	}
	got := hooks.Deliveries()
	if len(got) != 2 || got[0].ID() == got[1].ID() {
		t.Errorf("%d deliveries, want one of each event", len(got))
	}
	for _, ev := range page.GetEvents() {
		if len(ev.GetAttempts()) != 1 {
			t.Errorf("event %s: %d attempts, want 1", ev.GetId(), len(ev.GetAttempts()))
		}
	}
}

// A receiver that fails twice and then answers: three attempts, about 1 s
// then 2 s apart, with one webhook-id, each recorded oldest first.
func TestRetriesAfterOneThenTwoSeconds(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t, webhooktest.Answer{Status: 500, Body: "down"}, webhooktest.Answer{Status: 503}, webhooktest.Answer{Status: 200, Body: "ok"})
	s := start(t)
	scope, secret := s.endpoint(t, sandbox, hooks.URL)
	hooks.Trust(secret)
	e := event(scope, "order.completed")
	s.publish(t, e)
	got := s.wait(t, e.GetId(), delivered, 30*time.Second)

	a := got.GetAttempts()
	if len(a) != 3 {
		t.Fatalf("%d attempts, want 3: %v", len(a), a)
	}
	for i, want := range []struct {
		status int32
		err    string
		body   string
	}{{500, "status 500", "down"}, {503, "status 503", ""}, {200, "", "ok"}} {
		if a[i].GetNumber() != int32(i+1) || a[i].GetStatusCode() != want.status || a[i].GetError() != want.err || a[i].GetResponseBody() != want.body || a[i].GetRequestBody() != got.GetPayload() {
			t.Errorf("attempt %d = %v; want number %d, %d %q %q", i+1, a[i], i+1, want.status, want.err, want.body)
		}
	}
	gap1 := a[1].GetStartedAt().AsTime().Sub(a[0].GetStartedAt().AsTime())
	gap2 := a[2].GetStartedAt().AsTime().Sub(a[1].GetStartedAt().AsTime())
	if gap1 < 800*time.Millisecond || gap1 > 2*time.Second || gap2 < 1800*time.Millisecond || gap2 > 3500*time.Millisecond {
		t.Errorf("attempts %s then %s apart; want about 1 s then 2 s", gap1, gap2)
	}
	d := hooks.Deliveries()
	if len(d) != 3 {
		t.Fatalf("%d deliveries, want 3", len(d))
	}
	for _, x := range d {
		if x.ID() != e.GetId() || !x.VerifiedBy(secret) || !bytes.Equal(x.Body, d[0].Body) {
			t.Errorf("delivery %s verified %v: want the event's id, signed, the same body every time", x.ID(), x.VerifiedBy(secret))
		}
	}
}

// Three failures of any kind fail the event, and it is never sent again:
// a receiver that always answers 500, a port that refuses connections,
// and a receiver that holds the request past the real 10 s timeout.
func TestThreeFailuresFailTheEventForGood(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(nil)
	closedURL, closedAddr := closed.URL+"/hooks", closed.Listener.Addr().String()
	closed.Close()
	for _, tc := range []struct {
		name    string
		answer  *webhooktest.Answer
		url     string
		err     string
		timeout time.Duration
	}{
		{name: "always 500", answer: &webhooktest.Answer{Status: 500}, err: "status 500"},
		{name: "connection refused", url: closedURL, err: "connection refused"},
		{name: "past the timeout", answer: &webhooktest.Answer{Hang: true}, err: "timed out after 10s", timeout: 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, func(c *server.Config) { c.SandboxPrivateEndpoints = []string{closedAddr} })
			url := tc.url
			var hooks *webhooktest.Receiver
			if tc.answer != nil {
				hooks = webhooktest.NewReceiver(t, *tc.answer)
				url = hooks.URL
			}
			scope, _ := s.endpoint(t, sandbox, url)
			e := event(scope, "order.completed")
			s.publish(t, e)
			got := s.wait(t, e.GetId(), failed, 3*tc.timeout+30*time.Second)
			time.Sleep(3 * time.Second) // nothing more may happen: no condition to wait for
			again, err := s.operator.GetEvent(context.Background(), &webhookv1.GetEventRequest{Id: e.GetId()})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range []*webhookv1.Event{got, again} {
				if ev.GetStatus() != failed || len(ev.GetAttempts()) != 3 {
					t.Fatalf("event %s with %d attempts, want failed after 3", ev.GetStatus(), len(ev.GetAttempts()))
				}
			}
			for _, a := range again.GetAttempts() {
				if a.GetError() != tc.err {
					t.Errorf("attempt %d: error %q, want %q", a.GetNumber(), a.GetError(), tc.err)
				}
				if tc.timeout > 0 && (a.GetDurationMs() < tc.timeout.Milliseconds() || a.GetDurationMs() > tc.timeout.Milliseconds()+2000) {
					t.Errorf("attempt %d took %d ms, want about %s", a.GetNumber(), a.GetDurationMs(), tc.timeout)
				}
			}
			if hooks != nil {
				if n := len(hooks.Deliveries()); n != 3 {
					t.Errorf("the receiver got %d deliveries, want 3", n)
				}
			}
		})
	}
}

// A receiver that handles the request but whose answer never arrives
// whole (cut before a word, or halfway through its body) gets the same
// event again.
func TestAnAnswerCutOffIsRetried(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t, webhooktest.Answer{Cut: true}, webhooktest.Answer{Truncate: true, Body: "received"}, webhooktest.Answer{})
	s := start(t)
	scope, secret := s.endpoint(t, sandbox, hooks.URL)
	hooks.Trust(secret)
	e := event(scope, "order.completed")
	s.publish(t, e)
	got := s.wait(t, e.GetId(), delivered, 30*time.Second)
	a := got.GetAttempts()
	if len(a) != 3 {
		t.Fatalf("attempts %v, want 3", a)
	}
	if a[0].GetStatusCode() != 0 || a[0].GetError() != "connection closed before a whole answer" {
		t.Errorf("cut attempt: %v", a[0])
	}
	if a[1].GetStatusCode() != 200 || !strings.HasPrefix(a[1].GetError(), "the answer was cut off") {
		t.Errorf("truncated attempt: %v", a[1])
	}
	for _, d := range hooks.Deliveries() {
		if d.ID() != e.GetId() || !d.VerifiedBy(secret) {
			t.Errorf("delivery %s verified %v", d.ID(), d.VerifiedBy(secret))
		}
	}
}

// An account whose endpoint hangs, with 100 events queued, holds at most
// PER_ENDPOINT_CONCURRENCY workers: every other account's events are
// delivered while it still holds its first requests.
func TestASlowEndpointDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	slow := webhooktest.NewReceiver(t, webhooktest.Answer{Hang: true})
	s := start(t)
	slowScope, _ := s.endpoint(t, sandbox, slow.URL)
	var queued []*orderingv1.OrderEvent
	for range 100 {
		queued = append(queued, event(slowScope, "order.completed"))
	}
	s.publish(t, queued...)

	var others []*webhooktest.Receiver
	var theirs []*orderingv1.OrderEvent
	for range 10 {
		r := webhooktest.NewReceiver(t)
		scope, _ := s.endpoint(t, sandbox, r.URL)
		others = append(others, r)
		theirs = append(theirs, event(scope, "order.completed"), event(scope, "order.failed"))
	}
	// The slow endpoint is busy before the others' events are published.
	if !slow.WaitFor(30*time.Second, func(_ []webhooktest.Delivery, hanging int) bool { return hanging == 4 }) {
		t.Fatalf("the slow endpoint holds %d requests, want 4", slow.Hanging())
	}
	s.publish(t, theirs...)
	for _, r := range others {
		r.Wait(t, 2, 30*time.Second)
	}
	// Every other account is served, and the slow endpoint has answered
	// nothing yet: its first requests are still those it holds.
	if got, hanging := len(slow.Deliveries()), slow.Hanging(); got != 4 || hanging != 4 {
		t.Fatalf("the slow endpoint got %d requests, holds %d; want the first 4 still held", got, hanging)
	}
	slow.Release()
	for _, e := range queued {
		s.wait(t, e.GetId(), delivered, 60*time.Second)
	}
	if peak := slow.MaxHanging(); peak > 4 {
		t.Errorf("the slow endpoint held %d requests at once, want at most 4", peak)
	}
}

// The database holds no secret in the clear: not the whsec_ form, not
// its base64, not its key bytes; neither does the log. A rotation signs
// with both secrets, each verified by the public library.
func TestSecretsAreSealedAndRotate(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewTLSReceiver(t)
	s := start(t, func(c *server.Config) { c.EndpointCAFile = hooks.CAFile(t) })
	scope, first := s.endpoint(t, live, hooks.URL)
	_, otherSecret := s.endpoint(t, sandbox, hooks.URL)
	rotated, err := s.operator.RotateSecret(context.Background(), &webhookv1.RotateSecretRequest{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	second := rotated.GetSecret()
	if second == first || rotated.GetPreviousSecretExpiresAt() == nil {
		t.Fatalf("RotateSecret = %v; want a new secret, the old one expiring", rotated)
	}
	if d := rotated.GetPreviousSecretExpiresAt().AsTime().Sub(rotated.GetSecretCreatedAt().AsTime()); d != 24*time.Hour {
		t.Errorf("the old secret expires %s after the new one's creation, want 24h", d)
	}
	if got, err := s.operator.GetEndpoint(context.Background(), &webhookv1.GetEndpointRequest{Scope: scope}); err != nil || got.GetSecret() != second {
		t.Errorf("GetEndpoint = %v, %v; want the new secret", got, err)
	}
	hooks.Trust(first, second, otherSecret)
	ping, err := s.operator.SendTestEvent(context.Background(), &webhookv1.SendTestEventRequest{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	s.wait(t, ping.GetId(), delivered, 30*time.Second)
	d := hooks.Deliveries()[0]
	if !d.VerifiedBy(first) || !d.VerifiedBy(second) || d.VerifiedBy(otherSecret) || len(strings.Fields(d.Header.Get("webhook-signature"))) != 2 {
		t.Errorf("during the rotation: verified by the old secret %v, the new %v, another scope's %v; want true, true, false (%s)",
			d.VerifiedBy(first), d.VerifiedBy(second), d.VerifiedBy(otherSecret), d.Header.Get("webhook-signature"))
	}

	dump := dumpDatabase(t, s.cfg.DatabaseURL.Reveal())
	for _, secret := range []string{first, second, otherSecret} {
		b64 := strings.TrimPrefix(secret, "whsec_")
		key := mustBase64(t, b64)
		for what, needle := range map[string][]byte{"whsec_": []byte("whsec_"), "the base64": []byte(b64), "the key bytes": key, "the key in hex": []byte(hexOf(key))} {
			if bytes.Contains(dump, needle) {
				t.Errorf("the database holds %s of a secret", what)
			}
			if bytes.Contains([]byte(s.logs.String()), needle) {
				t.Errorf("the log holds %s of a secret", what)
			}
		}
	}
	if !bytes.Contains(dump, []byte(scope.GetAccountId())) {
		t.Fatal("the dump is not of the service's database")
	}
}

// dumpDatabase is every row of every table of the database, as text
// (bytea in hex), and as the raw bytes of every bytea column.
func dumpDatabase(t *testing.T, dbURL string) []byte {
	t.Helper()
	ctx := context.Background()
	conn, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out bytes.Buffer
	for _, table := range []string{"endpoints", "events", "river_job", "attempts"} {
		var text string
		if err := conn.QueryRow(ctx, "SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM "+table+" t").Scan(&text); err != nil {
			t.Fatal(err)
		}
		out.WriteString(text)
	}
	rows, err := conn.Query(ctx, "SELECT secret, coalesce(previous_secret, '') FROM endpoints")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var a, b []byte
		if err := rows.Scan(&a, &b); err != nil {
			t.Fatal(err)
		}
		out.Write(a)
		out.Write(b)
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out.Bytes()
}

// A test event goes the way of every event: queued, signed, recorded.
func TestSendTestEventDeliversAPing(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t)
	s := start(t)
	scope, secret := s.endpoint(t, sandbox, hooks.URL)
	hooks.Trust(secret)
	ping, err := s.operator.SendTestEvent(context.Background(), &webhookv1.SendTestEventRequest{Scope: scope})
	if err != nil || ping.GetType() != "ping" || ping.GetOrderId() != "" || ping.GetUrl() != hooks.URL {
		t.Fatalf("SendTestEvent = %v, %v", ping, err)
	}
	got := s.wait(t, ping.GetId(), delivered, 10*time.Second)
	if len(got.GetAttempts()) != 1 || got.GetAttempts()[0].GetStatusCode() != 200 {
		t.Errorf("attempts %v, want one answered 200", got.GetAttempts())
	}
	d := hooks.Wait(t, 1, 10*time.Second)[0]
	b := decode(t, d)
	if b.ID != ping.GetId() || b.Event != "ping" || b.Environment != "sandbox" || !d.VerifiedBy(secret) || !strings.Contains(string(b.Data), "test event") {
		t.Errorf("ping delivery %s, verified %v", d.Body, d.VerifiedBy(secret))
	}
}

// The trace of an order goes on through Kafka: the consumer's span
// continues the producer's, and each attempt's span is the consumer's
// child, in the same trace.
func TestDeliveriesContinueTheOrdersTrace(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t, webhooktest.Answer{Status: 500}, webhooktest.Answer{})
	s := start(t)
	scope, _ := s.endpoint(t, sandbox, hooks.URL)
	producer := sdktrace.NewTracerProvider()
	ctx, span := producer.Tracer("ordering").Start(context.Background(), "ordering publish")
	e := event(scope, "order.completed")
	webhooktest.Publish(ctx, t, s.cfg, e)
	span.End()
	s.wait(t, e.GetId(), delivered, 30*time.Second)

	want := span.SpanContext()
	var consumer sdktrace.ReadOnlySpan
	var attempts []sdktrace.ReadOnlySpan
	for _, sp := range s.spans.GetSpans().Snapshots() {
		if sp.SpanContext().TraceID() != want.TraceID() {
			continue
		}
		switch {
		case sp.SpanKind() == trace.SpanKindConsumer:
			consumer = sp
		case sp.Name() == "webhook deliver":
			attempts = append(attempts, sp)
		}
	}
	if consumer == nil || consumer.Parent().SpanID() != want.SpanID() {
		t.Fatalf("no consumer span continuing the producer's span %s", want.SpanID())
	}
	if len(attempts) != 2 {
		t.Fatalf("%d attempt spans in the order's trace, want 2", len(attempts))
	}
	for _, a := range attempts {
		if a.Parent().SpanID() != consumer.SpanContext().SpanID() || a.SpanKind() != trace.SpanKindClient {
			t.Errorf("attempt span %s: parent %s, want the consumer span %s", a.Name(), a.Parent().SpanID(), consumer.SpanContext().SpanID())
		}
	}
}

// A message that is no order event is logged and skipped, and its
// partition goes on: the event after it, on the same partition, arrives.
func TestAPoisonMessageDoesNotBlockItsPartition(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t)
	s := start(t)
	scope, _ := s.endpoint(t, sandbox, hooks.URL)
	e := event(scope, "order.completed")
	bad := event(scope, "order.shipped")
	bad.Order, bad.OrderId = e.GetOrder(), e.GetOrderId()
	webhooktest.PublishRaw(t, s.cfg, e.GetOrder().GetId(), []byte("\xff\xffnot protobuf at all"))
	s.publish(t, bad, e)
	s.wait(t, e.GetId(), delivered, 30*time.Second)
	if n := strings.Count(s.logs.String(), "skipping a Kafka message that is no order event"); n != 2 {
		t.Errorf("%d poison messages logged, want 2:\n%s", n, s.logs)
	}
	if _, err := s.operator.GetEvent(context.Background(), &webhookv1.GetEventRequest{Id: bad.GetId()}); err == nil {
		t.Error("the event of an unknown type was stored")
	}
}

// An event whose order, eSIM or top-up has a status, or which has an
// environment, the partner API does not define (a newer ordering's) is
// neither skipped nor sent with another value: it is held, uncommitted,
// with an error logged, and so is what follows it on its partition. A
// consumer that reads the group's offsets next reads it first: it was
// not lost.
func TestAnEventItCannotRenderIsHeldNotLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// newer is an event of first's order with a value of a newer
		// ordering's, which the log names.
		newer func(scope *webhookv1.Scope, first *orderingv1.OrderEvent) *orderingv1.OrderEvent
		log   string
	}{
		{"order status", func(scope *webhookv1.Scope, first *orderingv1.OrderEvent) *orderingv1.OrderEvent {
			e := event(scope, "order.completed")
			e.Order, e.OrderId = proto.Clone(first.GetOrder()).(*orderingv1.Order), first.GetOrderId()
			e.Order.Status = 7
			return e
		}, "has status 7"},
		{"eSIM status", func(scope *webhookv1.Scope, first *orderingv1.OrderEvent) *orderingv1.OrderEvent {
			e := ofOrder(esimEvent(scope, "esim.activated", 0), first)
			e.Esim.Status = "SUSPENDED"
			return e
		}, `has status \"SUSPENDED\"`},
		{"top-up status", func(scope *webhookv1.Scope, first *orderingv1.OrderEvent) *orderingv1.OrderEvent {
			e := ofOrder(topUpEvent(scope, "topup.completed"), first)
			e.Topup.Status = 9
			return e
		}, "has status 9"},
		{"environment", func(scope *webhookv1.Scope, first *orderingv1.OrderEvent) *orderingv1.OrderEvent {
			e := ofOrder(esimEvent(scope, "esim.expired", 0), first)
			e.Environment = 5
			return e
		}, "has environment 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hooks := webhooktest.NewReceiver(t)
			s := &service{cfg: webhooktest.Config(t, kafkatest.New(t)), logs: &telemetrytest.LogBuffer{}}
			tel, err := telemetry.Setup(context.Background(), "webhook", telemetry.Config{LogLevel: "info"}, s.logs)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tel.Shutdown(context.Background()) })
			srv, url := webhooktest.StartServer(t, s.cfg, tel)
			s.operator = webhooktest.Client(url, internalauth.Operator)
			scope, secret := s.endpoint(t, sandbox, hooks.URL)
			hooks.Trust(secret)

			// One order's events, so one partition: the first goes through
			// and is committed, the newer value is held, the last waits
			// behind it.
			first := event(scope, "order.completed")
			newer := tc.newer(scope, first)
			last := event(scope, "order.completed")
			last.Order, last.OrderId = first.GetOrder(), first.GetOrderId()
			s.publish(t, first)
			s.wait(t, first.GetId(), delivered, 30*time.Second)
			s.publish(t, newer, last)
			const held = "holding an event this service cannot render"
			if !waitForLog(s, held, 30*time.Second) || !waitForLog(s, tc.log, time.Second) {
				t.Fatalf("no hold logged:\n%s", s.logs)
			}
			time.Sleep(time.Second)
			for _, e := range []*orderingv1.OrderEvent{newer, last} {
				if _, err := s.operator.GetEvent(context.Background(), &webhookv1.GetEventRequest{Id: e.GetId()}); err == nil {
					t.Errorf("event %s was stored past the held one", e.GetId())
				}
			}
			if n := len(hooks.Deliveries()); n != 1 {
				t.Errorf("%d deliveries; want the first event's alone", n)
			}
			srv.Close()

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			r := kafka.NewReader(s.cfg.Kafka, s.cfg.Topic, s.cfg.Group)
			defer r.Close()
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got orderingv1.OrderEvent
			if err := proto.Unmarshal(m.Value, &got); err != nil || got.GetId() != newer.GetId() {
				t.Errorf("the group reads %s (%v) next; want the held event %s", got.GetId(), err, newer.GetId())
			}
		})
	}
}

// Deliveries are counted and timed by outcome.
func TestAttemptMetrics(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t, webhooktest.Answer{Status: 500}, webhooktest.Answer{})
	cfg := webhooktest.Config(t, kafkatest.New(t))
	tel, err := telemetry.Setup(context.Background(), "webhook", telemetry.Config{LogLevel: "warn"}, &telemetrytest.LogBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	_, url := webhooktest.StartServer(t, cfg, tel)
	c := webhooktest.Client(url, internalauth.Operator)
	scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: sandbox}
	if _, err := c.SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{Scope: scope, Url: hooks.URL}); err != nil {
		t.Fatal(err)
	}
	ping, err := c.SendTestEvent(context.Background(), &webhookv1.SendTestEventRequest{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	webhooktest.WaitForStatus(t, c, ping.GetId(), delivered, 10*time.Second)
	metrics := telemetrytest.Scrape(tel.MetricsHandler)
	for outcome, want := range map[string]string{"delivered": "1", "failed": "1"} {
		if got := telemetrytest.Sample(metrics, "webhook_attempts_total", map[string]string{"outcome": outcome}); got != want {
			t.Errorf("webhook_attempts_total{outcome=%q} = %q, want %s", outcome, got, want)
		}
	}
	if got := telemetrytest.Sample(metrics, "webhook_attempt_duration_seconds_count", map[string]string{"outcome": "delivered"}); got != "1" {
		t.Errorf("webhook_attempt_duration_seconds_count{outcome=delivered} = %q, want 1", got)
	}
	// Nothing is left due, and an environment with nothing due says 0.
	for _, env := range []string{"sandbox", "live"} {
		if got := telemetrytest.Sample(metrics, "webhook_deliveries_due", map[string]string{"environment": env}); got != "0" {
			t.Errorf("webhook_deliveries_due{environment=%s} = %q, want 0", env, got)
		}
	}
}

func mustBase64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

// A clean stop lets an attempt in flight finish for a few seconds, then
// cuts it short and records it as interrupted, at once: the next replica
// to start retries it without waiting for its lease.
func TestCloseRecordsAnAttemptInFlightAsInterrupted(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t, webhooktest.Answer{Hang: true}, webhooktest.Answer{})
	cfg := webhooktest.Config(t, kafkatest.New(t))
	tel, err := telemetry.Setup(context.Background(), "webhook", telemetry.Config{LogLevel: "warn"}, &telemetrytest.LogBuffer{})
	if err != nil {
		t.Fatal(err)
	}
	srv, url := webhooktest.StartServer(t, cfg, tel)
	operator := webhooktest.Client(url, internalauth.Operator)
	scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: sandbox}
	if _, err := operator.SetEndpoint(context.Background(), &webhookv1.SetEndpointRequest{Scope: scope, Url: hooks.URL}); err != nil {
		t.Fatal(err)
	}
	ping, err := operator.SendTestEvent(context.Background(), &webhookv1.SendTestEventRequest{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	if !hooks.WaitFor(10*time.Second, func(_ []webhooktest.Delivery, hanging int) bool { return hanging == 1 }) {
		t.Fatal("the attempt never reached the receiver")
	}
	srv.Close()
	if hooks.Hanging() != 0 {
		t.Error("Close returned with the attempt still in flight")
	}

	next := startWith(t, cfg)
	got := next.wait(t, ping.GetId(), delivered, 10*time.Second)
	a := got.GetAttempts()
	if len(a) != 2 || a[0].GetError() != "interrupted: the webhook service stopped during this attempt" || a[1].GetStatusCode() != 200 {
		t.Errorf("attempts %v; want the interrupted one, then a delivery", a)
	}
}
