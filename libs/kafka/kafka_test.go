package kafka_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/kafka/embedded"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
)

// TestWriteReadCommitResume writes keyed messages with a trace context,
// reads them in a group, commits part, and checks that a new member of
// the group resumes after the commit: what the relay and the webhook
// consumer rely on.
func TestWriteReadCommitResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c := kafkatest.New(t)
	topic := c.Topic("libs.kafka.test")
	if err := kafka.EnsureTopic(ctx, c.Config, topic); err != nil {
		t.Fatal(err)
	}
	if err := kafka.EnsureTopic(ctx, c.Config, topic); err != nil {
		t.Fatalf("a second EnsureTopic: %v; want nil, the topic exists", err)
	}

	otel.SetTextMapPropagator(propagation.TraceContext{})
	tp := sdktrace.NewTracerProvider()
	spanCtx, span := tp.Tracer("test").Start(ctx, "produce")
	w := kafka.NewWriter(c.Config, topic)
	defer w.Close()
	var msgs []kafkago.Message
	for i := range 10 {
		m := kafkago.Message{Key: []byte("k" + strconv.Itoa(i%3)), Value: []byte(strconv.Itoa(i))}
		kafka.InjectTrace(spanCtx, &m)
		msgs = append(msgs, m)
	}
	span.End()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}

	group := "test" + c.Suffix
	r := kafka.NewReader(c.Config, topic, group)
	seen := map[string]bool{}
	for range 6 {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := kafka.ExtractTrace(context.Background(), m)
		if id := traceID(got); id != span.SpanContext().TraceID().String() {
			t.Fatalf("message %s carries trace %q; want %s", m.Value, id, span.SpanContext().TraceID())
		}
		seen[string(m.Value)] = true
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := kafka.NewReader(c.Config, topic, group)
	defer r2.Close()
	for len(seen) < 10 {
		m, err := r2.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("after %d distinct messages: %v", len(seen), err)
		}
		if seen[string(m.Value)] {
			t.Fatalf("message %s read again after its commit", m.Value)
		}
		seen[string(m.Value)] = true
		if err := r2.CommitMessages(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEmbeddedBrokerKeepsMessagesAcrossARestart stops the broker and
// starts it again on its port and data: what `make run` and the outage
// tests do.
func TestEmbeddedBrokerKeepsMessagesAcrossARestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "kafka")
	b, err := embedded.Start(embedded.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cfg := kafka.Config{Brokers: b.Addrs(), Partitions: 1, ReplicationFactor: 1}
	if err := kafka.EnsureTopic(ctx, cfg, "restart"); err != nil {
		t.Fatal(err)
	}
	w := kafka.NewWriter(cfg, "restart")
	if err := w.WriteMessages(ctx, kafkago.Message{Key: []byte("k"), Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	_, port, _ := splitPort(b.Addrs()[0])
	b.Close()

	b2 := kafkatest.Embedded(t, embedded.Options{Port: port, DataDir: dir})
	if b2.Addrs()[0] != cfg.Brokers[0] {
		t.Fatalf("restarted on %s; want %s", b2.Addrs()[0], cfg.Brokers[0])
	}
	r := kafka.NewReader(cfg, "restart", "g")
	defer r.Close()
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Value) != "before" {
		t.Fatalf("read %q; want before", m.Value)
	}
}
