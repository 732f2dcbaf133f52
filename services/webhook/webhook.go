// Package webhook delivers the platform's events to partners: each
// account has, per environment (a Scope), one endpoint URL and a signing
// secret. Events arrive from ordering over Kafka (order.*, esim.*,
// topup.*) or are made here (ping); each is stored once, with its body
// rendered once, and delivered with at most MaxAttempts signed attempts,
// every one of them recorded.
//
// Delivery is at least once and durable: an event and its delivery job
// are stored in one transaction before the message that brought it is
// acknowledged, any replica's workers deliver any job, and an attempt is
// counted before it is sent, so a crash mid-attempt costs that attempt
// and never adds a fourth.
package webhook

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/input"
	"github.com/esimplatform/esim/proto/limits"
)

// Environment separates test traffic from real traffic: each has its own
// endpoint, secret and events.
type Environment string

// The two environments.
const (
	Sandbox Environment = "sandbox"
	Live    Environment = "live"
)

// Environments lists them.
var Environments = []Environment{Sandbox, Live}

// Valid reports whether e is sandbox or live.
func (e Environment) Valid() bool { return e == Sandbox || e == Live }

// Scope is one account in one environment.
type Scope struct {
	AccountID   uuid.UUID
	Environment Environment
}

func (s Scope) String() string { return s.AccountID.String() + " " + string(s.Environment) }

// EventType is what happened.
type EventType string

// The events partners receive: an order's, an eSIM's after its order
// (data: the eSIM), a top-up's (data: the top-up), and the test event.
const (
	OrderCompleted EventType = limits.EventOrderCompleted
	OrderFailed    EventType = limits.EventOrderFailed
	EsimInstalled  EventType = limits.EventEsimInstalled
	EsimActivated  EventType = limits.EventEsimActivated
	// EsimUsage alone has a threshold (IncomingEvent.ThresholdPercent).
	EsimUsage      EventType = limits.EventEsimUsage
	EsimExpiring   EventType = limits.EventEsimExpiring
	EsimExpired    EventType = limits.EventEsimExpired
	TopUpCompleted EventType = limits.EventTopUpCompleted
	TopUpFailed    EventType = limits.EventTopUpFailed
	// Ping is the test event SendTestEvent makes.
	Ping EventType = limits.EventPing
)

// EventTypes lists them, as the partner API does.
var EventTypes = func() []EventType {
	out := make([]EventType, len(limits.EventTypes))
	for i, t := range limits.EventTypes {
		out[i] = EventType(t)
	}
	return out
}()

// Valid reports whether t is an event type partners receive.
func (t EventType) Valid() bool { return slices.Contains(EventTypes, t) }

// Incoming reports whether t is one of ordering's events: any but the
// ping, which is made here.
func (t EventType) Incoming() bool { return t != Ping && t.Valid() }

// UsageThresholds are the percentages of an eSIM's data esim.usage
// tells of.
var UsageThresholds = []int32{50, 80, 100}

// typeList is types as an error message lists them.
func typeList(types []EventType, keep func(EventType) bool) string {
	var names []string
	for _, t := range types {
		if keep(t) {
			names = append(names, string(t))
		}
	}
	return strings.Join(names, ", ")
}

// Status is where an event's delivery is.
type Status string

// An event with an endpoint is pending until an attempt succeeds
// (delivered) or MaxAttempts attempts failed (failed); both are final. One
// whose scope had no endpoint when it happened is no_endpoint, and is
// never sent.
const (
	StatusPending    Status = "pending"
	StatusDelivered  Status = "delivered"
	StatusFailed     Status = "failed"
	StatusNoEndpoint Status = "no_endpoint"
)

// Statuses lists them.
var Statuses = []Status{StatusPending, StatusDelivered, StatusFailed, StatusNoEndpoint}

