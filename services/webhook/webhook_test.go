package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	. "github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/aesgcm"
)

// The test vector published with the Standard Webhooks specification.
func TestSignMatchesTheStandardWebhooksTestVector(t *testing.T) {
	got, err := Sign([]string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; err != nil || got != want {
		t.Errorf("Sign = %q, %v; want %q", got, err, want)
	}
}

// Two secrets sign side by side, space-separated, each verifiable alone
// by the public library.
func TestSignWithTwoSecrets(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	body := []byte(`{"id":"evt_1"}`)
	now := time.Now().Unix()
	sig, err := Sign([]string{a, b}, "evt_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	if parts := strings.Split(sig, " "); len(parts) != 2 || !strings.HasPrefix(parts[0], "v1,") || !strings.HasPrefix(parts[1], "v1,") {
		t.Fatalf("signature %q: want two v1 signatures, space-separated", sig)
	}
	h := http.Header{}
	h.Set("webhook-id", "evt_1")
	h.Set("webhook-timestamp", strconv.FormatInt(now, 10))
	h.Set("webhook-signature", sig)
	for _, secret := range []string{a, b} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("the library refuses a signature by one of the two secrets: %v", err)
		}
	}
	wh, _ := standardwebhooks.NewWebhook(NewSecret())
	if err := wh.Verify(body, h); err == nil {
		t.Error("the library accepts the delivery with a third secret")
	}
}

func TestNewSecretIsWhsecAnd32RandomBytes(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	if !strings.HasPrefix(a, "whsec_") || len(a) != len("whsec_")+44 {
		t.Errorf("secret %q: want whsec_ and 44 base64 characters", a)
	}
	if _, err := Sign([]string{"whsec_not base64!"}, "evt", 1, nil); err == nil || strings.Contains(err.Error(), "base64!") {
		t.Errorf("Sign with a malformed secret = %v; want an error that does not quote it", err)
	}
}

// fakeStore keeps endpoints and jobs in memory, for the rules the domain
// applies itself: the queue's own rules are the Postgres store's, tested
// there.
type fakeStore struct {
	mu        sync.Mutex
	endpoints map[Scope]SealedEndpoint
	events    []NewEvent
	// jobs are the pending deliveries by event id, at their last attempt.
	jobs     map[string]Job
	finished []finish
}

type finish struct {
	job    Job
	result Result
	next   Status
}

func newFakeStore() *fakeStore {
	return &fakeStore{endpoints: map[Scope]SealedEndpoint{}, jobs: map[string]Job{}}
}

func (f *fakeStore) SetEndpoint(_ context.Context, scope Scope, url string, secret []byte, now time.Time) (SealedEndpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.endpoints[scope]
	if !ok {
		e = SealedEndpoint{Scope: scope, Secret: secret, SecretCreatedAt: now}
	}
	e.URL, e.UpdatedAt = url, now
	f.endpoints[scope] = e
	return e, nil
}

func (f *fakeStore) Endpoint(_ context.Context, scope Scope) (SealedEndpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.endpoints[scope]
	if !ok {
		return SealedEndpoint{}, ErrNotFound
	}
	return e, nil
}

func (f *fakeStore) AnyEndpoint(ctx context.Context) (SealedEndpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.endpoints {
		return e, nil
	}
	return SealedEndpoint{}, ErrNotFound
}

func (f *fakeStore) RotateSecret(_ context.Context, scope Scope, secret []byte, now, expires time.Time) (SealedEndpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.endpoints[scope]
	if !ok {
		return SealedEndpoint{}, ErrNotFound
	}
	e.PreviousSecret, e.PreviousSecretExpiresAt = e.Secret, expires
	e.Secret, e.SecretCreatedAt, e.UpdatedAt = secret, now, now
	f.endpoints[scope] = e
	return e, nil
}

func (f *fakeStore) AddEvent(_ context.Context, e NewEvent) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, x := range f.events {
		if x.ID == e.ID {
			return false, nil
		}
	}
	f.events = append(f.events, e)
	if ep, ok := f.endpoints[e.Scope]; ok {
		f.jobs[e.ID] = Job{EventID: e.ID, Scope: e.Scope, URL: ep.URL, Payload: e.Payload, Trace: e.Trace}
	}
	return true, nil
}

