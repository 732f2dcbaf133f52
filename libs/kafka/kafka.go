// Package kafka holds what every service that speaks Kafka needs and no
// business knowledge: its configuration, topic creation at start, a
// writer and a reader set up for low latency and no loss, and the W3C
// trace context carried in message headers.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Config is where the brokers are and how a service's topics are made.
// Services embed it as a field, like httpserver.Config.
type Config struct {
	// Brokers are host:port bootstrap addresses, comma-separated.
	Brokers []string `env:"KAFKA_BROKERS, required"`
	// Partitions and ReplicationFactor are those of a topic the service
	// creates at start; a topic that exists is left as it is.
	Partitions        int `env:"KAFKA_TOPIC_PARTITIONS, default=6"`
	ReplicationFactor int `env:"KAFKA_REPLICATION_FACTOR, default=1"`
}

// Validate checks what the types alone cannot.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("KAFKA_BROKERS: want at least one host:port"))
	}
	for _, b := range c.Brokers {
		if _, port, err := net.SplitHostPort(b); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("KAFKA_BROKERS: %q is not host:port", b))
		}
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("KAFKA_TOPIC_PARTITIONS: %d; want at least 1", c.Partitions))
	}
	if c.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("KAFKA_REPLICATION_FACTOR: %d; want at least 1", c.ReplicationFactor))
	}
	return errors.Join(errs...)
}

// EnsureTopic creates topic with the configured partitions and
// replication unless it exists. Services call it at start, so no broker
// needs auto-creation turned on.
func EnsureTopic(ctx context.Context, cfg Config, topic string) error {
	var errs []error
	for _, broker := range cfg.Brokers {
		err := createTopic(ctx, broker, kafkago.TopicConfig{
			Topic: topic, NumPartitions: cfg.Partitions, ReplicationFactor: cfg.ReplicationFactor,
		})
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", broker, err))
	}
	return fmt.Errorf("create topic %s: %w", topic, errors.Join(errs...))
}

// createTopic asks the cluster's controller, which any broker names, to
// create the topic; kafka-go takes "already exists" for success.
func createTopic(ctx context.Context, broker string, topic kafkago.TopicConfig) error {
	conn, err := kafkago.DialContext(ctx, "tcp", broker)
	if err != nil {
		return err
	}
	defer conn.Close()
	controller, err := conn.Controller()
	if err != nil {
		return fmt.Errorf("find the controller: %w", err)
	}
	cc, err := kafkago.DialContext(ctx, "tcp", net.JoinHostPort(controller.Host, strconv.Itoa(controller.Port)))
	if err != nil {
		return fmt.Errorf("dial the controller: %w", err)
	}
	defer cc.Close()
	if deadline, ok := ctx.Deadline(); ok {
		_ = cc.SetDeadline(deadline)
	}
	return cc.CreateTopics(topic)
}

// NewWriter writes to topic, keyed: messages with one key go to one
// partition, in order. A write returns once every in-sync replica has the
// messages (acks=all), so a row marked sent after it is never lost by
// the broker. Batches leave at once instead of waiting to fill up: the
// callers write whole batches themselves.
func NewWriter(cfg Config, topic string) *kafkago.Writer {
	return &kafkago.Writer{
		Addr:                   kafkago.TCP(cfg.Brokers...),
		Topic:                  topic,
		Balancer:               &kafkago.Hash{},
		RequiredAcks:           kafkago.RequireAll,
		BatchTimeout:           time.Millisecond,
		MaxAttempts:            3,
		WriteTimeout:           10 * time.Second,
		AllowAutoTopicCreation: false,
	}
}

// NewReader reads topic as a member of group, from the group's committed
// offsets (the earliest for a new group, so a consumer started after the
// first events misses none). Offsets move only on CommitMessages: a
// message read and not yet committed is read again after a restart.
// MaxWait is short because events wait for nobody.
func NewReader(cfg Config, topic, group string) *kafkago.Reader {
	return kafkago.NewReader(kafkago.ReaderConfig{
		Brokers:        cfg.Brokers,
		Topic:          topic,
		GroupID:        group,
		StartOffset:    kafkago.FirstOffset,
		MinBytes:       1,
		MaxBytes:       10 << 20,
		MaxWait:        50 * time.Millisecond,
		CommitInterval: 0,
		// The shortest session kfake and most brokers accept: a
		// replica that vanishes gives up its partitions within it.
		SessionTimeout:    6 * time.Second,
		HeartbeatInterval: time.Second,
		RebalanceTimeout:  6 * time.Second,
		JoinGroupBackoff:  200 * time.Millisecond,
		ReadBackoffMin:    10 * time.Millisecond,
		ReadBackoffMax:    500 * time.Millisecond,
	})
}

// Headers carries a trace context in a message's headers for
// OpenTelemetry's propagators.
type Headers struct{ H *[]kafkago.Header }

var _ propagation.TextMapCarrier = Headers{}

// Get returns the value of key, or "".
func (h Headers) Get(key string) string {
	for _, x := range *h.H {
		if x.Key == key {
			return string(x.Value)
		}
	}
	return ""
}

// Set replaces the value of key.
func (h Headers) Set(key, value string) {
	for i, x := range *h.H {
		if x.Key == key {
			(*h.H)[i].Value = []byte(value)
			return
		}
	}
	*h.H = append(*h.H, kafkago.Header{Key: key, Value: []byte(value)})
}

// Keys lists the header names.
func (h Headers) Keys() []string {
	keys := make([]string, len(*h.H))
	for i, x := range *h.H {
		keys[i] = x.Key
	}
	return keys
}

// InjectTrace writes ctx's trace context into m's headers.
func InjectTrace(ctx context.Context, m *kafkago.Message) {
	otel.GetTextMapPropagator().Inject(ctx, Headers{&m.Headers})
}

// ExtractTrace returns ctx with the trace context of m's headers.
func ExtractTrace(ctx context.Context, m kafkago.Message) context.Context {
	headers := m.Headers
	return otel.GetTextMapPropagator().Extract(ctx, Headers{&headers})
}
