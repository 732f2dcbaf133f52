// Package httpsender posts webhook deliveries over HTTP to partners'
// endpoints, which are URLs anyone with an account may set: it is the
// platform's one client of addresses it does not choose, and so guards
// against server-side request forgery.
//
// Where a delivery may go is checked when connecting, on the address
// actually dialled (net.Dialer.Control), not on the URL: a name that
// resolves to 127.0.0.1 (localhost), to a private address, or to the
// cloud's metadata service (169.254.169.254) is refused however it got
// there, DNS rebinding included, by the domain's rule
// (webhook.CheckDestination). No proxy from the environment is used,
// since a proxy would dial for us, unchecked, and redirects are never
// followed: the URL's own answer counts.
package httpsender

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/esimplatform/esim/services/webhook"
)

// Options configure a Sender.
type Options struct {
	// PrivateEndpoints are the loopback, private and shared (CGNAT)
	// host:ports an environment's endpoints may reach: a receiver on a
	// developer's machine; nil opens none. Link-local (the metadata
	// service), multicast, unspecified and reserved addresses stay
	// refused whatever it says.
	PrivateEndpoints webhook.PrivateEndpoints
	// RootCAs are the authorities trusted for https endpoints; nil means
	// the system's.
	RootCAs *x509.CertPool
	// TracerProvider, when set, traces every attempt as a child of the
	// trace its event was stored under.
	TracerProvider trace.TracerProvider
}

// UserAgent names the platform to receivers, for their logs and
// firewalls.
const UserAgent = "esim-webhooks/1"

// Sender implements webhook.Poster.
type Sender struct {
	clients map[webhook.Environment]*http.Client
	tracer  trace.Tracer
}

var _ webhook.Poster = (*Sender)(nil)

// New returns a Sender with one HTTP client per environment, each
// refusing the addresses its environment may not reach.
func New(o Options) *Sender {
	s := &Sender{clients: map[webhook.Environment]*http.Client{}}
	for _, env := range webhook.Environments {
		s.clients[env] = newClient(env, o.PrivateEndpoints, o.RootCAs)
	}
	if o.TracerProvider != nil {
		s.tracer = o.TracerProvider.Tracer("github.com/esimplatform/esim/services/webhook/httpsender")
	}
	return s
}

func newClient(env webhook.Environment, allowed webhook.PrivateEndpoints, roots *x509.CertPool) *http.Client {
	dialer := &net.Dialer{
		// The attempt's context bounds the dial; this only caps it when
		// a caller forgot one.
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &Refusal{Reason: fmt.Sprintf("refused: cannot read the address %q", address)}
			}
			if err := webhook.CheckDestination(env, ap, allowed); err != nil {
				return &Refusal{Reason: "refused: " + err.Error()}
			}
			return nil
		},
	}
	return &http.Client{
		Transport: &http.Transport{
			// Never the environment's proxy: it would connect for us,
			// to wherever, past the check above.
			Proxy:             nil,
			DialContext:       dialer.DialContext,
			TLSClientConfig:   &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
			// A partner's endpoint gets a few attempts at once at most
			// (the per-endpoint cap); idle ones are kept for the next.
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		},
		// A redirect's target is another URL, unchecked by the partner's
		// settings and ours: a 3xx is the answer, and a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Refusal is the error of a connection refused before it was made.
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return r.Reason }

// drainLimit bounds what is read of an answer past the part recorded, to
// tell a whole answer from one cut off: a receiver sending more is not
// waited for.
const drainLimit = 64 << 10

// Post implements webhook.Poster.
func (s *Sender) Post(ctx context.Context, r webhook.Request) webhook.Response {
	client, ok := s.clients[r.Environment]
	if !ok {
		return webhook.Response{Err: fmt.Sprintf("not sent: unknown environment %q", r.Environment)}
	}
	if s.tracer != nil {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier(r.Trace))
		var span trace.Span
		ctx, span = s.tracer.Start(ctx, "webhook deliver", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(
				attribute.String("webhook.event_id", r.EventID),
				attribute.Int("webhook.attempt", r.Attempt),
				attribute.String("server.address", host(r.URL)),
			))
		defer span.End()
		resp := s.post(ctx, client, r)
		span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
		if resp.Err != "" || resp.StatusCode < 200 || resp.StatusCode > 299 {
			span.SetStatus(codes.Error, resp.Err)
		}
		return resp
	}
	return s.post(ctx, client, r)
}

func (s *Sender) post(ctx context.Context, client *http.Client, r webhook.Request) webhook.Response {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return webhook.Response{Err: "not sent: the URL does not parse"}
	}
	req.ContentLength = int64(len(r.Body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("webhook-id", r.EventID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(r.Timestamp, 10))
	req.Header.Set("webhook-signature", r.Signature)
	resp, err := client.Do(req)
	if err != nil {
		return webhook.Response{Err: describe(err)}
	}
	defer resp.Body.Close()
	out := webhook.Response{StatusCode: resp.StatusCode}
	out.Body, err = io.ReadAll(io.LimitReader(resp.Body, webhook.ResponseBodyLimit))
	if err == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	}
	if err != nil {
		out.Err = "the answer was cut off: " + describe(err)
	}
	return out
}

// describe says why a request got no whole answer, in a few words a
// partner can act on, without the URL (which the attempt shows anyway and
// whose query may hold a token of the partner's).
func describe(err error) string {
	var refusal *Refusal
	var dnsErr *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalidCert x509.CertificateInvalidError
	var tlsRecord tls.RecordHeaderError
	switch {
	case errors.As(err, &refusal):
		return refusal.Reason
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return "cannot resolve " + dnsErr.Name + ": no such host"
		}
		return "cannot resolve " + dnsErr.Name
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed before a whole answer"
	case errors.As(err, &unknownCA):
		return "TLS: certificate signed by an unknown authority"
	case errors.As(err, &hostname):
		return "TLS: " + hostname.Error()
	case errors.As(err, &invalidCert):
		return "TLS: " + invalidCert.Error()
	case errors.As(err, &tlsRecord):
		return "TLS: the server does not speak TLS"
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err.Error()
	}
	return err.Error()
}

// host is the URL's host, for a span: the path and query may hold a
// token of the partner's.
func host(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// Close closes the idle connections to endpoints.
func (s *Sender) Close() {
	for _, c := range s.clients {
		c.CloseIdleConnections()
	}
}
