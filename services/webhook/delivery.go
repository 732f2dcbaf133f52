package webhook

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
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
// stopping, recorded at once on a clean stop, or by the next replica to
// claim the job once its lease ran out.
const Interrupted = "interrupted: the webhook service stopped during this attempt"

// leaseMargin is how much longer than an attempt a job's lease lasts:
// time for the attempt's result to be recorded, so a lease runs out only
// on a replica that died or lost its database.
const leaseMargin = 5 * time.Second

// recordBudget bounds the recording of an attempt's result, which runs
// even when the attempt was cut short by a stop.
const recordBudget = 5 * time.Second

// wake tells an idle worker of env that a job may be due; it never
// blocks, and a wake-up already waiting covers this one.
func (s *Service) wake(env Environment) {
	select {
	case s.wakeups[env] <- struct{}{}:
	default:
	}
}

// DeliverNext claims one due delivery of env and makes its attempt, and
// reports whether it found one. ctx ending cuts the attempt short; its
// result is recorded all the same, as interrupted.
func (s *Service) DeliverNext(ctx context.Context, env Environment) (bool, error) {
	job, found, err := s.store.Claim(ctx, ClaimRules{
		Environment: env,
		MaxPerScope: s.maxPerEndpoint,
		Lease:       s.attemptTimeout + leaseMargin,
		Interrupted: Interrupted,
	})
	if err != nil || !found {
		return false, err
	}
	// Another worker may find the next job while this one sends: a
	// burst of jobs draws as many workers as it needs.
	s.wake(env)

	result := s.attempt(ctx, job)
	next := StatusPending
	switch {
	case result.Delivered():
		next = StatusDelivered
	case job.Attempt >= MaxAttempts:
		next = StatusFailed
	}
	var retryIn time.Duration
	if next == StatusPending {
		retryIn = RetryDelay(job.Attempt)
	}
	recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordBudget)
	defer cancel()
	if err := s.store.Finish(recordCtx, job, result, next, retryIn); err != nil {
		return true, fmt.Errorf("record attempt %d of event %s: %w", job.Attempt, job.EventID, err)
	}
	if next == StatusPending {
		// The retry is due retryIn after the result was recorded, by the
		// database's clock: waking once that has passed finds it due.
		time.AfterFunc(retryIn+10*time.Millisecond, func() { s.wake(env) })
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
	return true, nil
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

// Workers is a running pool of delivery workers.
type Workers struct {
	stopClaiming context.CancelFunc
	stopSending  context.CancelFunc
	done         chan struct{}
}

// StartWorkers starts, for each environment, Deps.Workers workers
// delivering its due jobs, which any replica's workers may take: each
// waits for a wake-up (a job stored here, a retry of its own falling
// due) or, for jobs of other replicas and retries whose wake-up was lost
// with a crash, the next poll. Sandbox and live have a pool each, so
// that no sandbox traffic, however slow its endpoints, takes a worker
// live needs.
func (s *Service) StartWorkers(poll time.Duration) *Workers {
	claiming, stopClaiming := context.WithCancel(context.Background())
	sending, stopSending := context.WithCancel(context.Background())
	w := &Workers{stopClaiming: stopClaiming, stopSending: stopSending, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { s.poll(claiming, poll) })
	for _, env := range Environments {
		for range s.workers {
			wg.Go(func() { s.work(claiming, sending, env) })
		}
	}
	go func() {
		wg.Wait()
		close(w.done)
	}()
	return w
}

// poll wakes a worker of each environment every interval.
func (s *Service) poll(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			for _, env := range Environments {
				s.wake(env)
			}
		}
	}
}

// errorPause is how long a worker waits after a failing claim (the
// database is down) before its next: not the poll, which would hammer a
// database in trouble hundreds of workers at a time.
const errorPause = time.Second

// work delivers env's jobs until claiming ends; sending ending cuts
// short the attempt in flight.
func (s *Service) work(claiming, sending context.Context, env Environment) {
	for {
		select {
		case <-claiming.Done():
			return
		case <-s.wakeups[env]:
		}
		for claiming.Err() == nil {
			found, err := s.DeliverNext(sending, env)
			if err != nil {
				if sending.Err() == nil {
					s.log.Warn("a delivery worker failed; pausing before its next claim", "pause", errorPause.String(), "err", err)
				}
				select {
				case <-claiming.Done():
				case <-time.After(errorPause):
				}
				break
			}
			if !found {
				break
			}
		}
	}
}

// Stop stops claiming jobs, lets the attempts in flight finish for up to
// budget, then cuts them short: they are recorded as interrupted and
// retried by whichever replica claims them next. It returns once every
// worker has returned.
func (w *Workers) Stop(budget time.Duration) {
	w.stopClaiming()
	select {
	case <-w.done:
	case <-time.After(budget):
		w.stopSending()
		<-w.done
	}
	w.stopSending()
}
