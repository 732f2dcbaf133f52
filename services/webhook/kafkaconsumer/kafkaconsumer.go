// Package kafkaconsumer feeds the webhook service from Kafka: it reads
// ordering's events (esim.orders.v1, protobuf OrderEvent: an order's, an
// eSIM's or a top-up's) as a member of the service's consumer group, has
// each stored with its delivery job, and only then commits its offset. A crash between the two reads the
// message again, and the event's id makes the second read a no-op.
package kafkaconsumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	kafkago "github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/kafka"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/proto/partnerapi"
	"github.com/esimplatform/esim/services/webhook"
)

// Ingester stores events: the webhook Service.
type Ingester interface {
	IngestMany(ctx context.Context, es []webhook.IncomingEvent) (invalid []error, added []bool, err error)
}

// Options configure a Consumer.
type Options struct {
	Kafka kafka.Config
	Topic string
	Group string
	Log   *slog.Logger
	// TracerProvider, when set, traces the processing of every message
	// as a consumer span continuing the trace in its headers.
	TracerProvider trace.TracerProvider
}

// Consumer is a running consumer.
type Consumer struct {
	o      Options
	svc    Ingester
	tracer trace.Tracer
	stop   context.CancelFunc
	done   chan struct{}
}

// Backoffs: how long to wait before trying again after a failure, the
// wait doubling up to the maximum. A broker or database down delays
// events, never loses them: nothing is committed meanwhile.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

// Start starts consuming in the background: it makes sure the topic
// exists (retrying while the broker is down, so that the service starts
// and serves its API meanwhile), then reads until Stop.
func Start(o Options, svc Ingester) *Consumer {
	ctx, stop := context.WithCancel(context.Background())
	c := &Consumer{o: o, svc: svc, stop: stop, done: make(chan struct{})}
	if o.TracerProvider != nil {
		c.tracer = o.TracerProvider.Tracer("github.com/esimplatform/esim/services/webhook/kafkaconsumer")
	}
	go func() {
		defer close(c.done)
		if !c.ensureTopic(ctx) {
			return
		}
		c.consume(ctx)
	}()
	return c
}

// Stop stops reading and returns once the consumer has left its group.
// A message being stored is stored or not; either way its offset is
// committed only if it was.
func (c *Consumer) Stop() {
	c.stop()
	<-c.done
}

// ensureTopic creates the topic unless it exists, trying until it can or
// ctx ends, which it reports.
func (c *Consumer) ensureTopic(ctx context.Context) bool {
	wait := minBackoff
	for {
		attemptCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := kafka.EnsureTopic(attemptCtx, c.o.Kafka, c.o.Topic)
		cancel()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		c.o.Log.Warn("cannot make sure the Kafka topic exists; trying again", "topic", c.o.Topic, "in", wait.String(), "err", err)
		if !sleep(ctx, wait) {
			return false
		}
		wait = min(2*wait, maxBackoff)
	}
}

// consume reads the messages the reader has at hand, up to maxBatch,
// stores them in one transaction in their order, so a partition's events
// are stored in their order, and hands each stored message to commit,
// which commits offsets in the background: only stored events' offsets,
// never before they are stored, yet without a broker round trip between
// one batch and the next.
func (c *Consumer) consume(ctx context.Context) {
	r := kafka.NewReader(c.o.Kafka, c.o.Topic, c.o.Group)
	stored := make(chan kafkago.Message, commitBacklog)
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		c.commit(r, stored)
	}()
	defer func() {
		// The committer commits what was stored, then the reader goes.
		close(stored)
		<-committed
		if err := r.Close(); err != nil {
			c.o.Log.Warn("closing the Kafka reader", "err", err)
		}
	}()
	wait := minBackoff
	for {
		batch, err := fetch(ctx, r)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.o.Log.Warn("reading from Kafka failed; trying again", "topic", c.o.Topic, "in", wait.String(), "err", err)
			if !sleep(ctx, wait) {
				return
			}
			wait = min(2*wait, maxBackoff)
			continue
		}
		wait = minBackoff
		done, ok := c.handle(ctx, batch)
		for _, m := range batch[:done] {
			stored <- m
		}
		if !ok {
			return // stopped before the rest was stored: not committed
		}
	}
}

// maxBatch bounds the messages stored in one transaction; batchWait is
// how long a batch waits for one more message after the last: a backlog's
// messages are at hand already, and a lone event waits no longer than
// that for company.
const (
	maxBatch  = 500
	batchWait = time.Millisecond
)

