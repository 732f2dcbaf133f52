package postgres_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/esimplatform/esim/libs/postgres/pgtest"
	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/postgres"
)

// newStore is a Store over a fresh database with River's tables and
// ours, as the service opens it, capping each scope at rules.MaxPerScope.
func newStore(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool, err := postgres.Open(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := postgres.NewStore(pool, rules.MaxPerScope)
	if err != nil {
		t.Fatal(err)
	}
	return st, pool
}

func TestMigrationsAreReversible(t *testing.T) {
	pgtest.CheckMigrationsReversible(t, postgres.Migrations)
}

var now = time.Now().UTC().Truncate(time.Microsecond)

func scope() webhook.Scope {
	return webhook.Scope{AccountID: uuid.New(), Environment: webhook.Sandbox}
}

func eventID() string {
	id := uuid.New()
	return "evt_" + hex.EncodeToString(id[:])
}

func newEvent(s webhook.Scope) webhook.NewEvent {
	return webhook.NewEvent{
		ID: eventID(), Type: webhook.OrderCompleted, Scope: s, OrderID: uuid.New(), CreatedAt: now,
		Payload: []byte(`{"id":"x"}`), Trace: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}
}

func setEndpoint(t *testing.T, st *postgres.Store, s webhook.Scope, url string) webhook.SealedEndpoint {
	t.Helper()
	e, err := st.SetEndpoint(context.Background(), s, url, []byte("sealed-"+url), now)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func add(t *testing.T, st *postgres.Store, e webhook.NewEvent) {
	t.Helper()
	if added, err := st.AddEvent(context.Background(), e); err != nil || !added {
		t.Fatalf("AddEvent = %v, %v", added, err)
	}
}

var rules = webhook.AttemptRules{MaxPerScope: 2, Interrupted: webhook.Interrupted}

func start(t *testing.T, st *postgres.Store, eventID string) webhook.Job {
	t.Helper()
	j, err := st.StartAttempt(context.Background(), eventID, rules)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// job is the River job of an event's delivery.
type job struct {
	queue    string
	priority int
	count    int
}

func jobOf(t *testing.T, pool *pgxpool.Pool, eventID string) job {
	t.Helper()
	var j job
	err := pool.QueryRow(context.Background(), `SELECT min(queue), min(priority), count(*) FROM river_job WHERE kind = 'webhook_delivery' AND args->>'event_id' = $1`, eventID).Scan(&j.queue, &j.priority, &j.count)
	if err != nil && j.count != 0 {
		t.Fatal(err)
	}
	return j
}

// The first SetEndpoint makes the scope's secret; later ones change the
// URL and keep it.
func TestSetEndpointKeepsTheFirstSecret(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	s := scope()
	var wg sync.WaitGroup
	results := make([]webhook.SealedEndpoint, 8)
	for i := range results {
		wg.Go(func() {
			e, err := st.SetEndpoint(ctx, s, fmt.Sprintf("https://example.com/%d", i), []byte(fmt.Sprint("secret ", i)), now)
			if err != nil {
				t.Error(err)
			}
			results[i] = e
		})
	}
	wg.Wait()
	for _, r := range results[1:] {
		if string(r.Secret) != string(results[0].Secret) {
			t.Fatalf("concurrent first calls left secrets %q and %q", r.Secret, results[0].Secret)
		}
	}
	got, err := st.Endpoint(ctx, s)
	if err != nil || string(got.Secret) != string(results[0].Secret) {
		t.Errorf("Endpoint = %+v, %v", got, err)
	}
	if _, err := st.Endpoint(ctx, scope()); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("Endpoint of another scope: %v, want ErrNotFound", err)
	}
	if _, err := st.RotateSecret(ctx, scope(), []byte("x"), now, now); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("RotateSecret of another scope: %v, want ErrNotFound", err)
	}
}

// An event is stored once per id; its delivery goes to the URL of the
// moment it was stored, and an event without an endpoint gets none.
func TestAddEventOnceWithTheURLOfTheMoment(t *testing.T) {
	ctx := context.Background()
	st, pool := newStore(t)
	withURL, without := scope(), scope()
	setEndpoint(t, st, withURL, "https://old.example.com/hooks")
	e := newEvent(withURL)
	add(t, st, e)
	setEndpoint(t, st, withURL, "https://new.example.com/hooks")
	if added, err := st.AddEvent(ctx, e); added || err != nil {
		t.Errorf("AddEvent of a stored id = %v, %v; want false", added, err)
	}
	lost := newEvent(without)
	add(t, st, lost)

	got, err := st.Event(ctx, &withURL, e.ID)
	if err != nil || got.Status != webhook.StatusPending || got.URL != "https://old.example.com/hooks" || string(got.Payload) != string(e.Payload) || got.OrderID != e.OrderID {
		t.Errorf("Event = %+v, %v; want pending to the old URL", got, err)
	}
	got, err = st.Event(ctx, nil, lost.ID)
	if err != nil || got.Status != webhook.StatusNoEndpoint || got.URL != "" {
		t.Errorf("event without an endpoint = %+v, %v; want no_endpoint", got, err)
	}
	if _, err := st.Event(ctx, &without, e.ID); !errors.Is(err, webhook.ErrNotFound) {
		t.Errorf("Event of another scope: %v, want ErrNotFound", err)
	}
	var jobs int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job").Scan(&jobs); err != nil || jobs != 1 {
		t.Errorf("%d delivery jobs (%v), want 1", jobs, err)
	}
	if j := jobOf(t, pool, e.ID); j.count != 1 || j.queue != "webhook_sandbox" || j.priority != 1 {
		t.Errorf("the event's job: %+v; want one in webhook_sandbox, priority 1", j)
	}
	j := start(t, st, e.ID)
	if j.EventID != e.ID || j.URL != "https://old.example.com/hooks" || j.Attempt != 1 || j.Trace["traceparent"] != e.Trace["traceparent"] || string(j.Secret) != "sealed-https://old.example.com/hooks" {
		t.Errorf("StartAttempt = %+v", j)
	}
	if _, err := st.StartAttempt(ctx, lost.ID, rules); !errors.Is(err, webhook.ErrDeliveryOver) {
		t.Errorf("StartAttempt of an event without an endpoint: %v, want ErrDeliveryOver", err)
	}
}