// Valid reports whether s is a delivery status.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// The delivery rules (the partner API's spec, section 6).
const (
	// MaxAttempts is how often an event is sent at most.
	MaxAttempts = limits.MaxWebhookAttempts
	// DefaultAttemptTimeout bounds one attempt, from connecting to the
	// last byte of the answer.
	DefaultAttemptTimeout = 10 * time.Second
	// ResponseBodyLimit is how much of an answer's body is recorded.
	ResponseBodyLimit = 1024
	// SecretOverlap is how long a rotated-out secret keeps signing beside
	// the new one, for receivers to switch over without missing a
	// delivery.
	SecretOverlap = limits.SecretOverlap
	// MaxURLLength bounds an endpoint URL, as browsers and most servers
	// bound URLs.
	MaxURLLength = 2048
	// Paging, as every list of the platform pages.
	DefaultPageLimit = limits.DefaultPageLimit
	MaxPageLimit     = limits.MaxPageLimit
	MaxPage          = limits.MaxPage
)

// retryDelays[n-1] is the wait after attempt n failed: attempt 2 comes
// about 1 s after the first failure, attempt 3 about 2 s after the second.
var retryDelays = [MaxAttempts - 1]time.Duration{time.Second, 2 * time.Second}

// RetryDelay is the wait before the attempt after attempt failed.
func RetryDelay(attempt int) time.Duration { return retryDelays[attempt-1] }

// Endpoint is where a scope's events go and the secret that signs them.
type Endpoint struct {
	Scope Scope
	URL   string
	// Secret is the current signing secret, whsec_...
	Secret          string
	SecretCreatedAt time.Time
	// PreviousSecretExpiresAt is when the rotated-out secret stops
	// signing; zero when none signs beside Secret.
	PreviousSecretExpiresAt time.Time
	UpdatedAt               time.Time
}

// SealedEndpoint is an endpoint as the Store keeps it: its secrets
// sealed (Sealer), so a copy of the database signs nothing.
type SealedEndpoint struct {
	Scope           Scope
	URL             string
	Secret          []byte
	SecretCreatedAt time.Time
	// PreviousSecret is nil when no rotated-out secret is kept.
	PreviousSecret          []byte
	PreviousSecretExpiresAt time.Time
	UpdatedAt               time.Time
}

// Event is something that happened, as delivered and recorded.
type Event struct {
	// ID is evt_ and 32 hex digits: the webhook-id of every attempt.
	ID    string
	Type  EventType
	Scope Scope
	// OrderID is uuid.Nil for a ping.
	OrderID   uuid.UUID
	CreatedAt time.Time
	Status    Status
	// URL is the endpoint's when the event was stored; "" with
	// StatusNoEndpoint.
	URL string
	// Payload is the body every attempt sends, rendered once.
	Payload []byte
	// Attempts are oldest first.
	Attempts []Attempt
}

// Attempt is one sending of an event.
type Attempt struct {
	// Number is 1 to MaxAttempts.
	Number    int
	StartedAt time.Time
	// Finished is false while the attempt is in flight; its result is
	// then unknown.
	Finished bool
	Duration time.Duration
	// StatusCode is the HTTP status answered; 0 when none was.
	StatusCode int
	// Error says why the attempt failed; "" when it succeeded.
	Error string
	// ResponseBody is the first ResponseBodyLimit bytes of the answer.
	ResponseBody []byte
}

// NewEvent is an event to store, its payload rendered.
type NewEvent struct {
	ID        string
	Type      EventType
	Scope     Scope
	OrderID   uuid.UUID
	CreatedAt time.Time
	Payload   []byte
	// Trace is the W3C trace context (traceparent, tracestate) the event
	// was stored under; its attempts continue that trace.
	Trace map[string]string
}

// EventFilter selects events to list. Zero fields select any.
type EventFilter struct {
	// Scope nil lists every scope's events (operators only).
	Scope   *Scope
	Type    EventType
	OrderID uuid.UUID
	Status  Status
	// Page counts from 1, 0 meaning 1; Limit is 1..MaxPageLimit, 0
	// meaning DefaultPageLimit.
	Page, Limit int32
}

