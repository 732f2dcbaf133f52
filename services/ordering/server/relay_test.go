package server_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/kafka"
	"github.com/esimplatform/esim/libs/kafka/embedded"
	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/libs/telemetry"
	"github.com/esimplatform/esim/libs/telemetry/telemetrytest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	orderingv1 "github.com/esimplatform/esim/proto/ordering/v1"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	"github.com/esimplatform/esim/services/ordering/server"
)

// replica is one ordering server, with its log and telemetry.
type replica struct {
	url  string
	logs *telemetrytest.LogBuffer
	tel  *telemetry.Telemetry
}

// startReplica is orderingtest.Start with the service's log and
// telemetry kept.
func startReplica(t *testing.T, cfg server.Config, opts ...telemetry.Option) replica {
	t.Helper()
	logs := &telemetrytest.LogBuffer{}
	tel, err := telemetry.Setup(context.Background(), "ordering", telemetry.Config{LogLevel: "debug"}, logs, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tel.Shutdown(context.Background()) })
	srv, err := server.New(context.Background(), cfg, tel)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	t.Cleanup(srv.Close)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return replica{url: ts.URL, logs: logs, tel: tel}
}

// outboxRow is the publication of an order's event, as a River job.
type outboxRow struct {
	EventID, Type, OrderID, TraceParent string
	Sent                                bool
}

