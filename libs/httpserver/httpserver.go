// Package httpserver runs a service's HTTP server the same way everywhere:
// health and readiness probes, Prometheus metrics (on the service's port or
// one of their own), request ids, tracing and a graceful shutdown that lets
// in-flight requests finish.
package httpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/netutil"

	"github.com/esimplatform/esim/libs/telemetry"
)

// Check reports whether a dependency is usable; readiness runs every check.
type Check func(ctx context.Context) error

// Routes describes what a service serves besides its application handler.
type Routes struct {
	// App serves everything but the probes.
	App http.Handler
	// Telemetry provides the meter for request metrics and, when tracing
	// is on, the tracer. Without it requests are not measured. /metrics
	// itself is not here: ListenAndServe serves it, where Config says.
	Telemetry *telemetry.Telemetry
	// Ready lists the checks behind /readyz, by name.
	Ready map[string]Check
	// Route names the route of a request the app did not name with
	// SetRoute. The default, the path, suits Twirp services, whose paths
	// are their methods; a public API with ids in its paths sets its
	// routes and names the rest with something fixed.
	Route func(*http.Request) string
	// Public marks an endpoint that faces the internet: a trace context
	// sent by a caller is linked, not continued, so outsiders cannot join
	// or steer our traces, and a caller's Request-Id is replaced, so every
	// id support is shown is one we issued.
	Public bool
	// AnswerPanic, when set, answers a request whose handler panicked
	// before writing anything, in the API's own error shape. The panic is
	// logged and counted either way; without it, or once an answer has
	// begun, the connection is aborted as net/http does.
	AnswerPanic http.HandlerFunc
	// AllowedHosts adds names an internal service (one not Public) answers
	// to, besides loopback, IP addresses and cluster names (see
	// InternalHost): a DNS name an operator gave it, say.
	AllowedHosts []string
	// MaxBodyBytes caps a request body (default DefaultMaxBodyBytes): a
	// handler reading past it gets an *http.MaxBytesError, and the
	// connection is closed after the answer. Without a cap a caller could
	// make any handler that reads a whole body hold as much as it sends.
	MaxBodyBytes int64
}

// Handler assembles the handler of a service's port: /healthz answers while
// the process runs, /readyz while every dependency answers, the app the
// rest. Probes are neither traced nor measured, to keep both about real
// traffic.
func Handler(r Routes) http.Handler {
	logger := slog.Default()
	if r.Telemetry != nil && r.Telemetry.Logger != nil {
		logger = r.Telemetry.Logger
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), ReadyCheckTimeout)
		defer cancel()
		// The body names the failed checks only: a driver's error carries
		// hosts, users and database names, which belong in the log.
		var failed []string
		for name, check := range r.Ready {
			if err := check(ctx); err != nil {
				failed = append(failed, name)
				logger.WarnContext(ctx, "not ready", "check", name, "err", err)
			}
		}
		if len(failed) > 0 {
			slices.Sort(failed)
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "failed": failed})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	route := r.Route
	if route == nil {
		route = func(req *http.Request) string { return req.URL.Path }
	}
	app := r.App
	if tel := r.Telemetry; tel != nil {
		mp := tel.MeterProvider
		if mp == nil {
			mp = noop.NewMeterProvider()
		}
		metrics := newServerMetrics(mp)
		if tel.TracerProvider != nil {
			// The request line and a panic's line are logged outside the
			// server span, after it ended: the slot keeps the span's ids
			// for them.
			inner := app
			app = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				if slot, ok := req.Context().Value(routeKey{}).(*routeSlot); ok {
					slot.span = trace.SpanContextFromContext(req.Context())
				}
				// Named once the handler has answered, when its route and
				// status are known: otelhttp names it as it starts, and
				// again as it ends only when a ServeMux pattern matched.
				defer func() { trace.SpanFromContext(req.Context()).SetName(metrics.spanName(req, route)) }()
				inner.ServeHTTP(w, req)
			})
			opts := []otelhttp.Option{
				otelhttp.WithTracerProvider(tel.TracerProvider),
				// Requests are measured below, once, with reused label sets.
				otelhttp.WithMeterProvider(noop.NewMeterProvider()),
				// Where otelhttp names the span, the same name.
				otelhttp.WithSpanNameFormatter(func(_ string, req *http.Request) string { return metrics.spanName(req, route) }),
			}
			if r.Public {
				// A caller's trace is linked, not continued, and its
				// baggage is not taken at all: extracted, it would ride
				// every onward call to the services as if we had set it.
				opts = append(opts,
					otelhttp.WithPublicEndpointFn(func(*http.Request) bool { return true }),
					otelhttp.WithPropagators(propagation.TraceContext{}))
			}
			// The operation name is unused: the formatter above names
			// every span.
			app = otelhttp.NewHandler(app, "", opts...)
		}
		// Outside the tracing, so the route slot SetRoute fills is in the
		// span's request too.
		app = metrics.measure(app, route, logger, r.AnswerPanic)
	}
	mux.Handle("/", app)
	maxBody := r.MaxBodyBytes
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	routes := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !r.Public {
			if reason := notForThisCaller(req, r.AllowedHosts, serviceForeignHost); reason != "" {
				refuse(w, req, logger, reason)
				return
			}
		}
		req.Body = http.MaxBytesReader(w, req.Body, maxBody)
		// ServeMux answers a path holding "//", "/./" or "/../" with a
		// redirect to its clean form and an HTML body. No route is called
		// that way; the app answers it in its own shape (the public API's
		// 404), not with a page or a redirect a client may follow with its
		// credentials. Nor with the bare 400 it gives "GET * HTTP/1.1".
		if Unroutable(req) {
			app.ServeHTTP(w, req)
			return
		}
		mux.ServeHTTP(w, req)
	})
	// Outermost, so probes carry a Request-Id too.
	return requestID(routes, !r.Public)
}

