package server

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/esimplatform/esim/services/ordering"
)

// The relay's pause after a failed try, doubling up to its cap: an outage
// of Kafka costs a try every few seconds, and its end is seen within as
// much.
const (
	relayMinPause = 100 * time.Millisecond
	relayMaxPause = 5 * time.Second
)

// purgeInterval is how often the relay deletes the events published
// longer than OUTBOX_RETENTION ago: the retention is counted in days, and
// one pass an hour keeps each delete small.
const purgeInterval = time.Hour

// relayLoop publishes the outbox's events: at once when an order of this
// replica finished, every interval for those of other replicas, crashed
// ones, or an outage, and batch after batch while batches come full. It
// stops between batches when ctx ends; a batch runs on publishCtx, which
// Close cancels only when it cannot wait for the batch any longer, so
// that an event written to Kafka is also marked sent rather than
// published again by the next relay.
func (s *Server) relayLoop(ctx, publishCtx context.Context, svc *ordering.Service, interval, retention time.Duration) {
	defer close(s.relayed)
	var failing outage
	// The topic first, here rather than in New: ordering starts, and
	// takes orders, while Kafka is down, and their events wait.
	for {
		err := s.publisher.EnsureTopic(ctx)
		if err == nil {
			break
		}
		if !s.pauseAfter(ctx, &failing, "create the topic", err) {
			return
		}
	}
	poll := time.NewTicker(interval)
	defer poll.Stop()
	var nextPurge time.Time
	for {
		if now := time.Now(); !now.Before(nextPurge) {
			s.deletePublished(ctx, svc, retention)
			nextPurge = now.Add(purgeInterval)
		}
		n, err := svc.PublishEvents(publishCtx)
		if err != nil {
			if !s.pauseAfter(ctx, &failing, "publish", err) {
				return
			}
			continue
		}
		s.endOutage(ctx, &failing)
		s.published.Add(ctx, int64(n))
		if n == ordering.EventBatch {
			continue // more are waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-svc.EventWritten():
		case <-poll.C:
		}
	}
}

// outage is a run of failed tries of the relay, logged when it starts and
// when it ends rather than at every try.
type outage struct {
	since time.Time
	tries int
	pause time.Duration
}

// pauseAfter records a failed try, says so when it starts an outage, and
// waits before the next try, longer each time; false when ctx ended.
func (s *Server) pauseAfter(ctx context.Context, o *outage, step string, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if o.tries == 0 {
		o.since, o.pause = time.Now(), relayMinPause
		s.log.WarnContext(ctx, "order events cannot be published; orders go on and their events wait in the outbox, retried until Kafka takes them",
			"step", step, "err", err)
	} else {
		o.pause = min(2*o.pause, relayMaxPause)
		s.log.DebugContext(ctx, "order events still cannot be published", "step", step, "tries", o.tries+1, "err", err)
	}
	o.tries++
	pause := time.NewTimer(o.pause)
	defer pause.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-pause.C:
		return true
	}
}

// endOutage says when publishing works again after failing.
func (s *Server) endOutage(ctx context.Context, o *outage) {
	if o.tries == 0 {
		return
	}
	s.log.InfoContext(ctx, "order events are published again", "failed_tries", o.tries, "outage", time.Since(o.since).Round(time.Millisecond).String())
	*o = outage{}
}

func (s *Server) deletePublished(ctx context.Context, svc *ordering.Service, retention time.Duration) {
	n, err := svc.DeletePublishedEvents(ctx, retention)
	switch {
	case err != nil && ctx.Err() == nil:
		// Tried again at the next pass: the rows only wait longer.
		s.log.WarnContext(ctx, "deleting published order events failed", "err", err)
	case n > 0:
		s.log.InfoContext(ctx, "deleted published order events past their retention", "events", n, "retention", retention.String())
	}
}

// relayMetrics registers the relay's metrics: events published, and
// events waiting, counted at each scrape.
func relayMetrics(mp metric.MeterProvider, svc *ordering.Service) (metric.Int64Counter, metric.Registration, error) {
	meter := mp.Meter("github.com/esimplatform/esim/services/ordering/server")
	published, err := meter.Int64Counter("ordering.outbox.events.published",
		metric.WithDescription("Order events the relay published to Kafka."), metric.WithUnit("{event}"))
	if err != nil {
		return nil, nil, fmt.Errorf("published events counter: %w", err)
	}
	waiting, err := meter.Int64ObservableGauge("ordering.outbox.events.waiting",
		metric.WithDescription("Order events in the outbox not yet published: growing while Kafka is down."), metric.WithUnit("{event}"))
	if err != nil {
		return nil, nil, fmt.Errorf("waiting events gauge: %w", err)
	}
	reg, err := meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, waitingCountBudget)
		defer cancel()
		n, err := svc.UnpublishedEvents(ctx)
		if err != nil {
			return err
		}
		o.ObserveInt64(waiting, n)
		return nil
	}, waiting)
	if err != nil {
		return nil, nil, fmt.Errorf("waiting events callback: %w", err)
	}
	return published, reg, nil
}

// waitingCountBudget keeps a slow database from stalling /metrics.
const waitingCountBudget = 2 * time.Second
