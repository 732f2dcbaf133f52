// Package es2plus is a client of the GSMA SGP.22 ES2+ interface, which an
// operator uses to reserve, release and cancel eSIM profiles on an
// SM-DP+. It speaks JSON over HTTPS with mutual TLS and has one method per
// ES2+ function; the ordering provider is built on it. The operator's
// side of ES2+, the SM-DP+'s handleDownloadProgressInfo, is served by
// NotificationHandler (notifications.go).
//
// Every call ends in one of: success; a *FunctionError, the SM-DP+'s
// definitive refusal; or a *CallError whose Kind (ErrTimeout,
// ErrTransport, ErrProtocol, ErrCanceled) leaves the outcome unknown, since
// the SM-DP+ may have executed the function before its answer was lost.
package es2plus

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/esimplatform/esim/libs/mtls"
)

const (
	// DefaultProtocolVersion is sent in X-Admin-Protocol on every call of
	// a Config without one.
	DefaultProtocolVersion = "gsma/rsp/v2.5.0"
	// ContentType is that of every request, as SGP.22's HTTP binding
	// writes it.
	ContentType = "application/json;charset=UTF-8"
	// PathPrefix is the path of the functions below the SM-DP+'s URL.
	PathPrefix = "/gsma/rsp2/es2plus/"
	// MaxResponseBytes bounds a response body: ES2+ answers are a few
	// hundred bytes, and a larger one is not worth reading.
	MaxResponseBytes = 1 << 20
	// DefaultTimeout is the per-call timeout of a Config without one.
	DefaultTimeout = 10 * time.Second
)

const instrumentationName = "github.com/esimplatform/esim/services/ordering/es2plus"

// Config says where the SM-DP+ is and how to authenticate to it.
type Config struct {
	// URL is the SM-DP+'s base URL (https), without the ES2+ path.
	URL string
	// CertFile and KeyFile hold the client's certificate chain and
	// private key (PEM); CAFile the CA certificates that sign the
	// SM-DP+'s certificate (PEM). The system roots are not trusted.
	CertFile, KeyFile, CAFile string
	// Timeout bounds each call; DefaultTimeout when zero.
	Timeout time.Duration
	// RequesterID is the functionRequesterIdentifier of every call, the
	// operator's identity at the SM-DP+.
	RequesterID string
	// ProtocolVersion is sent in X-Admin-Protocol (gsma/rsp/v2.x.y, as
	// agreed with the SM-DP+); DefaultProtocolVersion when empty.
	ProtocolVersion string
}

// protocolVersion is what X-Admin-Protocol may say: ES2+ of SGP.22 v2.
var protocolVersion = regexp.MustCompile(`^gsma/rsp/v2\.[0-9]+\.[0-9]+$`)

// ValidProtocolVersion reports whether v can be sent in X-Admin-Protocol.
func ValidProtocolVersion(v string) bool { return protocolVersion.MatchString(v) }

// Option changes a Client's defaults.
type Option func(*options)

type options struct {
	tp  trace.TracerProvider
	mp  metric.MeterProvider
	log *slog.Logger
}

// WithLogger logs what the SM-DP+ warns of (Executed-WithWarning) to log
// (discarded by default).
func WithLogger(log *slog.Logger) Option {
	return func(o *options) {
		if log != nil {
			o.log = log
		}
	}
}

// WithTracerProvider makes each call a span of tp (no-op by default).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) {
		if tp != nil {
			o.tp = tp
		}
	}
}

// WithMeterProvider records each call's duration in mp (no-op by default).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) {
		if mp != nil {
			o.mp = mp
		}
	}
}

// Client calls the ES2+ functions of one SM-DP+. It is safe for concurrent
// use.
type Client struct {
	base        string
	requesterID string
	version     string
	log         *slog.Logger
	timeout     time.Duration
	http        *http.Client
	transport   *http.Transport
	tracer      trace.Tracer
	duration    metric.Float64Histogram
}