// notForThisCaller says why req must not be answered, or "" when it may.
// The internal services have no authentication yet, and /metrics none on
// any service: a web page an operator visits while a port-forward (or
// make run) is open must not reach them through the operator's browser. A
// page that rebinds its own DNS name to 127.0.0.1 sends that name as
// Host, which is not one InternalHost admits (with allowed); and a page's
// request carries an Origin or a Sec-Fetch-Site (fromBrowserPage), which
// no service, esimctl, probe or scraper sends. The second also holds
// where a name that passes the first can be served on the operator's own
// network (mDNS answers .local names). foreignHost words the refusal of
// a Host, given it.
func notForThisCaller(req *http.Request, allowed []string, foreignHost string) string {
	if fromBrowserPage(req) {
		return notForPages
	}
	if !InternalHost(req.Host, allowed) {
		return fmt.Sprintf(foreignHost, req.Host)
	}
	return ""
}

// The refusals of a Host: by an internal service's API and probes, and by
// /metrics, which ALLOWED_HOSTS does not reach.
const (
	serviceForeignHost = "this service answers only to IP addresses, localhost, cluster names and ALLOWED_HOSTS, not to %q; add the name to ALLOWED_HOSTS if it is yours"
	metricsForeignHost = "/metrics answers only to IP addresses, localhost and cluster names, not to %q"
)

// refuse answers 421 with reason and logs what the refusal was judged on.
// The body has the shape a Twirp client reads, since every internal
// service speaks Twirp: esimctl then shows the reason.
func refuse(w http.ResponseWriter, req *http.Request, log *slog.Logger, reason string) {
	log.WarnContext(req.Context(), "refused a request that may come from a web page: "+reason,
		"path", req.URL.Path, "host", req.Host, "origin", req.Header.Get("Origin"), "sec_fetch_site", req.Header.Get("Sec-Fetch-Site"))
	writeJSON(w, http.StatusMisdirectedRequest, map[string]string{"code": "permission_denied", "msg": reason})
}

const notForPages = "this service does not answer requests made by web pages (the request has an Origin, or Sec-Fetch-Site says a page sent it)"

// fromBrowserPage reports whether a web page's script or markup made req:
// it carries an Origin, as every POST from a browser does (every Twirp
// call is one), or a Sec-Fetch-Site other than "none". Browsers send
// Sec-Fetch-Site only to https and loopback addresses, so it catches a
// page on another local port (a dev server, a dashboard) reading a
// service's GETs, not a rebinding page on a plain-http name, whose
// same-origin GETs carry neither header: the Host check stops those.
// "none" is a person typing the address or opening a bookmark, which a
// developer may do for /readyz or /metrics.
func fromBrowserPage(req *http.Request) bool {
	if req.Header.Get("Origin") != "" {
		return true
	}
	site := req.Header.Get("Sec-Fetch-Site")
	return site != "" && site != "none"
}