// EventPage is one page of events and the total across all pages.
type EventPage struct {
	Events []Event
	Total  int64
}

// Store persists endpoints, events, their delivery jobs and attempts.
// Implementations wrap every failure but ErrNotFound.
type Store interface {
	// SetEndpoint sets scope's URL, creating the endpoint with secret (and
	// createdAt as its secret's time) when the scope has none: an
	// existing endpoint keeps its secrets. It returns the endpoint as
	// stored.
	SetEndpoint(ctx context.Context, scope Scope, url string, secret []byte, now time.Time) (SealedEndpoint, error)
	// Endpoint returns ErrNotFound when the scope has none.
	Endpoint(ctx context.Context, scope Scope) (SealedEndpoint, error)
	// RotateSecret makes secret the current one and keeps the current one
	// as the previous until previousExpiresAt, dropping any previous one.
	// ErrNotFound when the scope has no endpoint.
	RotateSecret(ctx context.Context, scope Scope, secret []byte, now, previousExpiresAt time.Time) (SealedEndpoint, error)
	// AnyEndpoint returns one endpoint, any; ErrNotFound when there are
	// none.
	AnyEndpoint(ctx context.Context) (SealedEndpoint, error)
	// AddEvent stores e unless an event with e's id exists, and reports
	// whether it did. In the same transaction it snapshots the URL of
	// e's scope and enqueues the event's delivery job, due at once, or,
	// when the scope has no endpoint, stores e as StatusNoEndpoint
	// without a job.
	AddEvent(ctx context.Context, e NewEvent) (added bool, err error)
	// AddEvents is AddEvent for many events of ordering's (each with its
	// order) in one transaction: all stored or none. added[i] is
	// AddEvent's answer for es[i]; an id twice in es is stored once.
	AddEvents(ctx context.Context, es []NewEvent) (added []bool, err error)
	// Event returns the event with its attempts; ErrNotFound when there
	// is none with id in scope (any scope when nil).
	Event(ctx context.Context, scope *Scope, id string) (Event, error)
	// ListEvents returns one page of the events f selects, newest first
	// (ties by id), each with its attempts, and their total count.
	ListEvents(ctx context.Context, f EventFilter, limit int32, offset int64) ([]Event, int64, error)
	// StartAttempt starts the next attempt of the pending event's
	// delivery: it counts the attempt and records its start, in one
	// transaction, before anything is sent, and returns the job with the
	// scope's secrets as they are now. An attempt of the event left
	// unfinished (its replica died) is first recorded as failed with
	// rules.Interrupted; when that was the last, the event is failed and
	// the error is ErrDeliveryOver, as it is for an event no longer
	// pending. ErrScopeFull when the scope has rules.MaxPerScope attempts
	// of other events in flight, counted under a lock across replicas.
	StartAttempt(ctx context.Context, eventID string, rules AttemptRules) (Job, error)
	// Finish records the result of job's attempt and, with
	// StatusDelivered or StatusFailed, ends the delivery; StatusPending
	// leaves it for the next attempt. ErrLeaseLost when the attempt was
	// recorded as interrupted meanwhile, and nothing is changed.
	Finish(ctx context.Context, job Job, r Result, next Status) error
}

// AttemptRules are what Store.StartAttempt enforces.
type AttemptRules struct {
	// MaxPerScope caps the attempts in flight to one scope's endpoint,
	// across replicas: a slow endpoint holds that many workers, no more.
	MaxPerScope int
	// Interrupted is the error recorded on an attempt a crash cut short.
	Interrupted string
}

// Job is a delivery in the middle of its attempt number Attempt.
type Job struct {
	EventID string
	Scope   Scope
	URL     string
	Payload []byte
	Trace   map[string]string
	Attempt int
	// The scope's secrets, sealed, as they are at the attempt: a rotation
	// applies to the attempts after it.
	Secret                  []byte
	PreviousSecret          []byte
	PreviousSecretExpiresAt time.Time
}