func (f *fakeStore) AddEvents(ctx context.Context, es []NewEvent) ([]bool, error) {
	added := make([]bool, len(es))
	for i, e := range es {
		added[i], _ = f.AddEvent(ctx, e)
	}
	return added, nil
}

func (f *fakeStore) Event(_ context.Context, scope *Scope, id string) (Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		if e.ID == id && (scope == nil || *scope == e.Scope) {
			return Event{ID: e.ID, Type: e.Type, Scope: e.Scope, Payload: e.Payload, Status: StatusPending}, nil
		}
	}
	return Event{}, ErrNotFound
}

func (f *fakeStore) ListEvents(context.Context, EventFilter, int32, int64) ([]Event, int64, error) {
	return nil, 0, nil
}

// StartAttempt counts the event's next attempt and hands out its job
// with its scope's secrets as they are now.
func (f *fakeStore) StartAttempt(_ context.Context, eventID string, _ AttemptRules) (Job, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	j, ok := f.jobs[eventID]
	if !ok {
		return Job{}, ErrDeliveryOver
	}
	j.Attempt++
	f.jobs[eventID] = j
	e := f.endpoints[j.Scope]
	j.Secret, j.PreviousSecret, j.PreviousSecretExpiresAt = e.Secret, e.PreviousSecret, e.PreviousSecretExpiresAt
	return j, nil
}

func (f *fakeStore) Finish(_ context.Context, j Job, r Result, next Status) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finished = append(f.finished, finish{j, r, next})
	if next != StatusPending {
		delete(f.jobs, j.EventID)
	}
	return nil
}

// poster answers every request with answer(request) and keeps them.
type poster struct {
	mu       sync.Mutex
	requests []Request
	answer   func(context.Context, Request) Response
}

func (p *poster) Post(ctx context.Context, r Request) Response {
	p.mu.Lock()
	p.requests = append(p.requests, r)
	p.mu.Unlock()
	if p.answer == nil {
		return Response{StatusCode: 200}
	}
	return p.answer(ctx, r)
}

func newService(t *testing.T, answer func(context.Context, Request) Response) (*Service, *fakeStore, *poster) {
	t.Helper()
	key := make([]byte, aesgcm.KeySize)
	_, _ = rand.Read(key)
	sealer, err := aesgcm.New(key)
	if err != nil {
		t.Fatal(err)
	}
	store, p := newFakeStore(), &poster{answer: answer}
	svc := NewService(Deps{Store: store, Sealer: sealer, Poster: p, AttemptTimeout: 200 * time.Millisecond})
	return svc, store, p
}

func scope(env Environment) Scope { return Scope{AccountID: uuid.New(), Environment: env} }

func incoming(s Scope) IncomingEvent {
	return IncomingEvent{
		ID: "evt_" + strings.ReplaceAll(uuid.NewString(), "-", ""), Type: OrderCompleted, Scope: s, OrderID: uuid.New(),
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 6000, time.FixedZone("CET", 3600)),
		Data:      json.RawMessage(`{"id":"o-1","price":{"total":16.50}}`),
	}
}

func wantField(t *testing.T, what string, err error, field string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != field {
		t.Errorf("%s: err = %v, want a validation error on %s", what, err, field)
	}
}