// fetch waits for a message, then takes those that follow within
// batchWait of each other, up to maxBatch.
func fetch(ctx context.Context, r *kafkago.Reader) ([]kafkago.Message, error) {
	m, err := r.FetchMessage(ctx)
	if err != nil {
		return nil, err
	}
	batch := []kafkago.Message{m}
	for len(batch) < maxBatch {
		more, cancel := context.WithTimeout(ctx, batchWait)
		m, err := r.FetchMessage(more)
		cancel()
		if err != nil {
			// The wait is over, or the reader failed: what was read is
			// stored first, and the next fetch meets the failure.
			break
		}
		batch = append(batch, m)
	}
	return batch, nil
}

// commitBacklog is how many stored messages may wait for their offsets'
// commit; past it, reading waits for the committer.
const commitBacklog = 1024

// commit commits the offsets of stored messages until stored is closed:
// whatever has piled up during one commit goes in the next, in one call
// (kafka-go commits each partition's highest offset).
func (c *Consumer) commit(r *kafkago.Reader, stored <-chan kafkago.Message) {
	for m := range stored {
		batch := []kafkago.Message{m}
	drain:
		for {
			select {
			case more, ok := <-stored:
				if !ok {
					break drain
				}
				batch = append(batch, more)
			default:
				break drain
			}
		}
		// Its own context: a stop must not keep a stored event's offset
		// from being committed.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := r.CommitMessages(ctx, batch...)
		cancel()
		if err != nil {
			// Read again after a restart or a rebalance, and deduped
			// then; a later commit covers it meanwhile.
			last := batch[len(batch)-1]
			c.o.Log.Warn("committing Kafka offsets failed", "messages", len(batch), "partition", last.Partition, "offset", last.Offset, "err", err)
		}
	}
}

// message is a message of a batch being stored, with its span.
type message struct {
	ctx  context.Context
	span trace.Span
	at   []any
}

// begin starts m's span, when tracing.
func (c *Consumer) begin(ctx context.Context, m kafkago.Message) message {
	ctx = kafka.ExtractTrace(ctx, m)
	span := trace.SpanFromContext(ctx)
	if c.tracer != nil {
		ctx, span = c.tracer.Start(ctx, c.o.Topic+" process", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(
				attribute.String("messaging.system", "kafka"),
				attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.destination.name", c.o.Topic),
				attribute.String("messaging.consumer.group.name", c.o.Group),
				attribute.Int("messaging.destination.partition.id", m.Partition),
				attribute.String("messaging.kafka.offset", strconv.FormatInt(m.Offset, 10)),
			))
	}
	return message{ctx: ctx, span: span, at: []any{"topic", c.o.Topic, "partition", m.Partition, "offset", m.Offset}}
}

func (m message) end(tracing bool) {
	if tracing {
		m.span.End()
	}
}

// handle stores the events of batch, trying until they are stored or
// can never be, and reports how many of its first messages are done
// with (stored, or skipped as poison) and whether all are: false when
// ctx ended first, or a message is held (hold), which ends the batch.
func (c *Consumer) handle(ctx context.Context, batch []kafkago.Message) (int, bool) {
	tracing := c.tracer != nil
	var events []webhook.IncomingEvent
	var msgs []message
	defer func() {
		for _, m := range msgs {
			m.end(tracing)
		}
	}()
	held, heldErr := -1, error(nil)
	for i, km := range batch {
		m := c.begin(ctx, km)
		var pb orderingv1.OrderEvent
		if err := proto.Unmarshal(km.Value, &pb); err != nil {
			c.poison(m.ctx, m.at, err)
			m.end(tracing)
			continue
		}
		in, err := incoming(&pb)
		if errors.Is(err, partnerapi.ErrUnknown) {
			held, heldErr = i, err
			msgs = append(msgs, m)
			break
		}
		if err != nil {
			c.poison(m.ctx, m.at, err)
			m.end(tracing)
			continue
		}
		// The trace context stored is this span's (or, with tracing off,
		// the producer's), so each attempt's span joins the trace of the
		// order.
		in.Trace = map[string]string{}
		propagation.TraceContext{}.Inject(m.ctx, propagation.MapCarrier(in.Trace))
		events = append(events, in)
		msgs = append(msgs, m)
	}

	wait := minBackoff
	for len(events) > 0 {
		invalid, added, err := c.svc.IngestMany(ctx, events)
		if err == nil {
			for j, e := range invalid {
				if e != nil {
					c.poison(msgs[j].ctx, msgs[j].at, e)
					continue
				}
				c.o.Log.DebugContext(msgs[j].ctx, "event consumed", append(msgs[j].at, "event_id", events[j].ID, "new", added[j])...)
			}
			break
		}
		if ctx.Err() != nil {
			return 0, false
		}
		c.o.Log.WarnContext(ctx, "storing events failed; trying again", "topic", c.o.Topic, "events", len(events), "in", wait.String(), "err", err)
		if !sleep(ctx, wait) {
			return 0, false
		}
		wait = min(2*wait, maxBackoff)
	}
	if held >= 0 {
		m := msgs[len(msgs)-1]
		return held, c.hold(m.ctx, m.at, heldErr)
	}
	return len(batch), true
}