// Sealer encrypts secrets at rest with authentication: Open fails on
// anything Seal did not make with the same key and additional data.
type Sealer interface {
	Seal(plaintext, additionalData []byte) ([]byte, error)
	Open(sealed, additionalData []byte) ([]byte, error)
}

// Deps are what the Service works with.
type Deps struct {
	Store  Store
	Sealer Sealer
	Poster Poster
	// AttemptTimeout bounds one attempt; 0 means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// MaxPerEndpoint caps the attempts in flight to one endpoint; 0
	// means 4.
	MaxPerEndpoint int
	// PrivateEndpoints are the loopback and private host:ports endpoints
	// may reach; nil opens none. SetEndpoint applies them to live URLs
	// as the Poster applies them to what it dials.
	PrivateEndpoints PrivateEndpoints
	// Resolver looks up a live URL's host when it is saved; nil checks
	// only URLs whose host is an IP address.
	Resolver Resolver
	// Log receives what deliveries cannot tell a caller.
	Log *slog.Logger
	// Observe, when set, is told of every attempt's outcome (delivered,
	// failed or interrupted) and duration.
	Observe func(ctx context.Context, outcome string, took time.Duration)
	// Trace, when set, gives the W3C trace context of a call, stored with
	// a test event so that its attempts join the call's trace.
	Trace func(context.Context) map[string]string
}

// Service holds the webhook use cases and delivers the events.
type Service struct {
	store          Store
	sealer         Sealer
	poster         Poster
	attemptTimeout time.Duration
	maxPerEndpoint int
	allowed        PrivateEndpoints
	resolver       Resolver
	log            *slog.Logger
	observe        func(context.Context, string, time.Duration)
	trace          func(context.Context) map[string]string
	now            func() time.Time
}

// defaultMaxPerEndpoint is the cap where Deps leaves it zero.
const defaultMaxPerEndpoint = 4