// A rotated-out secret signs beside the new one for 24 hours, then no
// more; the endpoint shows its expiry only while it signs.
func TestRotatedSecretSignsFor24Hours(t *testing.T) {
	ctx := context.Background()
	svc, _, p := newService(t, nil)
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	svc.SetClock(func() time.Time { return now })
	s := scope(Live)
	first, err := svc.SetEndpoint(ctx, s, "https://partner.example.com/hooks")
	if err != nil {
		t.Fatal(err)
	}
	if !first.PreviousSecretExpiresAt.IsZero() {
		t.Errorf("a new endpoint shows a previous secret's expiry: %v", first.PreviousSecretExpiresAt)
	}
	if again, err := svc.SetEndpoint(ctx, s, "https://partner.example.com/v2"); err != nil || again.Secret != first.Secret || again.URL != "https://partner.example.com/v2" {
		t.Errorf("a second SetEndpoint = %+v, %v; want the new URL and the same secret", again, err)
	}
	rotated, err := svc.RotateSecret(ctx, s)
	if err != nil || rotated.Secret == first.Secret || !rotated.PreviousSecretExpiresAt.Equal(now.Add(24*time.Hour)) {
		t.Fatalf("RotateSecret = %+v, %v; want a new secret, the old one expiring in 24 h", rotated, err)
	}

	deliverAt := func(at time.Time) Request {
		t.Helper()
		now = at
		in := incoming(s)
		if _, err := svc.Ingest(ctx, in); err != nil {
			t.Fatal(err)
		}
		if out, err := svc.Deliver(ctx, in.ID); out.Attempt != 1 || err != nil {
			t.Fatalf("Deliver = %+v, %v", out, err)
		}
		return p.requests[len(p.requests)-1]
	}
	verifies := func(r Request, secret string) bool {
		h := http.Header{}
		h.Set("webhook-id", r.EventID)
		h.Set("webhook-timestamp", strconv.FormatInt(r.Timestamp, 10))
		h.Set("webhook-signature", r.Signature)
		wh, _ := standardwebhooks.NewWebhook(secret)
		// The clock is made up: the library's 5-minute window would
		// refuse its timestamps.
		return wh.VerifyIgnoringTimestamp(r.Body, h) == nil
	}

	during := deliverAt(now.Add(23*time.Hour + 59*time.Minute))
	if n := len(strings.Fields(during.Signature)); n != 2 || !verifies(during, rotated.Secret) || !verifies(during, first.Secret) {
		t.Errorf("within 24 h: %d signatures; want 2, one by each secret", n)
	}
	if during.Timestamp != now.Unix() {
		t.Errorf("webhook-timestamp %d, want the attempt's time %d", during.Timestamp, now.Unix())
	}
	if e, _ := svc.GetEndpoint(ctx, s); e.PreviousSecretExpiresAt.IsZero() {
		t.Error("within 24 h the endpoint does not show the previous secret's expiry")
	}

	after := deliverAt(now.Add(2 * time.Minute))
	if n := len(strings.Fields(after.Signature)); n != 1 || !verifies(after, rotated.Secret) || verifies(after, first.Secret) {
		t.Errorf("after 24 h: %d signatures, by the old secret %v; want 1, by the new one only", n, verifies(after, first.Secret))
	}
	if e, _ := svc.GetEndpoint(ctx, s); !e.PreviousSecretExpiresAt.IsZero() {
		t.Errorf("after 24 h the endpoint shows an expired previous secret: %v", e.PreviousSecretExpiresAt)
	}
}

func TestRotateOrTestWithoutEndpointIsNotFound(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t, nil)
	s := scope(Sandbox)
	if _, err := svc.RotateSecret(ctx, s); !errors.Is(err, ErrNotFound) {
		t.Errorf("RotateSecret without an endpoint: %v, want ErrNotFound", err)
	}
	if _, err := svc.SendTestEvent(ctx, s); !errors.Is(err, ErrNotFound) {
		t.Errorf("SendTestEvent without an endpoint: %v, want ErrNotFound", err)
	}
	if _, err := svc.GetEndpoint(ctx, s); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetEndpoint without an endpoint: %v, want ErrNotFound", err)
	}
	if len(store.events) != 0 {
		t.Errorf("events stored: %v", store.events)
	}
}