// InternalHost reports whether an internal service answers a request whose
// Host header is host: an IP address, a name of one label (localhost, or
// a Kubernetes Service in the caller's namespace), a name ending in ".svc"
// or ".svc.cluster.local" (a Service by its cluster name), or one of
// allowed. A rebinding page has a name some public DNS zone gave out,
// which is none of these: ".svc" is no public suffix, and a "svc" label
// anywhere else (accounts.svc.attacker.example) proves nothing, so a
// cluster with another domain lists its names in allowed.
func InternalHost(host string, allowed []string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = hostName(strings.Trim(name, "[]"))
	switch {
	case name == "":
		return false
	case net.ParseIP(name) != nil, !strings.Contains(name, "."):
		return true
	case strings.HasSuffix(name, ".svc"), strings.HasSuffix(name, ".svc.cluster.local"):
		return true
	}
	return slices.ContainsFunc(allowed, func(a string) bool { return hostName(a) == name })
}

// hostName is a DNS name as compared: lower case, without the root's dot.
func hostName(s string) string { return strings.TrimSuffix(strings.ToLower(s), ".") }

// CheckAllowedHosts refuses an ALLOWED_HOSTS entry that could never match
// a Host: InternalHost compares whole bare names, so a port, a scheme, a
// path, a wildcard, an empty label (".example.com", often meant as one) or
// a blank would leave the service refusing the name its operator meant.
func CheckAllowedHosts(hosts []string) error {
	var errs []error
	for _, h := range hosts {
		name := hostName(h)
		if name == "" || strings.ContainsAny(h, ":/@*?[] \t") || slices.Contains(strings.Split(name, "."), "") {
			errs = append(errs, fmt.Errorf("ALLOWED_HOSTS entry %q: want a whole bare DNS name, such as accounts.internal.example.com (no scheme, port, path or wildcard)", h))
		}
	}
	return errors.Join(errs...)
}

// MaxHeaderBytes caps a request's header block; past it net/http answers
// 431 itself.
const MaxHeaderBytes = 64 << 10

// DefaultMaxBodyBytes is the body cap of a service that sets none: four
// times the largest call any service takes today, the catalogue's upsert of
// 1,000 plans (about 1 MiB of JSON).
const DefaultMaxBodyBytes = 4 << 20

// Unroutable reports whether ServeMux would answer r itself instead of
// routing it: with a redirect to a cleaner path ("//", "/./", "/../"), or
// with a bare 400 to the request target "*".
func Unroutable(r *http.Request) bool {
	if r.RequestURI == "*" {
		return true
	}
	p := r.URL.Path
	if p == "" {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean != p
}

// requestID keeps the caller's Request-Id (the gateway sets one for every
// request it passes on) when trustCaller and it looks like an id (see
// validRequestID), or makes one, echoes it on the response and puts it in
// the request context for logs and onward calls.
func requestID(next http.Handler, trustCaller bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var id string
		if trustCaller {
			id = r.Header.Get(telemetry.RequestIDHeader)
		}
		if !validRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set(telemetry.RequestIDHeader, id)
		next.ServeHTTP(w, r.WithContext(telemetry.WithRequestID(r.Context(), id)))
	})
}

// maxRequestIDLen bounds a caller's id: ours are 28 characters, a UUID 36.
const maxRequestIDLen = 128

// validRequestID reports whether id may be taken from a caller: 1 to 128
// ASCII letters, digits and "-_.:". The id lands in every log line, span
// and error body of the request, so nothing that reads as more than an id
// (spaces, quotes, "key=value", control or bidirectional-text characters)
// gets in.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// newRequestID returns a fresh request id such as "req_6f1c...".
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ReadyCheckTimeout bounds /readyz's checks. It is under the charts'
// probe timeout (2 s), so a hung dependency gets the 503 naming it rather
// than a probe timeout that names nothing.
const ReadyCheckTimeout = 1500 * time.Millisecond

// ErrShutdown is the cause of a request's context when the service cut it
// at the end of its grace period.
var ErrShutdown = errors.New("cut short by the service's shutdown")

// CutByShutdown tells a request cut by the service's own shutdown from one
// whose caller gave up: the first is worth a warning, the second is not.
func CutByShutdown(ctx context.Context) bool { return errors.Is(context.Cause(ctx), ErrShutdown) }