// NewService returns the use cases over d.
func NewService(d Deps) *Service {
	s := &Service{
		store:          d.Store,
		sealer:         d.Sealer,
		poster:         d.Poster,
		attemptTimeout: d.AttemptTimeout,
		maxPerEndpoint: d.MaxPerEndpoint,
		allowed:        d.PrivateEndpoints,
		resolver:       d.Resolver,
		log:            d.Log,
		observe:        d.Observe,
		trace:          d.Trace,
		now:            time.Now,
	}
	if s.attemptTimeout <= 0 {
		s.attemptTimeout = DefaultAttemptTimeout
	}
	if s.maxPerEndpoint <= 0 {
		s.maxPerEndpoint = defaultMaxPerEndpoint
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// SetClock makes the Service read the time from clock: tests move it
// past a rotated secret's expiry.
func (s *Service) SetClock(clock func() time.Time) { s.now = clock }

// SetEndpoint sets the URL a scope's events go to, replacing any earlier
// one for the events stored from now on, and makes the scope's signing
// secret on its first call. A live URL must be https, and must not be or
// resolve to an address live endpoints may not reach (CheckDestination).
func (s *Service) SetEndpoint(ctx context.Context, scope Scope, rawURL string) (Endpoint, error) {
	if err := validScope(scope); err != nil {
		return Endpoint{}, err
	}
	u, err := validURL(scope.Environment, rawURL)
	if err != nil {
		return Endpoint{}, err
	}
	if scope.Environment == Live {
		if err := s.checkLiveDestination(ctx, u); err != nil {
			return Endpoint{}, err
		}
	}
	// Sealed before knowing whether it is needed: a first call made at
	// once by two callers must leave one secret, which the store's
	// upsert decides.
	sealed, err := s.sealer.Seal([]byte(NewSecret()), secretAD(scope))
	if err != nil {
		return Endpoint{}, fmt.Errorf("seal a new secret: %w", err)
	}
	stored, err := s.store.SetEndpoint(ctx, scope, rawURL, sealed, input.Now(s.now))
	if err != nil {
		return Endpoint{}, fmt.Errorf("set endpoint of %s: %w", scope, err)
	}
	return s.open(stored)
}

// GetEndpoint returns the scope's endpoint; ErrNotFound while none is set.
func (s *Service) GetEndpoint(ctx context.Context, scope Scope) (Endpoint, error) {
	if err := validScope(scope); err != nil {
		return Endpoint{}, err
	}
	stored, err := s.store.Endpoint(ctx, scope)
	if err != nil {
		return Endpoint{}, fmt.Errorf("endpoint of %s: %w", scope, err)
	}
	return s.open(stored)
}

// RotateSecret makes a new signing secret for the scope. The one it
// replaces signs beside it for SecretOverlap; a secret rotated out before
// that is dropped at once. ErrNotFound while no endpoint is set.
func (s *Service) RotateSecret(ctx context.Context, scope Scope) (Endpoint, error) {
	if err := validScope(scope); err != nil {
		return Endpoint{}, err
	}
	sealed, err := s.sealer.Seal([]byte(NewSecret()), secretAD(scope))
	if err != nil {
		return Endpoint{}, fmt.Errorf("seal a new secret: %w", err)
	}
	now := input.Now(s.now)
	stored, err := s.store.RotateSecret(ctx, scope, sealed, now, now.Add(SecretOverlap))
	if err != nil {
		return Endpoint{}, fmt.Errorf("rotate the secret of %s: %w", scope, err)
	}
	return s.open(stored)
}

// CheckSecretsKey opens a stored secret, if there is one: a service
// started with another key than the one that sealed its secrets would
// fail every delivery, and must not start.
func (s *Service) CheckSecretsKey(ctx context.Context) error {
	stored, err := s.store.AnyEndpoint(ctx)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		return fmt.Errorf("read a stored secret: %w", err)
	}
	if _, err := s.sealer.Open(stored.Secret, secretAD(stored.Scope)); err != nil {
		return fmt.Errorf("the secrets key does not open the stored signing secrets (of %s): it is not the key they were sealed with", stored.Scope)
	}
	return nil
}

// open is stored with its secret in the clear, the previous secret's
// expiry shown only while it still signs.
func (s *Service) open(stored SealedEndpoint) (Endpoint, error) {
	secret, err := s.sealer.Open(stored.Secret, secretAD(stored.Scope))
	if err != nil {
		return Endpoint{}, fmt.Errorf("open the signing secret of %s: %w", stored.Scope, err)
	}
	e := Endpoint{
		Scope:           stored.Scope,
		URL:             stored.URL,
		Secret:          string(secret),
		SecretCreatedAt: stored.SecretCreatedAt,
		UpdatedAt:       stored.UpdatedAt,
	}
	if stored.PreviousSecret != nil && s.now().Before(stored.PreviousSecretExpiresAt) {
		e.PreviousSecretExpiresAt = stored.PreviousSecretExpiresAt
	}
	return e, nil
}

// secretAD binds a sealed secret to its scope: one copied onto another
// scope's row does not open.
func secretAD(scope Scope) []byte {
	return []byte("esim webhook signing secret of " + scope.String())
}

// Ingest stores an event from ordering and, when its scope has an
// endpoint, the job that delivers it. An event whose
// id is stored already is not stored again: ordering publishes at least
// once. It reports whether the event was new. A ValidationError means
// the event can never be stored: its message is to be skipped.
func (s *Service) Ingest(ctx context.Context, e IncomingEvent) (bool, error) {
	if err := validIncoming(e); err != nil {
		return false, err
	}
	payload, err := render(e.ID, e.Type, e.CreatedAt, e.Scope.Environment, e.ThresholdPercent, e.Data)
	if err != nil {
		return false, err
	}
	added, err := s.store.AddEvent(ctx, NewEvent{
		ID: e.ID, Type: e.Type, Scope: e.Scope, OrderID: e.OrderID,
		CreatedAt: e.CreatedAt, Payload: payload, Trace: e.Trace,
	})
	if err != nil {
		return false, fmt.Errorf("store event %s: %w", e.ID, err)
	}
	return added, nil
}

// IngestMany is Ingest for many events in one transaction: the
// consumer's batch. invalid[i] is the ValidationError of es[i], which is
// not stored (its message is to be skipped); the others are stored, all
// or (err) none, and added[i] is Ingest's answer for es[i].
func (s *Service) IngestMany(ctx context.Context, es []IncomingEvent) (invalid []error, added []bool, err error) {
	invalid, added = make([]error, len(es)), make([]bool, len(es))
	batch := make([]NewEvent, 0, len(es))
	var stored []int // es's index of each of batch
	for i, e := range es {
		if invalid[i] = validIncoming(e); invalid[i] != nil {
			continue
		}
		payload, err := render(e.ID, e.Type, e.CreatedAt, e.Scope.Environment, e.ThresholdPercent, e.Data)
		if err != nil {
			if _, ok := errors.AsType[*ValidationError](err); ok {
				invalid[i] = err
				continue
			}
			return nil, nil, err
		}
		stored = append(stored, i)
		batch = append(batch, NewEvent{
			ID: e.ID, Type: e.Type, Scope: e.Scope, OrderID: e.OrderID,
			CreatedAt: e.CreatedAt, Payload: payload, Trace: e.Trace,
		})
	}
	news, err := s.store.AddEvents(ctx, batch)
	if err != nil {
		return nil, nil, fmt.Errorf("store %d events: %w", len(batch), err)
	}
	for j, n := range news {
		added[stored[j]] = n
	}
	return invalid, added, nil
}

// IncomingEvent is an event as ordering publishes it.
type IncomingEvent struct {
	// ID is evt_ and 32 lower-case hex digits.
	ID string
	// Type is any of EventTypes but Ping.
	Type  EventType
	Scope Scope
	// OrderID is the order the event is about: the order's, or for an
	// eSIM's or a top-up's event the eSIM's order.
	OrderID uuid.UUID
	// CreatedAt is when it happened.
	CreatedAt time.Time
	// ThresholdPercent is esim.usage's threshold crossed, one of
	// UsageThresholds; 0 on every other event.
	ThresholdPercent int32
	// Data is the order, eSIM or top-up as the partner API shows it
	// (JSON).
	Data json.RawMessage
	// Trace is the W3C trace context to continue.
	Trace map[string]string
}

// pingData is a test event's data.
var pingData = json.RawMessage(`{"message":"A test event from the eSIM platform: your endpoint works."}`)

// SendTestEvent stores a ping event for the scope and delivers it like
// any other: same queue, signing and attempts. ErrNotFound while no
// endpoint is set.
func (s *Service) SendTestEvent(ctx context.Context, scope Scope) (Event, error) {
	if err := validScope(scope); err != nil {
		return Event{}, err
	}
	if _, err := s.store.Endpoint(ctx, scope); err != nil {
		return Event{}, fmt.Errorf("endpoint of %s: %w", scope, err)
	}
	id, err := newEventID()
	if err != nil {
		return Event{}, err
	}
	now := input.Now(s.now)
	payload, err := render(id, Ping, now, scope.Environment, 0, pingData)
	if err != nil {
		return Event{}, err
	}
	var trace map[string]string
	if s.trace != nil {
		trace = s.trace(ctx)
	}
	if _, err := s.store.AddEvent(ctx, NewEvent{ID: id, Type: Ping, Scope: scope, CreatedAt: now, Payload: payload, Trace: trace}); err != nil {
		return Event{}, fmt.Errorf("store test event: %w", err)
	}
	e, err := s.store.Event(ctx, &scope, id)
	if err != nil {
		return Event{}, fmt.Errorf("read test event %s: %w", id, err)
	}
	return e, nil
}

// GetEvent returns an event with its attempts. ErrNotFound when there is
// none with id in scope (any scope when nil): an id of another scope is
// unknown here, and so is a malformed one.
func (s *Service) GetEvent(ctx context.Context, scope *Scope, id string) (Event, error) {
	if scope != nil {
		if err := validScope(*scope); err != nil {
			return Event{}, err
		}
	}
	if !eventID.MatchString(id) {
		return Event{}, fmt.Errorf("event %q: %w", id, ErrNotFound)
	}
	e, err := s.store.Event(ctx, scope, id)
	if err != nil {
		return Event{}, fmt.Errorf("event %s: %w", id, err)
	}
	return e, nil
}

// ListEvents returns a page of events, newest first, with their attempts.
func (s *Service) ListEvents(ctx context.Context, f EventFilter) (EventPage, error) {
	if f.Scope != nil {
		if err := validScope(*f.Scope); err != nil {
			return EventPage{}, err
		}
	}
	if f.Type != "" && !f.Type.Valid() {
		return EventPage{}, invalid("type", "must be one of "+typeList(EventTypes, EventType.Valid))
	}
	if f.Status != "" && !f.Status.Valid() {
		return EventPage{}, invalid("status", "must be pending, delivered, failed or no_endpoint")
	}
	limit, offset, err := paging(f.Page, f.Limit)
	if err != nil {
		return EventPage{}, err
	}
	events, total, err := s.store.ListEvents(ctx, f, limit, offset)
	if err != nil {
		return EventPage{}, fmt.Errorf("list events: %w", err)
	}
	return EventPage{Events: events, Total: total}, nil
}

// envelope is the body of every delivery, but for its data.
type envelope struct {
	ID          string      `json:"id"`
	Event       EventType   `json:"event"`
	CreatedAt   time.Time   `json:"created_at"`
	Environment Environment `json:"environment"`
	// ThresholdPercent is esim.usage's, never 0 there, and absent from
	// every other event.
	ThresholdPercent int32 `json:"threshold_percent,omitempty"`
}

// render is an event's body, rendered once and sent as is on every
// attempt, so that every attempt's signature covers the same bytes. The
// data goes in as it came, byte for byte: encoding/json would compact
// and re-escape it, and an order would no longer read as the partner
// API's.
func render(id string, t EventType, createdAt time.Time, env Environment, threshold int32, data json.RawMessage) ([]byte, error) {
	head, err := json.Marshal(envelope{ID: id, Event: t, CreatedAt: createdAt.UTC(), Environment: env, ThresholdPercent: threshold})
	if err != nil {
		return nil, fmt.Errorf("render event %s: %w", id, err)
	}
	if !json.Valid(data) {
		return nil, invalid("data", "must be JSON")
	}
	body := append(head[:len(head)-1:len(head)-1], `,"data":`...)
	body = append(body, data...)
	return append(body, '}'), nil
}

// eventID is the form of an event id, ordering's and ours alike.
var eventID = regexp.MustCompile(`^evt_[0-9a-f]{32}$`)

// newEventID is evt_ and the hex of a UUID v7, as ordering makes them:
// ids sort by time.
func newEventID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new event id: %w", err)
	}
	return "evt_" + hex.EncodeToString(id[:]), nil
}

