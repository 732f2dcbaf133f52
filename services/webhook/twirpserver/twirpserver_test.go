package twirpserver_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"

	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/aesgcm"
	"github.com/esimplatform/esim/services/webhook/httpsender"
	"github.com/esimplatform/esim/services/webhook/postgres"
	"github.com/esimplatform/esim/services/webhook/twirpserver"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

const (
	sandbox = accountsv1.Environment_ENVIRONMENT_SANDBOX
	live    = accountsv1.Environment_ENVIRONMENT_LIVE
)

func TestPolicyCoversEveryMethod(t *testing.T) {
	var methods []string
	service := webhookv1.File_webhook_v1_webhook_proto.Services().ByName("Webhook")
	for i := range service.Methods().Len() {
		methods = append(methods, string(service.Methods().Get(i).Name()))
	}
	if err := twirpserver.Policy.Check(methods); err != nil {
		t.Fatal(err)
	}
}

// api is the protected Twirp handler over a real HTTP server, a fresh
// database and running workers, with the Service itself for feeding
// events in as the Kafka consumer does.
type api struct {
	svc      *webhook.Service
	operator webhookv1.Webhook
	gateway  webhookv1.Webhook
	portal   webhookv1.Webhook
}

func start(t *testing.T) *api {
	t.Helper()
	key := make([]byte, aesgcm.KeySize)
	_, _ = rand.Read(key)
	sealer, err := aesgcm.New(key)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := postgres.Open(context.Background(), pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store, err := postgres.NewStore(pool, 4)
	if err != nil {
		t.Fatal(err)
	}
	svc := webhook.NewService(webhook.Deps{
		Store:  store,
		Sealer: sealer,
		Poster: httpsender.New(httpsender.Options{PrivateEndpoints: webhooktest.Receivers}),
		// No Resolver: the server package's tests check where live URLs
		// resolve to.
		PrivateEndpoints: webhooktest.Receivers,
	})
	queue, err := postgres.NewQueue(pool, svc, postgres.QueueConfig{Workers: 16, AttemptTimeout: time.Second, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := queue.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = queue.Stop(ctx)
	})
	ts := httptest.NewServer(twirpserver.Handler(svc, slog.New(slog.DiscardHandler), internalauthtest.Callers()))
	t.Cleanup(ts.Close)
	return &api{
		svc:      svc,
		operator: webhooktest.Client(ts.URL, internalauth.Operator),
		gateway:  webhooktest.Client(ts.URL, internalauth.Gateway),
		portal:   webhooktest.Client(ts.URL, internalauth.Portal),
	}
}

// ingest stores an order event for scope as the consumer would, and
// returns its id.
func (a *api) ingest(t *testing.T, scope *webhookv1.Scope, eventType webhook.EventType, orderID uuid.UUID, at time.Time) string {
	t.Helper()
	id := webhooktest.NewEventID()
	_, err := a.svc.Ingest(context.Background(), webhook.IncomingEvent{
		ID: id, Type: eventType, OrderID: orderID, CreatedAt: at,
		Scope: webhook.Scope{AccountID: uuid.MustParse(scope.GetAccountId()), Environment: webhook.Environment(scope.GetEnvironment().ShortName())},
		Data:  json.RawMessage(`{"id":"` + orderID.String() + `"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// wantTwirp fails unless err is a Twirp error with code (and, when given,
// meta argument).
func wantTwirp(t *testing.T, what string, err error, code twirp.ErrorCode, argument ...string) {
	t.Helper()
	var twerr twirp.Error
	if !errors.As(err, &twerr) {
		t.Errorf("%s: err = %v, want Twirp %s", what, err, code)
		return
	}
	if twerr.Code() != code {
		t.Errorf("%s: code = %s (%s), want %s", what, twerr.Code(), twerr.Msg(), code)
	}
	if len(argument) > 0 && twerr.Meta("argument") != argument[0] {
		t.Errorf("%s: argument = %q (%s), want %q", what, twerr.Meta("argument"), twerr.Msg(), argument[0])
	}
}

func newScope(env accountsv1.Environment) *webhookv1.Scope {
	return &webhookv1.Scope{AccountId: uuid.NewString(), Environment: env}
}

func TestEndpoints(t *testing.T) {
	ctx := context.Background()
	a := start(t)
	scope := newScope(live)
	set, err := a.portal.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: "https://partner.example.com/hooks"})
	if err != nil || set.GetUrl() != "https://partner.example.com/hooks" || !strings.HasPrefix(set.GetSecret(), "whsec_") ||
		set.GetScope().GetAccountId() != scope.GetAccountId() || set.GetScope().GetEnvironment() != live || set.GetPreviousSecretExpiresAt() != nil {
		t.Fatalf("SetEndpoint = %v, %v", set, err)
	}
	got, err := a.operator.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: scope})
	if err != nil || got.GetSecret() != set.GetSecret() || !got.GetSecretCreatedAt().AsTime().Equal(set.GetSecretCreatedAt().AsTime()) {
		t.Errorf("GetEndpoint = %v, %v; want what SetEndpoint answered", got, err)
	}
	rotated, err := a.operator.RotateSecret(ctx, &webhookv1.RotateSecretRequest{Scope: scope})
	if err != nil || rotated.GetSecret() == set.GetSecret() || rotated.GetPreviousSecretExpiresAt() == nil {
		t.Errorf("RotateSecret = %v, %v", rotated, err)
	}
}

// Every bad input is answered with its code and argument, and changes
// nothing.
func TestEndpointInputErrors(t *testing.T) {
	ctx := context.Background()
	a := start(t)
	scope := newScope(live)
	for _, tc := range []struct {
		name     string
		scope    *webhookv1.Scope
		url      string
		argument string
	}{
		{"no scope", nil, "https://example.com", "scope"},
		{"a malformed account", &webhookv1.Scope{AccountId: "acc_1", Environment: live}, "https://example.com", "scope.account_id"},
		{"an account without dashes", &webhookv1.Scope{AccountId: strings.ReplaceAll(uuid.NewString(), "-", ""), Environment: live}, "https://example.com", "scope.account_id"},
		{"no environment", &webhookv1.Scope{AccountId: scope.GetAccountId()}, "https://example.com", "scope.environment"},
		{"an unknown environment", &webhookv1.Scope{AccountId: scope.GetAccountId(), Environment: 7}, "https://example.com", "scope.environment"},
		{"http in live", scope, "http://example.com/hooks", "url"},
		{"a password", scope, "https://u:p@example.com/hooks", "url"},
		{"a fragment", scope, "https://example.com/hooks#x", "url"},
		{"a relative URL", scope, "/hooks", "url"},
		{"a long URL", scope, "https://example.com/" + strings.Repeat("x", 2048), "url"},
		{"no URL", scope, "", "url"},
	} {
		_, err := a.operator.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: tc.scope, Url: tc.url})
		wantTwirp(t, "SetEndpoint with "+tc.name, err, twirp.InvalidArgument, tc.argument)
	}
	_, err := a.operator.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: scope})
	wantTwirp(t, "GetEndpoint after refused calls", err, twirp.NotFound)
	_, err = a.operator.RotateSecret(ctx, &webhookv1.RotateSecretRequest{Scope: scope})
	wantTwirp(t, "RotateSecret without an endpoint", err, twirp.NotFound)
	_, err = a.operator.SendTestEvent(ctx, &webhookv1.SendTestEventRequest{Scope: scope})
	wantTwirp(t, "SendTestEvent without an endpoint", err, twirp.NotFound)
	_, err = a.operator.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{})
	wantTwirp(t, "GetEndpoint without a scope", err, twirp.InvalidArgument, "scope")
	page, err := a.operator.ListEvents(ctx, &webhookv1.ListEventsRequest{})
	if err != nil || page.GetTotal() != 0 {
		t.Errorf("events after refused calls: %v, %v", page, err)
	}
}

// The gateway and the portal read one scope's events; another account's
// or environment's never show, not even by id or by order. Operators may
// read every scope's.
func TestEventsAreScoped(t *testing.T) {
	ctx := context.Background()
	a := start(t)
	mine, myLive, theirs := newScope(sandbox), newScope(live), newScope(sandbox)
	myLive.AccountId = mine.GetAccountId()
	t0 := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	var myEvents []string
	order := uuid.New()
	for i := range 5 {
		typ := webhook.OrderCompleted
		if i%2 == 1 {
			typ = webhook.OrderFailed
		}
		myEvents = append(myEvents, a.ingest(t, mine, typ, uuid.New(), t0.Add(time.Duration(i)*time.Minute)))
	}
	mineOfOrder := a.ingest(t, mine, webhook.OrderCompleted, order, t0.Add(time.Hour))
	liveEvent := a.ingest(t, myLive, webhook.OrderCompleted, uuid.New(), t0)
	theirOrder := uuid.New()
	theirEvent := a.ingest(t, theirs, webhook.OrderCompleted, theirOrder, t0)

	ids := func(res *webhookv1.ListEventsResponse) []string {
		var out []string
		for _, e := range res.GetEvents() {
			out = append(out, e.GetId())
		}
		return out
	}
	for _, c := range []webhookv1.Webhook{a.gateway, a.portal} {
		res, err := c.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: mine})
		want := []string{mineOfOrder, myEvents[4], myEvents[3], myEvents[2], myEvents[1], myEvents[0]}
		if err != nil || res.GetTotal() != 6 || fmt.Sprint(ids(res)) != fmt.Sprint(want) {
			t.Errorf("ListEvents of my sandbox = %v (%d), %v; want mine, newest first", ids(res), res.GetTotal(), err)
		}
		for _, e := range res.GetEvents() {
			if e.GetStatus() != webhookv1.DeliveryStatus_DELIVERY_STATUS_NO_ENDPOINT || e.GetUrl() != "" || e.GetScope().GetAccountId() != mine.GetAccountId() {
				t.Errorf("event %v: want no_endpoint, mine", e)
			}
		}
		res, err = c.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: mine, OrderId: theirOrder.String()})
		if err != nil || res.GetTotal() != 0 {
			t.Errorf("my events of their order = %v, %v; want none", ids(res), err)
		}
		_, err = c.GetEvent(ctx, &webhookv1.GetEventRequest{Scope: mine, Id: theirEvent})
		wantTwirp(t, "GetEvent of another account's event", err, twirp.NotFound)
		_, err = c.GetEvent(ctx, &webhookv1.GetEventRequest{Scope: mine, Id: liveEvent})
		wantTwirp(t, "GetEvent of my live event in sandbox", err, twirp.NotFound)
		_, err = c.GetEvent(ctx, &webhookv1.GetEventRequest{Id: myEvents[0]})
		wantTwirp(t, "GetEvent without a scope", err, twirp.InvalidArgument, "scope")
		_, err = c.ListEvents(ctx, &webhookv1.ListEventsRequest{})
		wantTwirp(t, "ListEvents without a scope", err, twirp.InvalidArgument, "scope")
		e, err := c.GetEvent(ctx, &webhookv1.GetEventRequest{Scope: mine, Id: myEvents[1]})
		if err != nil || e.GetType() != "order.failed" || e.GetOrderId() == "" || !strings.Contains(e.GetPayload(), myEvents[1]) {
			t.Errorf("GetEvent of mine = %v, %v", e, err)
		}
	}

	res, err := a.operator.ListEvents(ctx, &webhookv1.ListEventsRequest{})
	if err != nil || res.GetTotal() != 8 {
		t.Errorf("every scope's events = %d, %v; want 8", res.GetTotal(), err)
	}
	if e, err := a.operator.GetEvent(ctx, &webhookv1.GetEventRequest{Id: theirEvent}); err != nil || e.GetScope().GetAccountId() != theirs.GetAccountId() {
		t.Errorf("GetEvent by an operator without a scope = %v, %v", e, err)
	}
}

func TestListEventsPagesAndFilters(t *testing.T) {
	ctx := context.Background()
	a := start(t)
	s := newScope(sandbox)
	t0 := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	order := uuid.New()
	var all []string
	for i := range 7 {
		typ, o := webhook.OrderCompleted, uuid.New()
		if i == 3 {
			typ, o = webhook.OrderFailed, order
		}
		all = append([]string{a.ingest(t, s, typ, o, t0.Add(time.Duration(i)*time.Second))}, all...)
	}
	var paged []string
	for page := int32(1); page <= 4; page++ {
		res, err := a.gateway.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: s, Page: page, Limit: 2})
		if err != nil || res.GetTotal() != 7 {
			t.Fatalf("page %d: %v (%d)", page, err, res.GetTotal())
		}
		for _, e := range res.GetEvents() {
			paged = append(paged, e.GetId())
		}
	}
	if fmt.Sprint(paged) != fmt.Sprint(all) {
		t.Errorf("pages of 2 = %v, want %v", paged, all)
	}
	for name, tc := range map[string]struct {
		req  *webhookv1.ListEventsRequest
		want []string
	}{
		"type":             {&webhookv1.ListEventsRequest{Scope: s, Type: "order.failed"}, []string{all[3]}},
		"order":            {&webhookv1.ListEventsRequest{Scope: s, OrderId: order.String()}, []string{all[3]}},
		"status":           {&webhookv1.ListEventsRequest{Scope: s, Status: webhookv1.DeliveryStatus_DELIVERY_STATUS_NO_ENDPOINT}, all[:3]},
		"another status":   {&webhookv1.ListEventsRequest{Scope: s, Status: webhookv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED}, nil},
		"type and order":   {&webhookv1.ListEventsRequest{Scope: s, Type: "ping", OrderId: order.String()}, nil},
		"default page":     {&webhookv1.ListEventsRequest{Scope: s, Limit: 3}, all[:3]},
		"beyond the pages": {&webhookv1.ListEventsRequest{Scope: s, Page: 5, Limit: 2}, nil},
	} {
		if name == "status" {
			tc.req.Limit = 3
		}
		res, err := a.gateway.ListEvents(ctx, tc.req)
		var got []string
		for _, e := range res.GetEvents() {
			got = append(got, e.GetId())
		}
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: %v, %v; want %v", name, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		req      *webhookv1.ListEventsRequest
		argument string
	}{
		{&webhookv1.ListEventsRequest{Scope: s, Page: -1}, "page"},
		{&webhookv1.ListEventsRequest{Scope: s, Page: 10001}, "page"},
		{&webhookv1.ListEventsRequest{Scope: s, Limit: 101}, "limit"},
		{&webhookv1.ListEventsRequest{Scope: s, Limit: -5}, "limit"},
		{&webhookv1.ListEventsRequest{Scope: s, Type: "order.created"}, "type"},
		{&webhookv1.ListEventsRequest{Scope: s, OrderId: "order-1"}, "order_id"},
		{&webhookv1.ListEventsRequest{Scope: s, Status: 42}, "status"},
		{&webhookv1.ListEventsRequest{Scope: &webhookv1.Scope{AccountId: "x", Environment: sandbox}}, "scope.account_id"},
	} {
		_, err := a.gateway.ListEvents(ctx, tc.req)
		wantTwirp(t, fmt.Sprintf("ListEvents %v", tc.req), err, twirp.InvalidArgument, tc.argument)
	}
	for _, id := range []string{webhooktest.NewEventID(), "evt_1", "", strings.ToUpper(all[0])} {
		_, err := a.gateway.GetEvent(ctx, &webhookv1.GetEventRequest{Scope: s, Id: id})
		wantTwirp(t, "GetEvent "+id, err, twirp.NotFound)
	}
}

// An event's attempts are listed oldest first, each with its status code,
// error, answer and the body sent.
func TestAttemptsAreListedOldestFirst(t *testing.T) {
	ctx := context.Background()
	a := start(t)
	hooks := webhooktest.NewReceiver(t, webhooktest.Answer{Status: 500, Body: "try later"}, webhooktest.Answer{Status: 204})
	s := newScope(sandbox)
	if _, err := a.operator.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: s, Url: hooks.URL}); err != nil {
		t.Fatal(err)
	}
	id := a.ingest(t, s, webhook.OrderCompleted, uuid.New(), time.Now())
	e := webhooktest.WaitForStatus(t, a.operator, id, webhookv1.DeliveryStatus_DELIVERY_STATUS_DELIVERED, 10*time.Second)
	res, err := a.gateway.ListEvents(ctx, &webhookv1.ListEventsRequest{Scope: s})
	if err != nil || len(res.GetEvents()) != 1 {
		t.Fatalf("ListEvents = %v, %v", res, err)
	}
	for _, got := range []*webhookv1.Event{e, res.GetEvents()[0]} {
		at := got.GetAttempts()
		if got.GetUrl() != hooks.URL || len(at) != 2 {
			t.Fatalf("event %v: want 2 attempts to %s", got, hooks.URL)
		}
		if at[0].GetNumber() != 1 || at[0].GetStatusCode() != 500 || at[0].GetError() != "status 500" || at[0].GetResponseBody() != "try later" ||
			at[1].GetNumber() != 2 || at[1].GetStatusCode() != 204 || at[1].GetError() != "" ||
			!at[0].GetStartedAt().AsTime().Before(at[1].GetStartedAt().AsTime()) {
			t.Errorf("attempts %v: want the 500 then the 204, oldest first", at)
		}
		for _, x := range at {
			if x.GetRequestBody() != got.GetPayload() || x.GetRequestBody() == "" {
				t.Errorf("attempt %d sent %q, want the payload", x.GetNumber(), x.GetRequestBody())
			}
		}
	}
}