func TestEndpointURLs(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t, nil)
	long := "https://example.com/" + strings.Repeat("a", MaxURLLength-len("https://example.com/"))
	for _, tc := range []struct {
		env Environment
		url string
		ok  bool
	}{
		{Sandbox, "http://localhost:8080/hooks", true},
		{Sandbox, "https://partner.example.com/hooks?token=abc", true},
		{Live, "https://partner.example.com/hooks", true},
		{Live, "HTTPS://partner.example.com/hooks", true},
		{Live, long, true},
		{Live, long + "a", false},
		{Live, "http://partner.example.com/hooks", false},
		{Sandbox, "ftp://partner.example.com/hooks", false},
		{Sandbox, "https://user:pass@partner.example.com/hooks", false},
		{Sandbox, "https://user@partner.example.com/hooks", false},
		{Sandbox, "https://partner.example.com/hooks#frag", false},
		{Sandbox, "https://partner.example.com/hooks#", false},
		{Sandbox, "/hooks", false},
		{Sandbox, "partner.example.com/hooks", false},
		{Sandbox, "https:///hooks", false},
		{Sandbox, "https://:443/hooks", false},
		{Sandbox, "mailto:a@example.com", false},
		{Sandbox, "https://partner.example.com/a b", false},
		{Sandbox, "https://partner.example.com/\x00", false},
		{Sandbox, "https://bücher.example/", false},
		{Sandbox, "https://b%C3%BCcher.example/", false},
		{Sandbox, "https://xn--bcher-kva.example/", true},
		{Sandbox, "", false},
		{Sandbox, "http://127.0.0.1:9999/hooks", true},
		{Sandbox, "http://[::1]:9999/hooks", true},
		{Live, "https://partner.example.com:8443/hooks", true},
		{Live, "https://partner.example.com:0/hooks", false},
		{Live, "https://partner.example.com:65536/hooks", false},
		{Live, "https://partner.example.com:99999999999999999999/hooks", false},
		// Numbers read as IPv4 addresses by some and not by others.
		{Sandbox, "http://2130706433/hooks", false},
		{Sandbox, "http://0x7f000001/hooks", false},
		{Sandbox, "http://0x7f.1/hooks", false},
		{Sandbox, "http://127.1/hooks", false},
		{Sandbox, "http://0177.0.0.1/hooks", false},
		{Sandbox, "http://127.0.0.1./hooks", false},
		{Sandbox, "http://partner.0x1/hooks", false},
		{Live, "https://4.4/hooks", false},
		{Sandbox, "http://[fe80::1%25eth0]/hooks", false},
		{Live, "https://0xpartner.example/hooks", true},
		{Live, "https://1password.example/hooks", true},
		{Live, "https://partner.example./hooks", true},
	} {
		_, err := svc.SetEndpoint(ctx, scope(tc.env), tc.url)
		if tc.ok && err != nil {
			t.Errorf("%s %q: %v, want it accepted", tc.env, tc.url, err)
		}
		if !tc.ok {
			wantField(t, string(tc.env)+" "+strings.ToValidUTF8(tc.url, "?"), err, "url")
		}
	}
	for _, s := range []Scope{{AccountID: uuid.Nil, Environment: Live}, {AccountID: uuid.New(), Environment: "prod"}} {
		_, err := svc.SetEndpoint(ctx, s, "https://example.com")
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.HasPrefix(ve.Field, "scope.") {
			t.Errorf("SetEndpoint for scope %v: %v, want a validation error on the scope", s, err)
		}
	}
	if len(store.endpoints) != 12 {
		t.Errorf("%d endpoints stored, want the 12 accepted", len(store.endpoints))
	}
}

// The body is rendered once, in the envelope the spec gives, with the
// order's JSON as it came.
func TestIngestRendersTheEnvelope(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t, nil)
	s := scope(Sandbox)
	in := incoming(s)
	if added, err := svc.Ingest(ctx, in); !added || err != nil {
		t.Fatalf("Ingest = %v, %v", added, err)
	}
	if added, err := svc.Ingest(ctx, in); added || err != nil {
		t.Errorf("Ingest again = %v, %v; want nothing new", added, err)
	}
	want := `{"id":"` + in.ID + `","event":"order.completed","created_at":"2025-01-02T02:04:05.000006Z","environment":"sandbox","data":{"id":"o-1","price":{"total":16.50}}}`
	if len(store.events) != 1 || string(store.events[0].Payload) != want {
		t.Errorf("payload = %s\nwant      %s", store.events[0].Payload, want)
	}
	if len(store.jobs) != 0 {
		t.Errorf("a job for a scope without an endpoint: %v", store.jobs)
	}
}

// Every event of ordering's is rendered in the one envelope, its data as
// it came; esim.usage's alone carries threshold_percent.
func TestIngestRendersEveryTypeOfOrdering(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t, nil)
	s := scope(Live)
	var types []EventType
	for _, typ := range EventTypes {
		if typ.Incoming() {
			types = append(types, typ)
		}
	}
	if len(types) != 9 {
		t.Fatalf("ordering's event types: %v, want the 9 of limits.EventTypes but ping", types)
	}
	for _, typ := range types {
		in := incoming(s)
		in.Type, in.Data = typ, json.RawMessage(`{"id":"x-1", "data":{"used_bytes":  5}}`)
		threshold := ""
		if typ == EsimUsage {
			in.ThresholdPercent, threshold = 80, `,"threshold_percent":80`
		}
		if added, err := svc.Ingest(ctx, in); !added || err != nil {
			t.Fatalf("Ingest %s = %v, %v", typ, added, err)
		}
		got := store.events[len(store.events)-1]
		want := `{"id":"` + in.ID + `","event":"` + string(typ) + `","created_at":"2025-01-02T02:04:05.000006Z","environment":"live"` + threshold + `,"data":{"id":"x-1", "data":{"used_bytes":  5}}}`
		if string(got.Payload) != want || got.Type != typ || got.OrderID != in.OrderID || got.Scope != s {
			t.Errorf("%s stored as %s %s %s:\n%s\nwant %s", typ, got.Type, got.Scope, got.OrderID, got.Payload, want)
		}
	}
}