// Config is the part of every service's configuration that serving reads.
type Config struct {
	Addr string `env:"HTTP_ADDR, default=:8080"`
	// MetricsAddr, when set, serves /metrics there and only there. A
	// NetworkPolicy admits by port, not path: with /metrics on the API's
	// port, whoever may scrape a service may also call its API, which
	// for accounts and catalogue includes minting keys. Empty serves
	// /metrics on Addr, which suits a developer's machine.
	MetricsAddr string `env:"METRICS_ADDR"`
	// ShutdownTimeout is how long in-flight requests get to finish once the
	// service is told to stop.
	ShutdownTimeout time.Duration `env:"SHUTDOWN_TIMEOUT, default=20s"`
	// MaxConnections caps the connections the API port serves at once;
	// past it, new ones wait in the kernel's accept queue until one
	// closes. Every open connection holds a goroutine and its buffers, an
	// idle one for up to IdleTimeout, so without a cap a client opening
	// connections by the thousand could take a service past its memory
	// limit. 0 is no cap.
	MaxConnections int `env:"MAX_CONNECTIONS, default=4096"`
}

// Validate refuses a grace period that would cut every request in flight
// the moment the service is told to stop.
func (c Config) Validate() error {
	var errs []error
	// Empty is net.Listen's any port; the environment never gives it, as
	// HTTP_ADDR has a default and an empty METRICS_ADDR means none.
	if c.Addr != "" {
		errs = append(errs, checkListenAddr("HTTP_ADDR", c.Addr))
	}
	if c.MetricsAddr != "" {
		errs = append(errs, checkListenAddr("METRICS_ADDR", c.MetricsAddr))
	}
	if c.MaxConnections < 0 || c.MaxConnections > maxConnections {
		errs = append(errs, fmt.Errorf("MAX_CONNECTIONS %d: must be from 0 (no cap) to %d", c.MaxConnections, maxConnections))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("SHUTDOWN_TIMEOUT %s: must be positive: in-flight requests get that long to finish on SIGTERM", c.ShutdownTimeout))
	}
	// Port 0 asks the kernel for a free port each time, so two of them
	// never clash.
	if _, port, _ := net.SplitHostPort(c.MetricsAddr); c.MetricsAddr != "" && c.MetricsAddr == c.Addr && port != "0" {
		errs = append(errs, fmt.Errorf("METRICS_ADDR %q is HTTP_ADDR too: give /metrics a port of its own, or leave METRICS_ADDR empty to serve it on HTTP_ADDR", c.MetricsAddr))
	}
	return errors.Join(errs...)
}

// maxConnections bounds MAX_CONNECTIONS where a typo (an extra digit or
// three) would amount to no cap at all.
const maxConnections = 1_000_000

// checkListenAddr refuses an address net.Listen would refuse for its form,
// so that it is reported with every other bad setting instead of alone,
// once the service has connected to everything else.
func checkListenAddr(name, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("%s %q: want [host]:port, such as :8080 or 127.0.0.1:8080 (%v)", name, addr, err)
	}
	return nil
}

// ListenAndServe listens on cfg.Addr and, when set, cfg.MetricsAddr, so
// that a taken port fails the start loudly, then serves h and metrics (a
// Prometheus handler; nil serves none) as Serve does: GET /metrics on its
// own listener, or in front of h on cfg.Addr. When ctx ends the API
// drains first and the metrics listener after it, within the one grace
// period; either listener failing stops the other. /metrics answers only
// internal Hosts, and no web page (see notForThisCaller).
func ListenAndServe(ctx context.Context, log *slog.Logger, cfg Config, h, metrics http.Handler) error {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if cfg.MaxConnections > 0 {
		ln = netutil.LimitListener(ln, cfg.MaxConnections)
	}
	if metrics == nil {
		return Serve(ctx, log, ln, h, cfg.ShutdownTimeout)
	}
	if cfg.MetricsAddr == "" {
		return Serve(ctx, log, ln, withMetrics(log, h, metrics), cfg.ShutdownTimeout)
	}
	metricsLn, err := net.Listen("tcp", cfg.MetricsAddr)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("listen on %s (METRICS_ADDR): %w", cfg.MetricsAddr, err)
	}
	return serveWithMetrics(ctx, log, ln, metricsLn, h, metrics, cfg.ShutdownTimeout)
}