func openDB(t *testing.T, cfg server.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), cfg.DatabaseURL.Reveal())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func readOutbox(t *testing.T, db *pgxpool.Pool) []outboxRow {
	t.Helper()
	rows, err := db.Query(context.Background(),
		`SELECT args->>'event_id', args->>'type', args->>'order_id', coalesce(args->'trace_context'->>'traceparent', ''), state = 'completed'
		FROM river_job WHERE kind = 'ordering.publish_event' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		if err := rows.Scan(&r.EventID, &r.Type, &r.OrderID, &r.TraceParent, &r.Sent); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitAllSent polls the outbox until it holds n rows, all sent, and
// returns them; it fails the test after a deadline.
func waitAllSent(t *testing.T, db *pgxpool.Pool, n int) []outboxRow {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rows := readOutbox(t, db)
		sent := 0
		for _, r := range rows {
			if r.Sent {
				sent++
			}
		}
		if len(rows) == n && sent == n {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s the outbox has %d rows, %d sent; want %d, all sent", len(rows), sent, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkEachPublishedOnce fails unless the topic holds exactly one message
// per outbox row, keyed by its order, with its event.
func checkEachPublishedOnce(t *testing.T, deps *orderingtest.Deps, rows []outboxRow) {
	t.Helper()
	want := map[string]outboxRow{}
	for _, r := range rows {
		want[r.EventID] = r
	}
	seen := map[string]int{}
	for _, p := range deps.Events(t) {
		id := p.Event.GetId()
		seen[id]++
		r, ok := want[id]
		switch {
		case !ok:
			t.Errorf("event %s on the topic is no outbox row's", id)
		case seen[id] > 1:
			t.Errorf("event %s published %d times", id, seen[id])
		case string(p.Message.Key) != r.OrderID || p.Event.GetType() != r.Type || p.Event.GetOrder().GetId() != r.OrderID:
			t.Errorf("event %s: key %s, type %s, order %s; want %s of order %s", id, p.Message.Key, p.Event.GetType(), p.Event.GetOrder().GetId(), r.Type, r.OrderID)
		}
	}
	for id := range want {
		if seen[id] == 0 {
			t.Errorf("event %s was never published", id)
		}
	}
}

// traceID is the trace id of a W3C traceparent (version-trace-span-flags).
func traceID(traceparent string) string {
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 {
		return ""
	}
	return parts[1]
}

// A completed and a failed order each reach the topic once, keyed by the
// order, as OrderEvents carrying the order as GetOrder answers it, in the
// trace of the order's processing, under a producer span; at once, as the
// finished order wakes the relay.
func TestOrderEventsArePublished(t *testing.T) {
	ctx := context.Background()
	deps := orderingtest.StartDeps(t, nil)
	cfg := deps.Config(t)
	// Never polled within the test: only the wake-up publishes.
	cfg.RelayInterval = time.Hour
	spans := tracetest.NewInMemoryExporter()
	r := startReplica(t, cfg, telemetry.WithSpanExporter(spans))
	gateway, operator := orderingtest.Client(r.url, internalauth.Gateway), orderingtest.Client(r.url, internalauth.Operator)
	account := uuid.NewString()
	deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 10_000, "t")

	want := map[string]orderingv1.OrderStatus{}
	for key, ref := range map[string]string{"completes": "BK-1", "fails": "sandbox:provider_error"} {
		res, err := gateway.CreateOrder(ctx, order(account, key, ref))
		if err != nil {
			t.Fatalf("CreateOrder %s: %v", key, err)
		}
		want[res.GetOrder().GetId()] = res.GetOrder().GetStatus()
	}

	rows := waitAllSent(t, openDB(t, cfg), 2)
	stored := map[string]outboxRow{}
	for _, row := range rows {
		stored[row.OrderID] = row
	}
	published := deps.Events(t)
	if len(published) != 2 {
		t.Fatalf("%d messages on the topic, want 2", len(published))
	}
	for _, p := range published {
		e := p.Event
		id := string(p.Message.Key)
		row, ok := stored[id]
		if !ok {
			t.Fatalf("message keyed %q is no finished order's", id)
		}
		wantType := map[orderingv1.OrderStatus]string{
			orderingv1.OrderStatus_ORDER_STATUS_COMPLETED: "order.completed",
			orderingv1.OrderStatus_ORDER_STATUS_FAILED:    "order.failed",
		}[want[id]]
		if e.GetId() != row.EventID || e.GetType() != wantType || row.Type != wantType || !e.GetCreatedAt().IsValid() {
			t.Errorf("event of order %s = %s %s at %v; want %s %s", id, e.GetId(), e.GetType(), e.GetCreatedAt(), row.EventID, wantType)
		}
		got, err := operator.GetOrder(ctx, &orderingv1.GetOrderRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(e.GetOrder(), got) {
			t.Errorf("the event's order differs from GetOrder's:\n%v\n%v", e.GetOrder(), got)
		}
		if wantType == "order.completed" {
			esims := e.GetOrder().GetEsims()
			if len(esims) != 1 || !strings.HasPrefix(esims[0].GetActivationCode(), "LPA:1$") || esims[0].GetQrCodeUrl() == "" || esims[0].GetInstall().GetInstructions() == "" {
				t.Errorf("the completed order's eSIMs in the event: %v", esims)
			}
		}
		header := kafka.Headers{H: &p.Message.Headers}.Get("traceparent")
		if row.TraceParent == "" || header == "" || traceID(header) != traceID(row.TraceParent) {
			t.Errorf("order %s: traceparent header %q, stored %q; want both, in one trace", id, header, row.TraceParent)
		}
	}

	var producers []tracetest.SpanStub
	for _, s := range spans.GetSpans() {
		if s.Name == deps.Topic()+" publish" {
			producers = append(producers, s)
		}
	}
	if len(producers) != 2 {
		t.Fatalf("%d spans named %q, want 2", len(producers), deps.Topic()+" publish")
	}
	traces := map[string]bool{}
	for _, row := range rows {
		traces[traceID(row.TraceParent)] = true
	}
	for _, s := range producers {
		attrs := attribute.NewSet(s.Attributes...)
		system, _ := attrs.Value("messaging.system")
		dest, _ := attrs.Value("messaging.destination.name")
		if s.SpanKind != trace.SpanKindProducer || !traces[s.Parent.TraceID().String()] || !s.Parent.IsRemote() ||
			system.AsString() != "kafka" || dest.AsString() != deps.Topic() {
			t.Errorf("producer span %+v: want kind producer, a child of a stored trace context, messaging attributes", s)
		}
	}

	metrics := telemetrytest.Scrape(r.tel.MetricsHandler)
	if got := telemetrytest.Sample(metrics, "ordering_outbox_events_published_total", nil); got != "2" {
		t.Errorf("ordering_outbox_events_published_total = %q, want 2", got)
	}
	if got := telemetrytest.Sample(metrics, "ordering_outbox_events_waiting", nil); got != "0" {
		t.Errorf("ordering_outbox_events_waiting = %q, want 0", got)
	}
}

// Ordering starts, answers ready and takes orders while Kafka is down;
// their events wait in the outbox and reach the topic, each once, when
// the broker is back. So again in a second outage, with the relay
// running. Each outage is logged once, however many tries it costs.
func TestOrdersGoOnWhileKafkaIsDown(t *testing.T) {
	ctx := context.Background()
	deps := orderingtest.StartDeps(t, nil)
	dir := filepath.Join(t.TempDir(), "kafka")
	broker := kafkatest.Embedded(t, embedded.Options{DataDir: dir})
	_, portText, err := net.SplitHostPort(broker.Addrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(portText)
	deps.Kafka = kafkatest.Cluster{Config: kafka.Config{Brokers: broker.Addrs(), Partitions: 3, ReplicationFactor: 1}}
	broker.Close()

	cfg := deps.Config(t)
	r := startReplica(t, cfg)
	if code, body := httpservertest.Get(t, r.url+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with Kafka down = %d %s, want 200", code, body)
	}
	gateway := orderingtest.Client(r.url, internalauth.Gateway)
	account := uuid.NewString()
	deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 100_000, "t")
	placed := 0
	placeOrders := func(n int) {
		t.Helper()
		for range n {
			ref := ""
			if placed%2 == 1 {
				ref = "sandbox:provider_error"
			}
			res, err := gateway.CreateOrder(ctx, order(account, "k"+strconv.Itoa(placed), ref))
			if err != nil || res.GetOrder().GetStatus() == orderingv1.OrderStatus_ORDER_STATUS_PENDING {
				t.Fatalf("CreateOrder with Kafka down = %v, %v; want it finished", res, err)
			}
			placed++
		}
	}
	db := openDB(t, cfg)
	checkWaiting := func(want int) {
		t.Helper()
		waiting := 0
		for _, row := range readOutbox(t, db) {
			if !row.Sent {
				waiting++
			}
		}
		if waiting != want {
			t.Fatalf("%d events waiting while Kafka is down, want %d", waiting, want)
		}
	}

	placeOrders(4)
	checkWaiting(4)
	// Several tries, one warning.
	waitForLog(t, r.logs, "order events still cannot be published", 2)
	broker = kafkatest.Embedded(t, embedded.Options{Port: port, DataDir: dir})
	checkEachPublishedOnce(t, deps, waitAllSent(t, db, 4))
	waitForLog(t, r.logs, "order events are published again", 1)

	broker.Close()
	placeOrders(4)
	checkWaiting(4)
	// Restarted only once the relay has met the outage: a shorter one is
	// covered by the writer's own retries and never seen here.
	waitForLog(t, r.logs, "order events cannot be published", 2)
	kafkatest.Embedded(t, embedded.Options{Port: port, DataDir: dir})
	checkEachPublishedOnce(t, deps, waitAllSent(t, db, 8))
	waitForLog(t, r.logs, "order events are published again", 2)

	logs := r.logs.String()
	if n := strings.Count(logs, "order events cannot be published"); n != 2 {
		t.Errorf("the outages are logged %d times, want once each (2):\n%s", n, logs)
	}
}

// waitForLog polls the log until msg appears in it n times, or fails the
// test after a deadline.
func waitForLog(t *testing.T, logs *telemetrytest.LogBuffer, msg string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(logs.String(), msg) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%q is in the log %d times after 30 s, want %d:\n%s", msg, strings.Count(logs.String(), msg), n, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Two replicas relay from one database at once, each polling all the
// time: every event reaches the topic, none twice.
func TestTwoReplicasPublishEachEventOnce(t *testing.T) {
	ctx := context.Background()
	deps := orderingtest.StartDeps(t, nil)
	cfg := deps.Config(t)
	// Both relays race for every row, not only for their own orders'.
	cfg.RelayInterval = 2 * time.Millisecond
	gateways := []orderingv1.Ordering{
		orderingtest.Client(startReplica(t, cfg).url, internalauth.Gateway),
		orderingtest.Client(startReplica(t, cfg).url, internalauth.Gateway),
	}
	account := uuid.NewString()
	deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 1_000_000, "t")

	const orders = 30
	var wg sync.WaitGroup
	for i := range orders {
		wg.Go(func() {
			ref := ""
			if i%3 == 0 {
				ref = "sandbox:provider_error"
			}
			if _, err := gateways[i%2].CreateOrder(ctx, order(account, "k"+strconv.Itoa(i), ref)); err != nil {
				t.Errorf("CreateOrder %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	checkEachPublishedOnce(t, deps, waitAllSent(t, openDB(t, cfg), orders))
}

// The events published longer than OUTBOX_RETENTION ago are deleted, and
// only those: River's cleaner does it on the leader, at its start, then
// every 30 s.
func TestRelayDeletesEventsPastTheirRetention(t *testing.T) {
	ctx := context.Background()
	deps := orderingtest.StartDeps(t, nil)
	cfg := deps.Config(t)
	gateway := orderingtest.Client(startReplica(t, cfg).url, internalauth.Gateway)
	account := uuid.NewString()
	deps.TopUp(t, account, accountsv1.Environment_ENVIRONMENT_SANDBOX, "USD", 10_000, "t")
	for _, key := range []string{"old", "recent"} {
		if _, err := gateway.CreateOrder(ctx, order(account, key, "")); err != nil {
			t.Fatal(err)
		}
	}
	db := openDB(t, cfg)
	rows := waitAllSent(t, db, 2)
	if _, err := db.Exec(ctx, "UPDATE river_job SET finalized_at = now() - $2 * interval '1 second' WHERE args->>'event_id' = $1",
		rows[0].EventID, (cfg.OutboxRetention + time.Hour).Seconds()); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(45 * time.Second)
	for {
		left := readOutbox(t, db)
		if len(left) == 1 {
			if left[0].EventID != rows[1].EventID {
				t.Errorf("the retention deleted %s, kept %s; want the other way round", rows[1].EventID, rows[0].EventID)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 45 s the outbox holds %+v; want the old event deleted", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