func TestIngestRefusesWhatIsNoOrderingEvent(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t, nil)
	for _, tc := range []struct {
		field  string
		change func(*IncomingEvent)
	}{
		{"id", func(e *IncomingEvent) { e.ID = "evt_123" }},
		{"type", func(e *IncomingEvent) { e.Type = Ping }},
		{"type", func(e *IncomingEvent) { e.Type = "esim.deleted" }},
		{"scope.account_id", func(e *IncomingEvent) { e.Scope.AccountID = uuid.Nil }},
		{"scope.environment", func(e *IncomingEvent) { e.Scope.Environment = "" }},
		{"order_id", func(e *IncomingEvent) { e.OrderID = uuid.Nil }},
		{"order_id", func(e *IncomingEvent) { e.Type, e.OrderID = TopUpCompleted, uuid.Nil }},
		{"created_at", func(e *IncomingEvent) { e.CreatedAt = time.Time{} }},
		{"order", func(e *IncomingEvent) { e.Data = json.RawMessage(`{"id":`) }},
		{"esim", func(e *IncomingEvent) { e.Type, e.Data = EsimExpired, json.RawMessage(`{"id":`) }},
		{"topup", func(e *IncomingEvent) { e.Type, e.Data = TopUpFailed, nil }},
		{"threshold_percent", func(e *IncomingEvent) { e.Type = EsimUsage }},
		{"threshold_percent", func(e *IncomingEvent) { e.Type, e.ThresholdPercent = EsimUsage, 75 }},
		{"threshold_percent", func(e *IncomingEvent) { e.Type, e.ThresholdPercent = EsimUsage, -50 }},
		{"threshold_percent", func(e *IncomingEvent) { e.Type, e.ThresholdPercent = EsimActivated, 50 }},
		{"threshold_percent", func(e *IncomingEvent) { e.ThresholdPercent = 100 }},
	} {
		in := incoming(scope(Live))
		tc.change(&in)
		_, err := svc.Ingest(ctx, in)
		wantField(t, fmt.Sprintf("Ingest with a bad %s (%s)", tc.field, in.Type), err, tc.field)
	}
	if len(store.events) != 0 {
		t.Errorf("refused events were stored: %v", store.events)
	}
}

// Each attempt's outcome decides the next: a 2xx delivers, anything else
// (a redirect too) is retried after 1 s, then 2 s, and the third failure
// fails the event.
func TestAttemptOutcomes(t *testing.T) {
	ctx := context.Background()
	answers := []Response{{StatusCode: 302}, {StatusCode: 500, Body: []byte("oops")}, {Err: "connection refused"}}
	var i int
	svc, store, p := newService(t, func(context.Context, Request) Response {
		defer func() { i++ }()
		return answers[i]
	})
	s := scope(Sandbox)
	if _, err := svc.SetEndpoint(ctx, s, "http://localhost/hooks"); err != nil {
		t.Fatal(err)
	}
	in := incoming(s)
	if _, err := svc.Ingest(ctx, in); err != nil {
		t.Fatal(err)
	}
	var outcomes []Outcome
	for range 3 {
		out, err := svc.Deliver(ctx, in.ID)
		if err != nil {
			t.Fatalf("Deliver = %+v, %v", out, err)
		}
		outcomes = append(outcomes, out)
	}
	if out, err := svc.Deliver(ctx, in.ID); out != (Outcome{}) || err != nil {
		t.Errorf("a fourth Deliver = %+v, %v; want nothing to do", out, err)
	}
	want := []struct {
		status  int
		err     string
		next    Status
		retryIn time.Duration
	}{
		{302, "status 302", StatusPending, time.Second},
		{500, "status 500", StatusPending, 2 * time.Second},
		{0, "connection refused", StatusFailed, 0},
	}
	if len(store.finished) != 3 {
		t.Fatalf("%d attempts finished, want 3", len(store.finished))
	}
	for n, f := range store.finished {
		w := want[n]
		out := outcomes[n]
		if f.result.StatusCode != w.status || f.result.Error != w.err || f.next != w.next || f.job.Attempt != n+1 ||
			out.Next != w.next || out.RetryIn != w.retryIn || out.Attempt != n+1 || out.Retry() != (w.next == StatusPending) {
			t.Errorf("attempt %d: %+v, next %s, outcome %+v; want %d %q, next %s in %s", n+1, f.result, f.next, out, w.status, w.err, w.next, w.retryIn)
		}
	}
	if string(store.finished[1].result.ResponseBody) != "oops" {
		t.Errorf("response body %q, want oops", store.finished[1].result.ResponseBody)
	}
	for _, r := range p.requests {
		if r.EventID != in.ID || string(r.Body) != string(store.events[0].Payload) || r.URL != "http://localhost/hooks" {
			t.Errorf("request %+v: want the event's id, payload and URL", r)
		}
	}
}

