// Package webhooktest starts the webhook service for tests the way the
// platform runs it: over real HTTP, on a database of its own, consuming a
// real Kafka protocol broker (libs/kafka/kafkatest), with the platform's
// internal credentials; and gives them a Receiver, an endpoint that
// verifies every delivery with the public Standard Webhooks library and
// answers as told.
package webhooktest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/libs/telemetry"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook/server"
)

// Topic is ordering's events' topic, as the service reads it by default.
const Topic = "esim.orders.v1"

// Config is the webhook service's configuration for a test: a database of
// its own, c's Kafka with a topic and group of the test's own, a fresh
// secrets key, the Receivers of this process reachable in both
// environments (they listen on loopback), the production's workers, and
// a short poll. The attempt timeout is the real 10 s.
func Config(t testing.TB, c kafkatest.Cluster) server.Config {
	t.Helper()
	return server.Config{
		DatabaseURL:            config.NewSecretURL(pgtest.WithMaxConns(t, pgtest.NewDatabase(t), 5)),
		Callers:                internalauthtest.Callers(),
		Kafka:                  c.Config,
		Topic:                  c.Topic(Topic),
		Group:                  "webhook" + c.Suffix,
		SecretsKey:             config.NewSecret(NewSecretsKey()),
		Workers:                256,
		PerEndpointConcurrency: 4,
		AttemptTimeout:         10 * time.Second,
		PollInterval:           50 * time.Millisecond,
		TestEndpoints:          Receivers,
	}
}

// NewSecretsKey is a fresh SECRETS_KEY value.
func NewSecretsKey() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return base64.StdEncoding.EncodeToString(key)
}

// Env is cfg as the webhook process reads it, for tests that run the
// binary; HTTP_ADDR is the caller's to add. No variable opens Receivers:
// such a test lists its receivers' addresses in
// cfg.SandboxPrivateEndpoints.
func Env(cfg server.Config) map[string]string {
	return map[string]string{
		"DATABASE_URL":              cfg.DatabaseURL.Reveal(),
		"CALLERS":                   internalauthtest.CallersEnv(),
		"KAFKA_BROKERS":             strings.Join(cfg.Kafka.Brokers, ","),
		"KAFKA_TOPIC_PARTITIONS":    fmt.Sprint(cfg.Kafka.Partitions),
		"KAFKA_REPLICATION_FACTOR":  fmt.Sprint(cfg.Kafka.ReplicationFactor),
		"KAFKA_TOPIC":               cfg.Topic,
		"KAFKA_GROUP":               cfg.Group,
		"SECRETS_KEY":               string(cfg.SecretsKey.Reveal()),
		"WORKERS":                   fmt.Sprint(cfg.Workers),
		"PER_ENDPOINT_CONCURRENCY":  fmt.Sprint(cfg.PerEndpointConcurrency),
		"ATTEMPT_TIMEOUT":           cfg.AttemptTimeout.String(),
		"POLL_INTERVAL":             cfg.PollInterval.String(),
		"SANDBOX_PRIVATE_ENDPOINTS": strings.Join(cfg.SandboxPrivateEndpoints, ","),
		"ENDPOINT_CA_FILE":          cfg.EndpointCAFile,
		"LOG_LEVEL":                 "info",
	}
}

// Start starts the service with cfg in-process and returns its URL; it
// stops when the test ends.
func Start(t testing.TB, cfg server.Config) string {
	t.Helper()
	_, u := StartServer(t, cfg, quietTelemetry(t))
	return u
}