// serveWithMetrics serves h on ln and metrics on metricsLn, as
// ListenAndServe does with METRICS_ADDR set.
func serveWithMetrics(ctx context.Context, log *slog.Logger, ln, metricsLn net.Listener, h, metrics http.Handler, grace time.Duration) error {
	// The metrics listener stops once the API's has drained, so a scrape
	// during the drain still sees the requests it finishes; either
	// listener failing stops the other. They share one deadline: the
	// metrics listener gets what the API's drain left of the grace
	// period, so stopping stays within SHUTDOWN_TIMEOUT, which the charts
	// budget once.
	var deadline atomic.Int64 // Unix ns; 0 until the API begins its drain
	apiGrace := func() time.Duration {
		deadline.Store(time.Now().Add(grace).UnixNano())
		return grace
	}
	metricsGrace := func() time.Duration {
		if d := deadline.Load(); d != 0 {
			return max(time.Until(time.Unix(0, d)), 0)
		}
		return grace
	}
	apiCtx, stopAPI := context.WithCancel(ctx)
	defer stopAPI()
	metricsCtx, stopMetrics := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMetrics()
	errc := make(chan error, 2)
	go func() {
		errc <- serve(apiCtx, log, ln, h, apiGrace)
		stopMetrics()
	}()
	go func() {
		metricsLog := log.With("serving", "metrics")
		err := serve(metricsCtx, metricsLog, metricsLn, withMetrics(metricsLog, http.NotFoundHandler(), metrics), metricsGrace)
		if err != nil {
			// Its grace period is what the API's drain left: 0s, if
			// that took all of SHUTDOWN_TIMEOUT.
			err = fmt.Errorf("metrics listener, stopped after the API's drain: %w", err)
		}
		errc <- err
		stopAPI()
	}()
	return errors.Join(<-errc, <-errc)
}

// withMetrics serves GET (and HEAD) /metrics from metrics and the rest
// from h. /metrics answers only internal Hosts and no page
// (notForThisCaller): where it shares the API's port it sits in front of
// the API's own checks. Prometheus scrapes by pod IP.
func withMetrics(log *slog.Logger, h, metrics http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			if reason := notForThisCaller(r, nil, metricsForeignHost); reason != "" {
				refuse(w, r, log, reason)
				return
			}
			metrics.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Without a deadline on the whole request and on writing the answer, a
// client could hold a connection, its goroutine and buffers forever: by
// announcing a body and never sending it (net/http reads a small body the
// handler left unread before it sends the answer), or by never reading
// what it asked for. A body at the 4 MiB cap arrives well within
// ReadTimeout on any working link, and no handler runs near WriteTimeout
// (the gateway bounds SERVICE_TIMEOUT under it).
const (
	ReadTimeout  = 30 * time.Second
	WriteTimeout = time.Minute
)

// Variables so tests can shorten them.
var (
	readTimeout  = ReadTimeout
	writeTimeout = WriteTimeout
)

// Serve serves h on ln until ctx is cancelled, then shuts down gracefully:
// new connections are refused and in-flight requests get up to grace to
// finish. Requests still running then are cut (their contexts cancelled,
// so they stop using what the service closes next) and Serve returns an
// error saying so. Under Kubernetes the chart's preStop sleep, before
// SIGTERM, is what lets the endpoint's removal reach every client first.
func Serve(ctx context.Context, log *slog.Logger, ln net.Listener, h http.Handler, grace time.Duration) error {
	return serve(ctx, log, ln, h, func() time.Duration { return grace })
}

// serve is Serve with the grace period decided when the shutdown begins.
func serve(ctx context.Context, log *slog.Logger, ln net.Listener, h http.Handler, gracePeriod func() time.Duration) error {
	// Requests outlive ctx by the grace period, and are then cut with a
	// cause of their own.
	base, cut := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cut(nil)
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       120 * time.Second,
		// A request's headers are a key, a trace context and an id. Go's
		// default, 1 MiB, would let each connection hold a megabyte of
		// headers before any handler could refuse them.
		MaxHeaderBytes: MaxHeaderBytes,
		BaseContext:    func(net.Listener) context.Context { return base },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String())

	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	grace := gracePeriod()
	log.Info("shutting down", "grace", grace.String())
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		// Cancelling the requests' contexts stops them using a database
		// pool about to close; closing the connections ends them.
		cut(ErrShutdown)
		_ = srv.Close()
		<-errc
		return fmt.Errorf("shutdown: requests still running after the grace period of %s were cut: %w", grace, err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