// New loads the certificates of cfg and makes a Client.
func New(cfg Config, opts ...Option) (*Client, error) {
	o := options{tp: tracenoop.NewTracerProvider(), mp: metricnoop.NewMeterProvider(), log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("es2plus: URL: %w", err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("es2plus: URL %q: must be an https URL (ES2+ needs mutual TLS)", cfg.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("es2plus: URL %q: must have no query or fragment", cfg.URL)
	}
	if cfg.RequesterID == "" {
		return nil, errors.New("es2plus: RequesterID is required")
	}
	version := cfg.ProtocolVersion
	if version == "" {
		version = DefaultProtocolVersion
	}
	if !ValidProtocolVersion(version) {
		return nil, fmt.Errorf("es2plus: ProtocolVersion %q: want gsma/rsp/v2.x.y", version)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("es2plus: Timeout %s is negative", cfg.Timeout)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	tlsConfig, err := loadTLS(cfg)
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	transport.ForceAttemptHTTP2 = true
	duration, err := o.mp.Meter(instrumentationName).Float64Histogram(
		"es2plus.client.call.duration",
		metric.WithDescription("Duration of ES2+ calls to the SM-DP+, by function and outcome."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
	)
	if err != nil {
		return nil, fmt.Errorf("es2plus: histogram: %w", err)
	}
	return &Client{
		base:        strings.TrimRight(u.String(), "/"),
		requesterID: cfg.RequesterID,
		version:     version,
		log:         o.log,
		timeout:     timeout,
		// No client-level Timeout: each call's context carries it, so a
		// timeout is one error whatever part of the call it cut.
		http: &http.Client{
			Transport: transport,
			// ES2+ is never redirected; following one would send the
			// call somewhere the operator did not configure.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		transport: transport,
		tracer:    o.tp.Tracer(instrumentationName),
		duration:  duration,
	}, nil
}

func loadTLS(cfg Config) (*tls.Config, error) {
	for _, f := range []struct{ name, path string }{{"CertFile", cfg.CertFile}, {"KeyFile", cfg.KeyFile}, {"CAFile", cfg.CAFile}} {
		if f.path == "" {
			return nil, fmt.Errorf("es2plus: %s is required", f.name)
		}
	}
	c, err := mtls.Client(cfg.CertFile, cfg.KeyFile, cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("es2plus: %w", err)
	}
	return c, nil
}

// Close closes the idle connections to the SM-DP+.
func (c *Client) Close() {
	c.transport.CloseIdleConnections()
}

// DownloadOrder reserves a profile of req.ProfileType (or the profile
// req.ICCID) and returns its ICCID, which is always valid and normalised
// (NormalizeICCID).
func (c *Client) DownloadOrder(ctx context.Context, req DownloadOrderRequest) (string, error) {
	return c.DownloadOrderAs(ctx, uuid.NewString(), req)
}

// DownloadOrderAs is DownloadOrder with the functionCallIdentifier the
// caller chose and recorded before calling: the same call sent again
// with it asks an SM-DP+ that dedupes calls for its first answer, which
// is how a caller that lost the answer learns what was reserved.
func (c *Client) DownloadOrderAs(ctx context.Context, callID string, req DownloadOrderRequest) (string, error) {
	var iccid string
	err := c.call(ctx, FunctionDownloadOrder, callID,
		func(h requestHeader) ([]byte, error) { return encodeDownloadOrder(h, req) },
		func(body []byte) (w *Warning, err error) {
			iccid, w, err = decodeDownloadOrder(body, req.ICCID)
			return w, err
		},
		attribute.String("es2plus.profile_type", req.ProfileType))
	if err != nil {
		return "", err
	}
	return iccid, nil
}

// ConfirmOrder confirms the reserved profile req.ICCID and, with
// req.ReleaseFlag, releases it for download. The response always has a
// MatchingID; SMDPAddress is "" when the SM-DP+ left it out.
func (c *Client) ConfirmOrder(ctx context.Context, req ConfirmOrderRequest) (ConfirmOrderResponse, error) {
	var resp ConfirmOrderResponse
	err := c.call(ctx, FunctionConfirmOrder, uuid.NewString(),
		func(h requestHeader) ([]byte, error) { return encodeConfirmOrder(h, req) },
		func(body []byte) (w *Warning, err error) {
			resp, w, err = decodeConfirmOrder(body)
			return w, err
		},
		attribute.String("es2plus.iccid", req.ICCID))
	if err != nil {
		return ConfirmOrderResponse{}, err
	}
	return resp, nil
}

// CancelOrder gives back the profile req.ICCID, which then takes
// req.FinalProfileStatusIndicator (FinalProfileStatusAvailable to return
// it to the pool).
func (c *Client) CancelOrder(ctx context.Context, req CancelOrderRequest) error {
	return c.call(ctx, FunctionCancelOrder, uuid.NewString(),
		func(h requestHeader) ([]byte, error) { return encodeCancelOrder(h, req) },
		decodeCancelOrder,
		attribute.String("es2plus.iccid", req.ICCID))
}

// call makes one ES2+ call: encode, POST, decode, and the span and metric
// of it.
func (c *Client) call(ctx context.Context, function, callID string, encode func(requestHeader) ([]byte, error), decode func([]byte) (*Warning, error), attrs ...attribute.KeyValue) (err error) {
	start := time.Now()
	ctx, span := c.tracer.Start(ctx, "es2plus "+function,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs,
			attribute.String("es2plus.function", function),
			attribute.String("es2plus.function_call_identifier", callID),
		)...))
	defer func() {
		err = stamp(err, function, callID)
		outcome := Outcome(err)
		span.SetAttributes(attribute.String("es2plus.outcome", outcome))
		var fe *FunctionError
		if errors.As(err, &fe) {
			span.SetAttributes(
				attribute.String("es2plus.subject_code", clip(fe.SubjectCode, 32)),
				attribute.String("es2plus.reason_code", clip(fe.ReasonCode, 32)),
			)
		}
		if err != nil {
			span.SetStatus(codes.Error, outcome)
			span.RecordError(err)
		}
		span.End()
		// A fresh context: a cancelled caller must still be counted.
		c.duration.Record(context.WithoutCancel(ctx), time.Since(start).Seconds(),
			metric.WithAttributes(
				attribute.String("function", function),
				attribute.String("outcome", outcome),
			))
	}()

	body, err := encode(requestHeader{FunctionRequesterIdentifier: c.requesterID, FunctionCallIdentifier: callID})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+PathPrefix+function, bytes.NewReader(body))
	if err != nil {
		return &CallError{Kind: ErrInvalidRequest, Err: err}
	}
	req.Header.Set("Content-Type", ContentType)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Admin-Protocol", c.version)

	resp, err := c.http.Do(req)
	if err != nil {
		return transportError(ctx, err)
	}
	defer resp.Body.Close()
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	// Read (a bounded part of) the body even for a non-200 answer so the
	// connection can be reused.
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return transportError(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return &CallError{Kind: ErrProtocol, Err: fmt.Errorf("HTTP status %d", resp.StatusCode)}
	}
	if len(data) > MaxResponseBytes {
		return &CallError{Kind: ErrProtocol, Err: fmt.Errorf("response is larger than %d bytes", MaxResponseBytes)}
	}
	warning, err := decode(data)
	if warning != nil {
		span.SetAttributes(attribute.String("es2plus.warning", clip(warning.SubjectCode, 32)+"/"+clip(warning.ReasonCode, 32)))
		c.log.WarnContext(ctx, "the SM-DP+ executed an ES2+ call with a warning",
			"function", function, "function_call_identifier", callID,
			"subject_code", clip(warning.SubjectCode, 32), "reason_code", clip(warning.ReasonCode, 32),
			"subject_identifier", clip(warning.SubjectIdentifier, 64), "message", clip(warning.Message, 200))
	}
	if errors.Is(err, ErrProtocol) && ctx.Err() != nil {
		// The deadline cut the body short, and the transport may show
		// that as an early end rather than an error: what arrived is a
		// part of the answer, not garbage.
		return transportError(ctx, ctx.Err())
	}
	return err
}

// transportError sorts a failure to get an answer into timeout, canceled
// and transport error.
func transportError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return &CallError{Kind: ErrTimeout, Err: err}
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled):
		return &CallError{Kind: ErrCanceled, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &CallError{Kind: ErrTimeout, Err: err}
	}
	return &CallError{Kind: ErrTransport, Err: err}
}

// stamp fills in the function and call id of an error made below call,
// so every error names the call an operator can look up at the SM-DP+.
func stamp(err error, function, callID string) error {
	var fe *FunctionError
	if errors.As(err, &fe) {
		fe.Function, fe.FunctionCallIdentifier = function, callID
		return err
	}
	var ce *CallError
	if errors.As(err, &ce) {
		ce.Function, ce.FunctionCallIdentifier = function, callID
		return err
	}
	if err != nil && errors.Is(err, ErrInvalidRequest) {
		return &CallError{Function: function, FunctionCallIdentifier: callID, Kind: ErrInvalidRequest, Err: stripKind(err, ErrInvalidRequest)}
	}
	return err
}

// stripKind keeps the detail of an error made as fmt.Errorf("%w: ...",
// kind) so the kind is not named twice in the message.
func stripKind(err, kind error) error {
	msg := strings.TrimPrefix(err.Error(), kind.Error()+": ")
	return errors.New(msg)
}
