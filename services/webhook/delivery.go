package webhook

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Request is one attempt to send an event, signed.
type Request struct {
	URL         string
	Environment Environment
	// EventID, Timestamp and Signature are the Standard Webhooks headers
	// webhook-id, webhook-timestamp and webhook-signature.
	EventID   string
	Timestamp int64
	Signature string
	Attempt   int
	Body      []byte
	// Trace is the W3C trace context the event was stored under.
	Trace map[string]string
}

// Response is what an endpoint answered, as far as it did.
type Response struct {
	// StatusCode is 0 when no status line came.
	StatusCode int
	// Body is the first ResponseBodyLimit bytes of the answer's body.
	Body []byte
	// Err says, in a few words fit for a partner's eyes, why no whole
	// answer came ("connection refused", "refused: 127.0.0.1 is a
	// loopback address"); "" when one did, whatever its status.
	Err string
}

// Poster sends requests to endpoints over the network. It refuses to
// connect to addresses an environment may not reach, and never follows
// redirects: the answer of the URL itself counts.
type Poster interface {
	Post(ctx context.Context, r Request) Response
}

// Result is an attempt's outcome, as recorded.
type Result struct {
	StatusCode   int
	Error        string
	ResponseBody []byte
	Duration     time.Duration
}

// Delivered reports whether the attempt succeeded: a whole answer with a
// 2xx status. Anything else, a redirect included, is a failure.
func (r Result) Delivered() bool {
	return r.Error == "" && r.StatusCode >= 200 && r.StatusCode <= 299
}

// Interrupted is the error of an attempt cut short by the service
// stopping, recorded at once on a clean stop, or by the next run of the
// job once the queue rescued it from a replica that died.
const Interrupted = "interrupted: the webhook service stopped during this attempt"

// recordBudget bounds the recording of an attempt's result, which runs
// even when the attempt was cut short by a stop.
const recordBudget = 5 * time.Second

// Outcome is what one run of an event's delivery job came to.
type Outcome struct {
	// Busy: the scope had MaxPerEndpoint attempts in flight, so nothing
	// was sent; the job is to run again shortly.
	Busy bool
	// Attempt is the number of the attempt made; 0 when none was (Busy,
	// or the delivery was over already).
	Attempt int
	// Next is the event's status after the attempt: StatusPending wants
	// another run after RetryIn; delivered and failed are final.
	Next    Status
	RetryIn time.Duration
}

// Retry reports whether the job has attempts left to make later.
func (o Outcome) Retry() bool { return o.Next == StatusPending }

// Deliver makes the next attempt of the event's delivery: the job queue
// calls it for each run of the event's job. Nothing is sent while the
// event's scope has its maximum of attempts in flight (Busy), nor once
// the delivery is over; an attempt whose predecessor was cut short by a
// crash first records that one as interrupted. ctx ending cuts the
// attempt short; its result is recorded all the same, as interrupted.
func (s *Service) Deliver(ctx context.Context, eventID string) (Outcome, error) {
	job, err := s.store.StartAttempt(ctx, eventID, AttemptRules{MaxPerScope: s.maxPerEndpoint, Interrupted: Interrupted})
	switch {
	case errors.Is(err, ErrScopeFull):
		return Outcome{Busy: true}, nil
	case errors.Is(err, ErrDeliveryOver):
		return Outcome{}, nil
	case err != nil:
		return Outcome{}, fmt.Errorf("start an attempt of event %s: %w", eventID, err)
	}

	result := s.attempt(ctx, job)
	out := Outcome{Attempt: job.Attempt, Next: StatusPending}
	switch {
	case result.Delivered():
		out.Next = StatusDelivered
	case job.Attempt >= MaxAttempts:
		out.Next = StatusFailed
	default:
		out.RetryIn = RetryDelay(job.Attempt)
	}
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordBudget)
	defer cancel()
	if err := s.store.Finish(recordCtx, job, result, out.Next); err != nil {
		return out, fmt.Errorf("record attempt %d of event %s: %w", job.Attempt, job.EventID, err)
	}
	if s.observe != nil {
		outcome := "failed"
		switch {
		case result.Delivered():
			outcome = "delivered"
		case result.Error == Interrupted:
			outcome = "interrupted"
		}
		s.observe(ctx, outcome, result.Duration)
	}
	return out, nil
}

// attempt signs and sends job's event once, within the attempt timeout.
func (s *Service) attempt(ctx context.Context, job Job) Result {
	secrets, err := s.signingSecrets(job)
	if err != nil {
		// Not the endpoint's fault and not worth a retry: the secrets
		// key changed under a running service, which CheckSecretsKey
		// keeps from starting.
		s.log.ErrorContext(ctx, "cannot sign a delivery", "event_id", job.EventID, "err", err)
		return Result{Error: "not sent: the signing secret could not be read"}
	}
	timestamp := s.now().Unix()
	signature, err := Sign(secrets, job.EventID, timestamp, job.Payload)
	if err != nil {
		s.log.ErrorContext(ctx, "cannot sign a delivery", "event_id", job.EventID, "err", err)
		return Result{Error: "not sent: the signing secret could not be read"}
	}

	// Started before the deadline is set, so that an attempt cut by it
	// measures the whole timeout.
	start := time.Now()
	attemptCtx, cancel := context.WithTimeout(ctx, s.attemptTimeout)
	defer cancel()
	resp := s.poster.Post(attemptCtx, Request{
		URL: job.URL, Environment: job.Scope.Environment, EventID: job.EventID,
		Timestamp: timestamp, Signature: signature, Attempt: job.Attempt,
		Body: job.Payload, Trace: job.Trace,
	})
	r := Result{StatusCode: resp.StatusCode, ResponseBody: resp.Body, Error: resp.Err, Duration: time.Since(start)}
	switch {
	case r.Error == "" && (r.StatusCode < 200 || r.StatusCode > 299):
		r.Error = "status " + strconv.Itoa(r.StatusCode)
	case r.Error != "" && ctx.Err() != nil:
		r.Error = Interrupted
	case r.Error != "" && errors.Is(attemptCtx.Err(), context.DeadlineExceeded):
		r.Error = "timed out after " + s.attemptTimeout.String()
	}
	return r
}

// signingSecrets are the secrets that sign job's attempt now, in the
// clear: the current one and, until it expires, the rotated-out one.
func (s *Service) signingSecrets(job Job) ([]string, error) {
	ad := secretAD(job.Scope)
	current, err := s.sealer.Open(job.Secret, ad)
	if err != nil {
		return nil, fmt.Errorf("open the current secret: %w", err)
	}
	secrets := []string{string(current)}
	if job.PreviousSecret != nil && s.now().Before(job.PreviousSecretExpiresAt) {
		previous, err := s.sealer.Open(job.PreviousSecret, ad)
		if err != nil {
			return nil, fmt.Errorf("open the previous secret: %w", err)
		}
		secrets = append(secrets, string(previous))
	}
	return secrets, nil
}