// StartServer is Start with the server, for a test that closes it early,
// and the telemetry of the test's choosing (to see its logs or spans).
func StartServer(t testing.TB, cfg server.Config, tel *telemetry.Telemetry) (*server.Server, string) {
	t.Helper()
	srv, err := server.New(context.Background(), cfg, tel)
	if err != nil {
		t.Fatalf("webhook: %v", err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return srv, ts.URL
}

// quietTelemetry is the service's telemetry for a test: warnings and
// errors only, to the test's log when verbose.
func quietTelemetry(t testing.TB) *telemetry.Telemetry {
	t.Helper()
	var out io.Writer = io.Discard
	if testing.Verbose() {
		out = testWriter{t}
	}
	tel, err := telemetry.Setup(context.Background(), "webhook", telemetry.Config{LogLevel: "warn"}, out)
	if err != nil {
		t.Fatalf("webhook telemetry: %v", err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	return tel
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// Client calls the service at url as caller.
func Client(url string, caller internalauth.Caller) webhookv1.Webhook {
	return webhookv1.NewWebhookProtobufClient(url, internalauthtest.Client(caller))
}

// Publish writes events to cfg's topic as ordering does: keyed by the
// order they are about (their order's, for an event that names none),
// with ctx's trace context in the headers. It makes the topic
// first, so that a test may publish before the service has.
func Publish(ctx context.Context, t testing.TB, cfg server.Config, events ...*orderingv1.OrderEvent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopic(ctx, cfg.Kafka, cfg.Topic); err != nil {
		t.Fatalf("make topic %s: %v", cfg.Topic, err)
	}
	w := kafka.NewWriter(cfg.Kafka, cfg.Topic)
	defer w.Close()
	msgs := make([]kafkago.Message, len(events))
	for i, e := range events {
		value, err := proto.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		key := e.GetOrderId()
		if key == "" {
			key = e.GetOrder().GetId()
		}
		msgs[i] = kafkago.Message{Key: []byte(key), Value: value}
		kafka.InjectTrace(ctx, &msgs[i])
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("publish %d events: %v", len(events), err)
	}
}

// PublishRaw writes values to cfg's topic as they are, with key: messages
// that are no events.
func PublishRaw(t testing.TB, cfg server.Config, key string, values ...[]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopic(ctx, cfg.Kafka, cfg.Topic); err != nil {
		t.Fatalf("make topic %s: %v", cfg.Topic, err)
	}
	w := kafka.NewWriter(cfg.Kafka, cfg.Topic)
	defer w.Close()
	msgs := make([]kafkago.Message, len(values))
	for i, v := range values {
		msgs[i] = kafkago.Message{Key: []byte(key), Value: v}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("publish %d messages: %v", len(values), err)
	}
}

// NewEventID is a fresh event id, as ordering makes them.
func NewEventID() string {
	id := uuid.Must(uuid.NewV7())
	return "evt_" + strings.ReplaceAll(id.String(), "-", "")
}

// OrderEvent is an event of type ("order.completed" or "order.failed")
// for a fresh order of account in env, as ordering publishes it: a
// completed order with one eSIM, a failed one with its error.
func OrderEvent(account string, env accountsv1.Environment, eventType string) *orderingv1.OrderEvent {
	orderID := uuid.Must(uuid.NewV7()).String()
	created := time.Date(2025, 3, 14, 9, 26, 53, 589_793_000, time.UTC)
	o := &orderingv1.Order{
		Id: orderID, AccountId: account, Environment: env,
		PlanId: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c", Quantity: 1,
		Price:     &orderingv1.Price{UnitMinor: 1650, TotalMinor: 1650, Currency: "USD"},
		Customer:  &orderingv1.Customer{Name: "Ada Lovelace", Email: "ada@example.com", Reference: "BK-1 <&>"},
		CreatedAt: timestamppb.New(created),
	}
	if eventType == "order.failed" {
		o.Status = orderingv1.OrderStatus_ORDER_STATUS_FAILED
		o.Error = &orderingv1.OrderError{Code: "provider_error", Message: "The provider could not issue the eSIMs; the order was refunded."}
	} else {
		o.Status = orderingv1.OrderStatus_ORDER_STATUS_COMPLETED
		o.Esims = []*orderingv1.Esim{{
			Id: uuid.Must(uuid.NewV7()).String(), OrderId: orderID, PlanName: "Japan 5 GB",
			Iccid: "8988247000000000004", QrCodeUrl: "https://api.example.com/qr/tok.png",
			ActivationCode: "LPA:1$smdp.sandbox.esim.invalid$MATCH-1", SmdpAddress: "smdp.sandbox.esim.invalid",
			MatchingId: "MATCH-1", Status: "ALLOCATED", ValidityDays: 30,
			Data:      &orderingv1.EsimData{TotalBytes: 5 << 30, UpdatedAt: timestamppb.New(created)},
			Install:   &orderingv1.Install{Instructions: "Settings > Mobile > Add eSIM", IosUniversalLink: "https://esimsetup.apple.com/x", AndroidUniversalLink: "https://esimsetup.android.com/x"},
			CreatedAt: timestamppb.New(created),
		}}
	}
	return &orderingv1.OrderEvent{
		Id: NewEventID(), Type: eventType, CreatedAt: timestamppb.New(created.Add(time.Second)), Order: o,
		AccountId: account, Environment: env, OrderId: orderID,
	}
}

// EsimEvent is an eSIM's event of type (esim.*) for a fresh eSIM of
// account in env, as ordering publishes it: an ACTIVE eSIM with 1 GB of
// 5 used and a top-up; threshold is esim.usage's (0 for the others).
func EsimEvent(account string, env accountsv1.Environment, eventType string, threshold int32) *orderingv1.OrderEvent {
	orderID := uuid.Must(uuid.NewV7()).String()
	esimID := uuid.Must(uuid.NewV7()).String()
	created := time.Date(2025, 3, 14, 9, 26, 53, 589_793_000, time.UTC)
	e := &orderingv1.Esim{
		Id: esimID, OrderId: orderID, PlanName: "Japan 5 GB",
		Iccid: "8988247000000000004", QrCodeUrl: "https://api.example.com/qr/tok.png",
		ActivationCode: "LPA:1$smdp.sandbox.esim.invalid$MATCH-1", SmdpAddress: "smdp.sandbox.esim.invalid",
		MatchingId: "MATCH-1", Status: "ACTIVE", ValidityDays: 30,
		Data:        &orderingv1.EsimData{TotalBytes: 5 << 30, UsedBytes: 1 << 30, UpdatedAt: timestamppb.New(created.Add(time.Hour))},
		Install:     &orderingv1.Install{Instructions: "Settings > Mobile > Add eSIM", IosUniversalLink: "https://esimsetup.apple.com/x", AndroidUniversalLink: "https://esimsetup.android.com/x"},
		CreatedAt:   timestamppb.New(created),
		PlanId:      "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c",
		Countries:   []string{"JP"},
		InstalledAt: timestamppb.New(created.Add(time.Minute)),
		ActivatedAt: timestamppb.New(created.Add(2 * time.Minute)),
		ExpiresAt:   timestamppb.New(created.Add(2*time.Minute + 30*24*time.Hour)),
		AccountId:   account, Environment: env,
	}
	t := TopUpEvent(account, env, "topup.completed").GetTopup()
	t.EsimId, t.EsimOrderId = esimID, orderID
	e.Topups = []*orderingv1.TopUp{t}
	return &orderingv1.OrderEvent{
		Id: NewEventID(), Type: eventType, CreatedAt: timestamppb.New(created.Add(time.Hour)), Esim: e,
		ThresholdPercent: threshold, AccountId: account, Environment: env, OrderId: orderID,
	}
}

// TopUpEvent is a top-up's event of type ("topup.completed" or
// "topup.failed") of a fresh eSIM of account in env, as ordering
// publishes it: a failed one with its error.
func TopUpEvent(account string, env accountsv1.Environment, eventType string) *orderingv1.OrderEvent {
	esimOrderID := uuid.Must(uuid.NewV7()).String()
	created := time.Date(2025, 3, 15, 10, 0, 0, 0, time.UTC)
	t := &orderingv1.TopUp{
		Id: uuid.Must(uuid.NewV7()).String(), EsimId: uuid.Must(uuid.NewV7()).String(),
		PlanId: "0190a3c2-7f3e-7a43-9c1d-3f0b6a1e2d4c", Days: 30, Bytes: 5 << 30,
		Price:     &orderingv1.Price{UnitMinor: 1650, TotalMinor: 1650, Currency: "USD"},
		Status:    orderingv1.OrderStatus_ORDER_STATUS_COMPLETED,
		CreatedAt: timestamppb.New(created),
		AccountId: account, Environment: env, EsimOrderId: esimOrderID,
	}
	if eventType == "topup.failed" {
		t.Status = orderingv1.OrderStatus_ORDER_STATUS_FAILED
		t.Error = &orderingv1.OrderError{Code: "provider_error", Message: "The provider could not apply the top-up; it was refunded."}
	}
	return &orderingv1.OrderEvent{
		Id: NewEventID(), Type: eventType, CreatedAt: timestamppb.New(created.Add(time.Second)), Topup: t,
		AccountId: account, Environment: env, OrderId: esimOrderID,
	}
}

// WaitForStatus polls the event, as an operator, until it is in status,
// or fails the test after within.
func WaitForStatus(t testing.TB, c webhookv1.Webhook, id string, status webhookv1.DeliveryStatus, within time.Duration) *webhookv1.Event {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		e, err := c.GetEvent(context.Background(), &webhookv1.GetEventRequest{Id: id})
		if err == nil && e.GetStatus() == status {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s is %s (%v) after %s, not %s; attempts %v", id, e.GetStatus(), err, within, status, e.GetAttempts())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