// poison logs a message that can never be stored, which is then
// committed: one bad message must not hold up its partition's events.
func (c *Consumer) poison(ctx context.Context, at []any, err error) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetStatus(codes.Error, "skipped: "+err.Error())
	}
	c.o.Log.ErrorContext(ctx, "skipping a Kafka message that is no order event", append(at, "err", err.Error())...)
}

// hold keeps an event this service cannot render (a status or an
// environment the partner API does not define: ordering is newer than
// this service) until ctx ends, and reports false. Skipping it would lose
// an event a partner is owed, and rendering another value would tell the
// partner something untrue; held, it is not committed, and a replica
// that can render it delivers it. Meanwhile this replica's partitions
// wait: deploy the webhook service before an ordering that sends a new
// value.
func (c *Consumer) hold(ctx context.Context, at []any, err error) bool {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetStatus(codes.Error, "held: "+err.Error())
	}
	wait := minBackoff
	for {
		c.o.Log.ErrorContext(ctx, "holding an event this service cannot render; a newer webhook service can", append(at, "in", wait.String(), "err", err.Error())...)
		if !sleep(ctx, wait) {
			return false
		}
		wait = min(2*wait, maxBackoff)
	}
}

// incoming is pb as the domain takes it, its data rendered as the
// partner API shows what the event is about: an order, an eSIM or a
// top-up. ErrUnknown when that has a value the API does not define.
func incoming(pb *orderingv1.OrderEvent) (webhook.IncomingEvent, error) {
	typ := webhook.EventType(pb.GetType())
	var data any
	var err error
	switch typ.About() {
	case webhook.AboutEsim:
		if pb.GetEsim() == nil {
			return webhook.IncomingEvent{}, fmt.Errorf("%s event without its eSIM", typ)
		}
		data, err = partnerapi.EsimFromProto(pb.GetEsim())
	case webhook.AboutTopUp:
		if pb.GetTopup() == nil {
			return webhook.IncomingEvent{}, fmt.Errorf("%s event without its top-up", typ)
		}
		data, err = partnerapi.TopUpFromProto(pb.GetTopup())
	default:
		if pb.GetOrder() == nil {
			return webhook.IncomingEvent{}, errors.New("event without an order")
		}
		data, err = partnerapi.OrderFromProto(pb.GetOrder())
	}
	if err != nil {
		return webhook.IncomingEvent{}, err
	}
	accountID, env, orderID := pb.GetAccountId(), pb.GetEnvironment(), pb.GetOrderId()
	if o := pb.GetOrder(); o != nil {
		// Published before ordering named them on every event.
		if accountID == "" {
			accountID = o.GetAccountId()
		}
		if env == accountsv1.Environment_ENVIRONMENT_UNSPECIFIED {
			env = o.GetEnvironment()
		}
		if orderID == "" {
			orderID = o.GetId()
		}
	}
	if _, ok := accountsv1.EnvironmentByShortName(env.ShortName()); !ok && env != accountsv1.Environment_ENVIRONMENT_UNSPECIFIED {
		return webhook.IncomingEvent{}, fmt.Errorf("%w: event %s has environment %s", partnerapi.ErrUnknown, pb.GetId(), env)
	}
	account, err := uuid.Parse(accountID)
	if err != nil {
		return webhook.IncomingEvent{}, fmt.Errorf("account id %q: %w", accountID, err)
	}
	order, err := uuid.Parse(orderID)
	if err != nil {
		return webhook.IncomingEvent{}, fmt.Errorf("order id %q: %w", orderID, err)
	}
	body, err := partnerapi.Marshal(data)
	if err != nil {
		return webhook.IncomingEvent{}, fmt.Errorf("render the %s of event %s: %w", typ.About(), pb.GetId(), err)
	}
	var createdAt time.Time
	if pb.GetCreatedAt() != nil {
		createdAt = pb.GetCreatedAt().AsTime()
	}
	return webhook.IncomingEvent{
		ID:               pb.GetId(),
		Type:             typ,
		Scope:            webhook.Scope{AccountID: account, Environment: webhook.Environment(env.ShortName())},
		OrderID:          order,
		CreatedAt:        createdAt,
		ThresholdPercent: pb.GetThresholdPercent(),
		Data:             body,
	}, nil
}

// sleep waits d unless ctx ends first, and reports whether it waited.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