func validIncoming(e IncomingEvent) error {
	if !eventID.MatchString(e.ID) {
		return invalid("id", "must be evt_ and 32 lower-case hex digits")
	}
	if !e.Type.Incoming() {
		return invalid("type", "must be one of "+typeList(EventTypes, EventType.Incoming))
	}
	if e.Type == EsimUsage {
		if !slices.Contains(UsageThresholds, e.ThresholdPercent) {
			return invalid("threshold_percent", "must be 50, 80 or 100 on esim.usage")
		}
	} else if e.ThresholdPercent != 0 {
		return invalid("threshold_percent", "is esim.usage's alone")
	}
	if err := validScope(e.Scope); err != nil {
		return err
	}
	if e.OrderID == uuid.Nil {
		return invalid("order_id", "must be the id of the order the event is about")
	}
	if e.CreatedAt.IsZero() || e.CreatedAt.Unix() <= 0 {
		return invalid("created_at", "is required")
	}
	if !json.Valid(e.Data) {
		return invalid(e.Type.About(), "must render as JSON")
	}
	return nil
}

// What an event's data is: an order, an eSIM or a top-up.
const (
	AboutOrder = "order"
	AboutEsim  = "esim"
	AboutTopUp = "topup"
)

// About is what t's data is, by its name's prefix (esim., topup.).
func (t EventType) About() string {
	switch {
	case strings.HasPrefix(string(t), "esim."):
		return AboutEsim
	case strings.HasPrefix(string(t), "topup."):
		return AboutTopUp
	}
	return AboutOrder
}

