// Package kafka publishes ordering's events to Kafka: the
// ordering.Publisher of the publication jobs (package jobs).
package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	libkafka "github.com/esimplatform/esim/libs/kafka"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/orderingpb"
)

// Publisher writes each event to one topic as an orderingv1.OrderEvent
// keyed by its order id (the eSIM's order for an eSIM's or a top-up's
// event), so one order's events stay in order on one partition, with the
// order's trace context in the headers.
type Publisher struct {
	cfg    libkafka.Config
	topic  string
	writer *kafkago.Writer
	tracer trace.Tracer
}

var _ ordering.Publisher = (*Publisher)(nil)

// NewPublisher returns a publisher to topic; it dials nothing until used.
// tp traces each message with a producer span; nil traces nothing, and
// messages still carry the order's own trace context.
func NewPublisher(cfg libkafka.Config, topic string, tp trace.TracerProvider) *Publisher {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return &Publisher{
		cfg:    cfg,
		topic:  topic,
		writer: libkafka.NewWriter(cfg, topic),
		tracer: tp.Tracer("github.com/esimplatform/esim/services/ordering/kafka"),
	}
}

// topicTimeout bounds one try at creating the topic: a broker that takes
// the connection and never answers is tried again, not waited for.
const topicTimeout = 10 * time.Second

// EnsureTopic creates the topic unless it exists. The publication jobs
// call it before their first publication rather than the server at start, so that
// ordering starts, and takes orders, while Kafka is down.
func (p *Publisher) EnsureTopic(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, topicTimeout)
	defer cancel()
	return libkafka.EnsureTopic(ctx, p.cfg, p.topic)
}

// Publish implements ordering.Publisher: one write of the whole batch,
// which returns once every in-sync replica has it.
func (p *Publisher) Publish(ctx context.Context, ps []ordering.Publication) error {
	msgs := make([]kafkago.Message, len(ps))
	spans := make([]trace.Span, len(ps))
	defer func() {
		for _, span := range spans {
			if span != nil {
				span.End()
			}
		}
	}()
	for i, pub := range ps {
		event := Event(pub)
		value, err := proto.Marshal(event)
		if err != nil {
			return fmt.Errorf("event %s: %w", pub.Event.ID, err)
		}
		orderID := event.GetOrderId()
		// The span's parent is the order's processing, long finished: the
		// trace shows the order, then its event leaving, then whatever
		// consumes it.
		parent := otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(pub.Event.TraceContext))
		spanCtx, span := p.tracer.Start(parent, p.topic+" publish",
			trace.WithSpanKind(trace.SpanKindProducer),
			trace.WithAttributes(
				semconv.MessagingSystemKafka,
				semconv.MessagingOperationTypePublish,
				semconv.MessagingOperationName("publish"),
				semconv.MessagingDestinationName(p.topic),
				semconv.MessagingMessageID(pub.Event.ID),
				semconv.MessagingKafkaMessageKey(orderID),
			))
		spans[i] = span
		msgs[i] = kafkago.Message{Key: []byte(orderID), Value: value}
		libkafka.InjectTrace(spanCtx, &msgs[i])
	}
	if err := p.writer.WriteMessages(ctx, msgs...); err != nil {
		for _, span := range spans {
			span.RecordError(err)
			span.SetStatus(codes.Error, "write to Kafka")
		}
		return fmt.Errorf("write %d events to %s: %w", len(msgs), p.topic, err)
	}
	return nil
}

// Event is p in the contract: the order, top-up or eSIM it is about,
// and on every event whose it is and the order it concerns, which for a
// top-up or an eSIM is the eSIM's order, so that all of one order's
// facts share its key.
func Event(p ordering.Publication) *orderingv1.OrderEvent {
	e := &orderingv1.OrderEvent{
		Id:        p.Event.ID,
		Type:      string(p.Event.Type),
		CreatedAt: timestamppb.New(p.Event.CreatedAt),
	}
	var scope ordering.Scope
	var orderID uuid.UUID
	switch {
	case p.Esim != nil:
		e.Esim = orderingpb.Esim(*p.Esim)
		e.ThresholdPercent = p.Event.Threshold
		scope, orderID = p.Esim.Scope, p.Esim.OrderID
	case p.TopUp != nil:
		e.Topup = orderingpb.TopUp(*p.TopUp)
		scope, orderID = p.TopUp.Scope, p.TopUp.EsimOrderID
	default:
		e.Order = orderingpb.Order(p.Order)
		scope, orderID = p.Order.Scope, p.Order.ID
	}
	e.AccountId = scope.AccountID.String()
	e.Environment = orderingpb.Environment(scope.Environment)
	e.OrderId = orderID.String()
	return e
}

// Close releases the writer's connections.
func (p *Publisher) Close() error { return p.writer.Close() }