func TestAttemptTimesOutAndIsInterrupted(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t, func(ctx context.Context, _ Request) Response {
		<-ctx.Done()
		return Response{Err: "timed out"}
	})
	s := scope(Sandbox)
	if _, err := svc.SetEndpoint(ctx, s, "http://localhost/hooks"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 2 {
		in := incoming(s)
		if _, err := svc.Ingest(ctx, in); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, in.ID)
	}
	if _, err := svc.Deliver(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	stopping, stop := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, stop)
	if out, err := svc.Deliver(stopping, ids[1]); err != nil || !out.Retry() {
		t.Fatalf("Deliver cut short = %+v, %v; want a retry", out, err)
	}
	if got := store.finished[0].result; got.Error != "timed out after 200ms" || got.Duration < 200*time.Millisecond {
		t.Errorf("an attempt past the timeout: %+v; want timed out after 200ms", got)
	}
	if got := store.finished[1]; got.result.Error != Interrupted || got.next != StatusPending {
		t.Errorf("an attempt cut short by a stop: %+v, next %s; want interrupted and retried", got.result, got.next)
	}
}

func TestSendTestEventIsAPing(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t, nil)
	s := scope(Live)
	if _, err := svc.SetEndpoint(ctx, s, "https://partner.example.com/hooks"); err != nil {
		t.Fatal(err)
	}
	e, err := svc.SendTestEvent(ctx, s)
	if err != nil || e.Type != Ping || e.Scope != s {
		t.Fatalf("SendTestEvent = %+v, %v", e, err)
	}
	var body struct {
		ID, Event, Environment string
		Data                   struct{ Message string }
	}
	if err := json.Unmarshal(e.Payload, &body); err != nil || body.ID != e.ID || body.Event != "ping" || body.Environment != "live" || body.Data.Message == "" {
		t.Errorf("payload %s: want a ping of the event's id with a message", e.Payload)
	}
	if len(store.jobs) != 1 {
		t.Errorf("%d jobs, want the ping's", len(store.jobs))
	}
}

func TestListEventsChecksItsInput(t *testing.T) {
	ctx := context.Background()
	svc, _, _ := newService(t, nil)
	s := scope(Live)
	for _, tc := range []struct {
		f     EventFilter
		field string
	}{
		{EventFilter{Page: -1}, "page"},
		{EventFilter{Page: MaxPage + 1}, "page"},
		{EventFilter{Limit: -1}, "limit"},
		{EventFilter{Limit: MaxPageLimit + 1}, "limit"},
		{EventFilter{Type: "order.created"}, "type"},
		{EventFilter{Type: "esim.created"}, "type"},
		{EventFilter{Status: "lost"}, "status"},
		{EventFilter{Scope: &Scope{AccountID: uuid.Nil, Environment: Live}}, "scope.account_id"},
		{EventFilter{Scope: &Scope{AccountID: s.AccountID}}, "scope.environment"},
	} {
		_, err := svc.ListEvents(ctx, tc.f)
		wantField(t, "ListEvents", err, tc.field)
	}
	for _, typ := range EventTypes {
		if _, err := svc.ListEvents(ctx, EventFilter{Scope: &s, Type: typ}); err != nil {
			t.Errorf("ListEvents of %s: %v", typ, err)
		}
	}
	if _, err := svc.GetEvent(ctx, &s, "not-an-id"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetEvent of a malformed id: %v, want ErrNotFound", err)
	}
}