// However many runs start at once, a scope never has more than
// MaxPerScope attempts in flight, and other scopes' attempts go past it.
func TestStartAttemptCapsAttemptsInFlightPerScope(t *testing.T) {
	st, _ := newStore(t)
	busy, other := scope(), scope()
	setEndpoint(t, st, busy, "https://busy.example.com/")
	setEndpoint(t, st, other, "https://other.example.com/")
	var ids []string
	for range 10 {
		e := newEvent(busy)
		add(t, st, e)
		ids = append(ids, e.ID)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var started []webhook.Job
	for _, id := range ids[:8] {
		wg.Go(func() {
			j, err := st.StartAttempt(context.Background(), id, rules)
			switch {
			case errors.Is(err, webhook.ErrScopeFull):
			case err != nil:
				t.Error(err)
			default:
				mu.Lock()
				started = append(started, j)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Starts of one scope queue on its endpoint's lock, so the cap
	// holds exactly.
	if len(started) != rules.MaxPerScope {
		t.Fatalf("%d attempts of one scope started at once, want %d", len(started), rules.MaxPerScope)
	}
	if _, err := st.StartAttempt(context.Background(), ids[9], rules); !errors.Is(err, webhook.ErrScopeFull) {
		t.Errorf("a start past the cap: %v, want ErrScopeFull", err)
	}
	theirs := newEvent(other)
	add(t, st, theirs)
	if j := start(t, st, theirs.ID); j.Scope != other {
		t.Errorf("StartAttempt = %+v; want the other scope's attempt", j)
	}
	// A finished attempt makes room.
	if err := st.Finish(context.Background(), started[0], webhook.Result{StatusCode: 200}, webhook.StatusDelivered); err != nil {
		t.Fatal(err)
	}
	if j := start(t, st, ids[9]); j.Scope != busy {
		t.Errorf("after one finished: StartAttempt = %+v; want the busy scope's next attempt", j)
	}
}

// Jobs go to their environment's queue, and are ranked fairly: the
// events of a scope with more pending than its cap (a backlog) go behind
// those of scopes without one, however much older they are.
func TestDeliveryJobsAreRankedFairly(t *testing.T) {
	st, pool := newStore(t)
	busy, idle := scope(), scope()
	live := webhook.Scope{AccountID: idle.AccountID, Environment: webhook.Live}
	for _, s := range []webhook.Scope{busy, idle, live} {
		setEndpoint(t, st, s, "https://"+s.AccountID.String()+".example.com/")
	}
	var flood []string
	for range rules.MaxPerScope + 3 {
		e := newEvent(busy)
		add(t, st, e)
		flood = append(flood, e.ID)
	}
	theirs, liveEvent := newEvent(idle), newEvent(live)
	add(t, st, theirs)
	add(t, st, liveEvent)
	for i, id := range flood {
		want := 1
		if i >= rules.MaxPerScope {
			want = 3
		}
		if j := jobOf(t, pool, id); j.queue != "webhook_sandbox" || j.priority != want {
			t.Errorf("flood event %d: %+v; want webhook_sandbox, priority %d", i, j, want)
		}
	}
	if j := jobOf(t, pool, theirs.ID); j.queue != "webhook_sandbox" || j.priority != 1 {
		t.Errorf("another scope's event behind the flood: %+v; want priority 1", j)
	}
	if j := jobOf(t, pool, liveEvent.ID); j.queue != "webhook_live" || j.priority != 1 {
		t.Errorf("a live event: %+v; want webhook_live, priority 1", j)
	}
}

// A retry leaves the event pending; a delivered or failed one is final,
// and an attempt is finished once.
func TestFinishMovesTheJobOn(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	s := scope()
	setEndpoint(t, st, s, "https://example.com/")
	e := newEvent(s)
	add(t, st, e)
	j := start(t, st, e.ID)
	if err := st.Finish(ctx, j, webhook.Result{StatusCode: 500, Error: "status 500", ResponseBody: []byte("no"), Duration: 1500 * time.Millisecond}, webhook.StatusPending); err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(ctx, j, webhook.Result{StatusCode: 200}, webhook.StatusDelivered); !errors.Is(err, webhook.ErrLeaseLost) {
		t.Errorf("finishing the attempt twice: %v, want ErrLeaseLost", err)
	}
	got, _ := st.Event(ctx, &s, e.ID)
	a := got.Attempts[0]
	if got.Status != webhook.StatusPending || !a.Finished || a.Error != "status 500" || a.Duration != 1500*time.Millisecond || string(a.ResponseBody) != "no" || a.StartedAt.IsZero() {
		t.Errorf("event waiting for its retry = %+v", got)
	}
	if again := start(t, st, e.ID); again.Attempt != 2 {
		t.Errorf("the retry is attempt %d, want 2", again.Attempt)
	}

	e2 := newEvent(s)
	add(t, st, e2)
	j2 := start(t, st, e2.ID)
	if err := st.Finish(ctx, j2, webhook.Result{StatusCode: 204, ResponseBody: make([]byte, 2000)}, webhook.StatusDelivered); err != nil {
		t.Fatal(err)
	}
	got, err := st.Event(ctx, &s, e2.ID)
	if err != nil || got.Status != webhook.StatusDelivered || len(got.Attempts) != 1 || got.Attempts[0].StatusCode != 204 || len(got.Attempts[0].ResponseBody) != webhook.ResponseBodyLimit {
		t.Errorf("delivered event = %+v, %v", got, err)
	}
	if _, err := st.StartAttempt(ctx, e2.ID, rules); !errors.Is(err, webhook.ErrDeliveryOver) {
		t.Errorf("StartAttempt of a delivered event: %v, want ErrDeliveryOver", err)
	}
}

// A replica that dies mid-attempt leaves its attempt unfinished: the next
// run of the job (River rescues it) records that attempt as interrupted
// and makes the next, and after an interrupted third attempt the event is
// failed, never sent a fourth time. A result that comes after the attempt
// was taken over changes nothing.
func TestARunAfterACrashInterruptsItsAttempt(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	s := scope()
	setEndpoint(t, st, s, "https://example.com/")
	e := newEvent(s)
	add(t, st, e)

	var jobs []webhook.Job
	for attempt := 1; attempt <= 3; attempt++ {
		j := start(t, st, e.ID)
		if j.Attempt != attempt {
			t.Fatalf("run %d is attempt %d", attempt, j.Attempt)
		}
		jobs = append(jobs, j)
	}
	if err := st.Finish(ctx, jobs[0], webhook.Result{StatusCode: 200}, webhook.StatusDelivered); !errors.Is(err, webhook.ErrLeaseLost) {
		t.Errorf("the first attempt's late result: %v, want ErrLeaseLost", err)
	}
	if _, err := st.StartAttempt(ctx, e.ID, rules); !errors.Is(err, webhook.ErrDeliveryOver) {
		t.Fatalf("a fourth run: %v, want ErrDeliveryOver", err)
	}
	got, err := st.Event(ctx, &s, e.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != webhook.StatusFailed || len(got.Attempts) != 3 {
		t.Fatalf("event %s with %d attempts, want failed with 3", got.Status, len(got.Attempts))
	}
	for _, a := range got.Attempts {
		if !a.Finished || a.Error != webhook.Interrupted || a.StatusCode != 0 {
			t.Errorf("attempt %+v: want finished as interrupted", a)
		}
	}
}

func TestListEvents(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	a, b := scope(), scope()
	aLive := webhook.Scope{AccountID: a.AccountID, Environment: webhook.Live}
	setEndpoint(t, st, a, "https://a.example.com/")
	var ids []string
	for i := range 5 {
		e := newEvent(a)
		e.CreatedAt = now.Add(time.Duration(i) * time.Second)
		if i == 4 {
			e.Type, e.OrderID = webhook.Ping, uuid.Nil
		}
		add(t, st, e)
		ids = append(ids, e.ID)
	}
	theOrder := newEvent(b)
	add(t, st, theOrder)
	add(t, st, newEvent(aLive))

	list := func(f webhook.EventFilter, limit int32, offset int64) ([]string, int64) {
		t.Helper()
		events, total, err := st.ListEvents(ctx, f, limit, offset)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range events {
			got = append(got, e.ID)
		}
		return got, total
	}
	if got, total := list(webhook.EventFilter{Scope: &a}, 2, 0); total != 5 || fmt.Sprint(got) != fmt.Sprint([]string{ids[4], ids[3]}) {
		t.Errorf("first page = %v of %d; want the newest two of 5", got, total)
	}
	if got, _ := list(webhook.EventFilter{Scope: &a}, 2, 4); fmt.Sprint(got) != fmt.Sprint([]string{ids[0]}) {
		t.Errorf("last page = %v; want the oldest", got)
	}
	if got, total := list(webhook.EventFilter{Scope: &a, Type: webhook.Ping}, 10, 0); total != 1 || got[0] != ids[4] {
		t.Errorf("pings = %v", got)
	}
	if _, total := list(webhook.EventFilter{Scope: &a, Status: webhook.StatusNoEndpoint}, 10, 0); total != 0 {
		t.Errorf("%d events of a without an endpoint, want 0", total)
	}
	if got, total := list(webhook.EventFilter{Scope: &b, Status: webhook.StatusNoEndpoint}, 10, 0); total != 1 || got[0] != theOrder.ID {
		t.Errorf("b's events without an endpoint = %v", got)
	}
	if _, total := list(webhook.EventFilter{Scope: &a, OrderID: theOrder.OrderID}, 10, 0); total != 0 {
		t.Errorf("a's events of b's order: %d, want none", total)
	}
	if got, total := list(webhook.EventFilter{OrderID: theOrder.OrderID}, 10, 0); total != 1 || got[0] != theOrder.ID {
		t.Errorf("every scope's events of b's order = %v", got)
	}
	if _, total := list(webhook.EventFilter{}, 10, 0); total != 7 {
		t.Errorf("every scope's events: %d, want 7", total)
	}
	if _, _, err := st.ListEvents(ctx, webhook.EventFilter{}, 0, 0); err == nil {
		t.Error("a page of 0 rows was read")
	}
}

// Every type partners receive is stored (the schema's list is
// limits.EventTypes), and listed by its type; an eSIM's and a top-up's
// events under the eSIM's order, with the order's own.
func TestEveryEventTypeIsStoredAndListed(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	s := scope()
	setEndpoint(t, st, s, "https://a.example.com/")
	orderID := uuid.New()
	ids := map[webhook.EventType]string{}
	for _, typ := range webhook.EventTypes {
		e := newEvent(s)
		e.Type, e.OrderID = typ, orderID
		if typ == webhook.Ping {
			e.OrderID = uuid.Nil
		}
		add(t, st, e)
		ids[typ] = e.ID
	}
	for _, typ := range webhook.EventTypes {
		events, total, err := st.ListEvents(ctx, webhook.EventFilter{Scope: &s, Type: typ}, 10, 0)
		if err != nil || total != 1 || events[0].ID != ids[typ] || events[0].Type != typ || events[0].Status != webhook.StatusPending {
			t.Errorf("events of type %s = %+v of %d, %v; want %s alone, pending", typ, events, total, err, ids[typ])
		}
	}
	if _, total, err := st.ListEvents(ctx, webhook.EventFilter{OrderID: orderID}, 100, 0); err != nil || total != int64(len(webhook.EventTypes)-1) {
		t.Errorf("the order's events: %d, %v; want all %d but the ping", total, err, len(webhook.EventTypes)-1)
	}
}

// AddEvents stores a batch as AddEvent would each of its events, in one
// transaction: an id stored before or twice in the batch is stored once,
// an event without an endpoint gets no job, and a scope's events past
// its cap (its pending ones before the batch counted) are backlogged.
func TestAddEventsAsAddEventWould(t *testing.T) {
	ctx := context.Background()
	st, pool := newStore(t)
	busy, without := scope(), scope()
	setEndpoint(t, st, busy, "https://busy.example.com/")
	before := newEvent(busy)
	add(t, st, before)
	fresh := []webhook.NewEvent{newEvent(busy), newEvent(busy), newEvent(without)}
	batch := []webhook.NewEvent{fresh[0], before, fresh[1], fresh[0], fresh[2]}
	added, err := st.AddEvents(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, true, false, true}; fmt.Sprint(added) != fmt.Sprint(want) {
		t.Errorf("AddEvents = %v, want %v", added, want)
	}
	// rules.MaxPerScope is 2: before is the first pending, fresh[0] the
	// second, fresh[1] the third, past the cap.
	for _, c := range []struct {
		id       string
		priority int
	}{{before.ID, 1}, {fresh[0].ID, 1}, {fresh[1].ID, 3}} {
		if j := jobOf(t, pool, c.id); j.count != 1 || j.queue != "webhook_sandbox" || j.priority != c.priority {
			t.Errorf("the job of %s: %+v; want one in webhook_sandbox, priority %d", c.id, j, c.priority)
		}
	}
	if j := jobOf(t, pool, fresh[2].ID); j.count != 0 {
		t.Errorf("an event without an endpoint has %d jobs, want none", j.count)
	}
	got, err := st.Event(ctx, &busy, fresh[1].ID)
	if err != nil || got.Status != webhook.StatusPending || got.URL != "https://busy.example.com/" || string(got.Payload) != string(fresh[1].Payload) || got.OrderID != fresh[1].OrderID {
		t.Errorf("Event = %+v, %v; want pending to the endpoint", got, err)
	}
	if j := start(t, st, fresh[0].ID); j.Trace["traceparent"] != fresh[0].Trace["traceparent"] {
		t.Errorf("the stored trace context: %v, want %v", j.Trace, fresh[0].Trace)
	}
	if added, err := st.AddEvents(ctx, nil); err != nil || len(added) != 0 {
		t.Errorf("AddEvents of none = %v, %v", added, err)
	}
}