func validScope(s Scope) error {
	if s.AccountID == uuid.Nil {
		return invalid("scope.account_id", "must be an account's id, not the nil UUID")
	}
	if !s.Environment.Valid() {
		return invalid("scope.environment", "must be sandbox or live")
	}
	return nil
}

// validURL checks an endpoint URL's form and returns it parsed. Where it
// leads is checked apart (checkLiveDestination), and again when
// connecting, to the address actually dialled, since a name can resolve
// elsewhere by then.
func validURL(env Environment, raw string) (*url.URL, error) {
	const field = "url"
	if raw == "" {
		return nil, invalid(field, "is required")
	}
	if len(raw) > MaxURLLength {
		return nil, invalid(field, fmt.Sprintf("must be at most %d characters", MaxURLLength))
	}
	for i := range len(raw) {
		if raw[i] <= ' ' || raw[i] > '~' {
			return nil, invalid(field, "must be printable ASCII without spaces (percent-encode other characters)")
		}
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, invalid(field, "must be an absolute URL with a host, such as https://example.com/webhooks")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return nil, invalid(field, "must be an http or https URL")
	}
	if env == Live && u.Scheme != "https" {
		return nil, invalid(field, "must be https in live")
	}
	// A password in a URL is shown wherever the URL is, our attempt
	// records included; receivers authenticate deliveries by signature.
	if u.User != nil {
		return nil, invalid(field, "must not carry a user name or password")
	}
	// Never sent, so never what the partner meant.
	if u.Fragment != "" || u.RawFragment != "" || strings.Contains(raw, "#") {
		return nil, invalid(field, "must not have a fragment (#...)")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return nil, invalid(field, "must have a port from 1 to 65535, or none")
		}
	}
	host := u.Hostname()
	addr, err := netip.ParseAddr(host)
	switch {
	case strings.ContainsFunc(host, func(r rune) bool { return r > '~' }):
		// Percent-encoded in the URL, as url.Parse lets a host be.
		return nil, invalid(field, "must name its host in ASCII (an international name in its xn-- form)")
	case err == nil && addr.Zone() != "":
		return nil, invalid(field, "must not name a network interface (%25 in the host)")
	case err != nil && numericHost(host):
		// Read as an IPv4 address by some resolvers and not by others:
		// the address would depend on who reads it.
		return nil, invalid(field, "must name its host by a domain name or a plain IP address (such as 203.0.113.7), not a number in another form")
	}
	return u, nil
}

// paging checks a requested page and page size and returns the limit and
// offset to read.
func paging(page, limit int32) (int32, int64, error) {
	rules := input.Pages{DefaultLimit: DefaultPageLimit, MaxLimit: MaxPageLimit, MaxPage: MaxPage}
	p, field, reason := rules.Check(int(page), int(limit))
	if reason != "" {
		return 0, 0, invalid(field, reason)
	}
	return int32(p.Limit), int64(p.Offset()), nil
}