func TestCheckSecretsKeyRefusesAnotherKey(t *testing.T) {
	ctx := context.Background()
	svc, store, _ := newService(t, nil)
	if err := svc.CheckSecretsKey(ctx); err != nil {
		t.Errorf("with no secrets stored: %v", err)
	}
	if _, err := svc.SetEndpoint(ctx, scope(Live), "https://example.com/"); err != nil {
		t.Fatal(err)
	}
	if err := svc.CheckSecretsKey(ctx); err != nil {
		t.Errorf("with the key that sealed them: %v", err)
	}
	key := make([]byte, aesgcm.KeySize)
	other, _ := aesgcm.New(key)
	if err := NewService(Deps{Store: store, Sealer: other}).CheckSecretsKey(ctx); err == nil {
		t.Error("another key passes the check")
	}
}

// Which addresses an endpoint may reach, with and without its host:port
// listed. Judged without dialling anything.
func TestCheckDestination(t *testing.T) {
	for _, tc := range []struct {
		addr string
		// refused alone, and refused even when listed
		refused, always bool
		why             string
	}{
		{"93.184.216.34", false, false, ""},
		{"2606:2800:220:1:248:1893:25c8:1946", false, false, ""},
		{"127.0.0.1", true, false, "a loopback"},
		{"127.5.5.5", true, false, "a loopback"},
		{"::1", true, false, "a loopback"},
		{"::ffff:127.0.0.1", true, false, "a loopback"},
		{"10.0.0.1", true, false, "a private"},
		{"172.16.3.4", true, false, "a private"},
		{"192.168.1.1", true, false, "a private"},
		{"fd00::1", true, false, "a private"},
		{"::ffff:10.1.2.3", true, false, "a private"},
		{"100.64.0.1", true, false, "a shared (CGNAT)"},
		{"100.127.255.254", true, false, "a shared (CGNAT)"},
		{"169.254.169.254", true, true, "a link-local"},
		{"::ffff:169.254.169.254", true, true, "a link-local"},
		{"fe80::1", true, true, "a link-local"},
		{"fe80::1%eth0", true, true, "a link-local"},
		{"0.0.0.0", true, true, "an unspecified"},
		{"::", true, true, "an unspecified"},
		{"224.0.0.1", true, true, "a multicast"},
		{"ff02::1", true, true, "a multicast"},
		{"255.255.255.255", true, true, "a reserved"},
		{"0.1.2.3", true, true, "a reserved"},
		{"64:ff9b::a9fe:a9fe", true, true, "a link-local"},
		{"64:ff9b::a00:1", true, false, "a private"},
		{"2002:7f00:1::", true, false, "a loopback"},
		{"64:ff9b::5db8:d822", false, false, ""},
	} {
		to := netip.AddrPortFrom(netip.MustParseAddr(tc.addr), 9999)
		err := CheckDestination(Sandbox, to, nil)
		if (err != nil) != tc.refused {
			t.Errorf("%s: %v, want refused %v", tc.addr, err, tc.refused)
		}
		if err != nil && !strings.HasSuffix(err.Error(), " is "+tc.why+" address") {
			t.Errorf("%s: %q, want it called %s address", tc.addr, err, tc.why)
		}
		listed := HostPorts{Sandbox: {netip.AddrPortFrom(to.Addr().Unmap().WithZone(""), 9999)}}
		if err := CheckDestination(Sandbox, to, listed); (err != nil) != tc.always {
			t.Errorf("%s listed: %v, want refused %v", tc.addr, err, tc.always)
		}
		if err := CheckDestination(Sandbox, netip.AddrPortFrom(to.Addr(), 9998), listed); (err != nil) != tc.refused {
			t.Errorf("%s on a port not listed: %v, want refused %v", tc.addr, err, tc.refused)
		}
		if err := CheckDestination(Live, to, listed); (err != nil) != tc.refused {
			t.Errorf("%s listed for sandbox, in live: %v, want refused %v", tc.addr, err, tc.refused)
		}
	}
}
