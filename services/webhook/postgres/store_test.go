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

func newStore(t *testing.T) (*postgres.Store, *pgxpool.Pool) {
	t.Helper()
	pool := pgtest.New(t, postgres.Migrations)
	return postgres.NewStore(pool), pool
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

var rules = webhook.ClaimRules{Environment: webhook.Sandbox, MaxPerScope: 2, Lease: time.Minute, Interrupted: webhook.Interrupted}

func claim(t *testing.T, st *postgres.Store, r webhook.ClaimRules) (webhook.Job, bool) {
	t.Helper()
	j, found, err := st.Claim(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return j, found
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
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM deliveries").Scan(&jobs); err != nil || jobs != 1 {
		t.Errorf("%d delivery jobs (%v), want 1", jobs, err)
	}
	j, found := claim(t, st, rules)
	if !found || j.EventID != e.ID || j.URL != "https://old.example.com/hooks" || j.Attempt != 1 || j.Trace["traceparent"] != e.Trace["traceparent"] || string(j.Secret) != "sealed-https://old.example.com/hooks" {
		t.Errorf("Claim = %+v, %v", j, found)
	}
	if _, found := claim(t, st, rules); found {
		t.Error("the one job was claimed twice")
	}
}

// However many workers claim at once, a scope never has more than
// MaxPerScope attempts in flight, and other scopes' jobs go past it.
func TestClaimCapsAttemptsInFlightPerScope(t *testing.T) {
	st, _ := newStore(t)
	busy, other := scope(), scope()
	setEndpoint(t, st, busy, "https://busy.example.com/")
	setEndpoint(t, st, other, "https://other.example.com/")
	for range 10 {
		add(t, st, newEvent(busy))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var claimed []webhook.Job
	for range 8 {
		wg.Go(func() {
			j, found, err := st.Claim(context.Background(), rules)
			if err != nil {
				t.Error(err)
			}
			if found {
				mu.Lock()
				claimed = append(claimed, j)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Racing claimers skip a scope another is claiming from (SKIP
	// LOCKED), so fewer may win than the cap allows, never more; claims
	// one after the other then fill it exactly.
	if len(claimed) < 1 || len(claimed) > rules.MaxPerScope {
		t.Fatalf("%d jobs of one scope claimed at once, want 1 to %d", len(claimed), rules.MaxPerScope)
	}
	for {
		j, found := claim(t, st, rules)
		if !found {
			break
		}
		claimed = append(claimed, j)
	}
	if len(claimed) != rules.MaxPerScope {
		t.Fatalf("%d jobs of one scope in flight, want %d", len(claimed), rules.MaxPerScope)
	}
	add(t, st, newEvent(other))
	if j, found := claim(t, st, rules); !found || j.Scope != other {
		t.Errorf("Claim = %+v, %v; want the other scope's job", j, found)
	}
	// A finished attempt makes room.
	if err := st.Finish(context.Background(), claimed[0], webhook.Result{StatusCode: 200}, webhook.StatusDelivered, 0); err != nil {
		t.Fatal(err)
	}
	if j, found := claim(t, st, rules); !found || j.Scope != busy {
		t.Errorf("after one finished: Claim = %+v, %v; want the busy scope's next job", j, found)
	}
}

// A claim takes its environment's jobs only, and of those the fairest:
// a scope with nothing in flight before one being served, however much
// older the served one's job, and a first attempt before a retry.
func TestClaimIsFair(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	roomy := rules
	roomy.MaxPerScope = 4
	busy, idle := scope(), scope()
	live := webhook.Scope{AccountID: idle.AccountID, Environment: webhook.Live}
	for _, s := range []webhook.Scope{busy, idle, live} {
		setEndpoint(t, st, s, "https://"+s.AccountID.String()+".example.com/")
	}
	liveEvent := newEvent(live)
	add(t, st, liveEvent)
	first, second := newEvent(busy), newEvent(busy)
	add(t, st, first)
	add(t, st, second)
	theirs := newEvent(idle)
	add(t, st, theirs)

	want := func(what string, r webhook.ClaimRules, id string, attempt int) webhook.Job {
		t.Helper()
		j, found := claim(t, st, r)
		if !found || j.EventID != id || j.Attempt != attempt {
			t.Fatalf("%s: claimed %s attempt %d (found %v); want %s attempt %d", what, j.EventID, j.Attempt, found, id, attempt)
		}
		return j
	}
	busyFirst := want("the oldest job", roomy, first.ID, 1)
	want("with the busy scope served", roomy, theirs.ID, 1)
	busyAgain := want("with both served once", roomy, second.ID, 1)
	if _, found := claim(t, st, roomy); found {
		t.Fatal("a sandbox claim took a live job")
	}
	liveRules := roomy
	liveRules.Environment = webhook.Live
	want("a live claim", liveRules, liveEvent.ID, 1)

	// busy's first job is delivered and its second fails, due again at
	// once: busy has nothing in flight, as a newer scope, whose first
	// attempt comes before that retry.
	if err := st.Finish(ctx, busyFirst, webhook.Result{StatusCode: 200}, webhook.StatusDelivered, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(ctx, busyAgain, webhook.Result{StatusCode: 500, Error: "status 500"}, webhook.StatusPending, 0); err != nil {
		t.Fatal(err)
	}
	newer := scope()
	setEndpoint(t, st, newer, "https://newer.example.com/")
	fresh := newEvent(newer)
	add(t, st, fresh)
	want("a retry against a first attempt", roomy, fresh.ID, 1)
	want("the retry", roomy, second.ID, 2)
}

// A retry is due after its delay; a delivered or failed job is gone.
func TestFinishMovesTheJobOn(t *testing.T) {
	ctx := context.Background()
	st, _ := newStore(t)
	s := scope()
	setEndpoint(t, st, s, "https://example.com/")
	e := newEvent(s)
	add(t, st, e)
	j, _ := claim(t, st, rules)
	if err := st.Finish(ctx, j, webhook.Result{StatusCode: 500, Error: "status 500", ResponseBody: []byte("no"), Duration: 1500 * time.Millisecond}, webhook.StatusPending, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, found := claim(t, st, rules); found {
		t.Error("a retry due in an hour was claimed at once")
	}
	if err := st.Finish(ctx, j, webhook.Result{StatusCode: 200}, webhook.StatusDelivered, 0); !errors.Is(err, webhook.ErrLeaseLost) {
		t.Errorf("finishing the attempt twice: %v, want ErrLeaseLost", err)
	}

	e2 := newEvent(s)
	add(t, st, e2)
	j2, _ := claim(t, st, rules)
	if err := st.Finish(ctx, j2, webhook.Result{StatusCode: 204, ResponseBody: make([]byte, 2000)}, webhook.StatusDelivered, 0); err != nil {
		t.Fatal(err)
	}
	got, err := st.Event(ctx, &s, e2.ID)
	if err != nil || got.Status != webhook.StatusDelivered || len(got.Attempts) != 1 || got.Attempts[0].StatusCode != 204 || len(got.Attempts[0].ResponseBody) != webhook.ResponseBodyLimit {
		t.Errorf("delivered event = %+v, %v", got, err)
	}
	got, _ = st.Event(ctx, &s, e.ID)
	a := got.Attempts[0]
	if got.Status != webhook.StatusPending || !a.Finished || a.Error != "status 500" || a.Duration != 1500*time.Millisecond || string(a.ResponseBody) != "no" || a.StartedAt.IsZero() {
		t.Errorf("event waiting for its retry = %+v", got)
	}
}

// A replica that dies mid-attempt leaves its lease to run out: the next
// claim records that attempt as interrupted and makes the next, and after
// an interrupted third attempt the event is failed, never sent a fourth
// time. A result that comes after the lease ran out changes nothing.
func TestAnExpiredLeaseInterruptsItsAttempt(t *testing.T) {
	ctx := context.Background()
	st, pool := newStore(t)
	s := scope()
	setEndpoint(t, st, s, "https://example.com/")
	e := newEvent(s)
	add(t, st, e)
	short := rules
	short.Lease = 50 * time.Millisecond

	var jobs []webhook.Job
	for attempt := 1; attempt <= 3; attempt++ {
		j := claimWithin(t, st, short, 5*time.Second)
		if j.Attempt != attempt {
			t.Fatalf("claim %d is attempt %d", attempt, j.Attempt)
		}
		jobs = append(jobs, j)
	}
	if err := st.Finish(ctx, jobs[0], webhook.Result{StatusCode: 200}, webhook.StatusDelivered, 0); !errors.Is(err, webhook.ErrLeaseLost) {
		t.Errorf("the first attempt's late result: %v, want ErrLeaseLost", err)
	}
	// The third lease runs out too: the claim that notices fails the
	// event and finds nothing to send.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, found := claim(t, st, short); found {
			t.Fatal("a fourth attempt was claimed")
		}
		got, err := st.Event(ctx, &s, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == webhook.StatusFailed {
			if len(got.Attempts) != 3 {
				t.Fatalf("%d attempts, want 3", len(got.Attempts))
			}
			for _, a := range got.Attempts {
				if !a.Finished || a.Error != webhook.Interrupted || a.StatusCode != 0 {
					t.Errorf("attempt %+v: want finished as interrupted", a)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("event is %s after the third lease ran out", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var jobsLeft int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM deliveries").Scan(&jobsLeft); err != nil || jobsLeft != 0 {
		t.Errorf("%d jobs left (%v), want none", jobsLeft, err)
	}
}

// claimWithin claims until a job is found, a lease running out.
func claimWithin(t *testing.T, st *postgres.Store, r webhook.ClaimRules, within time.Duration) webhook.Job {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if j, found := claim(t, st, r); found {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing to claim after %s", within)
		}
		time.Sleep(10 * time.Millisecond)
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
