package webhooktest

import (
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/esimplatform/esim/services/webhook"
)

// Answer is how a Receiver answers one delivery.
type Answer struct {
	// Status is the answer's status; 0 means 200.
	Status int
	Body   string
	// Hang holds the request, unanswered, until Release (then answers
	// Status) or until the sender gives up.
	Hang bool
	// Cut closes the connection without a word.
	Cut bool
	// Truncate answers Status announcing a body it cuts off halfway, then
	// closes the connection.
	Truncate bool
}

// Delivery is one request a Receiver got.
type Delivery struct {
	Header http.Header
	Body   []byte
	// At is when it arrived.
	At time.Time
	// Checks holds, for each secret the receiver trusted when the
	// delivery arrived, the Standard Webhooks library's verdict on it:
	// nil when it verified.
	Checks map[string]error
	Answer Answer
}

// ID is the delivery's webhook-id.
func (d Delivery) ID() string { return d.Header.Get("webhook-id") }

// VerifiedBy reports whether the library verified the delivery with
// secret, which the receiver trusted when it arrived.
func (d Delivery) VerifiedBy(secret string) bool {
	err, checked := d.Checks[secret]
	return checked && err == nil
}

// Receiver is a partner's endpoint for tests: it records every delivery,
// checks its signature with the public Standard Webhooks library (an
// implementation independent of the service's), and answers as scripted.
type Receiver struct {
	// URL is where it listens: http://127.0.0.1:port/hooks, or https://
	// for NewTLSReceiver's.
	URL    string
	server *httptest.Server

	mu         sync.Mutex
	secrets    []string
	script     []Answer
	deliveries []Delivery
	hanging    int
	maxHanging int
	// changed is closed, and replaced, whenever a delivery arrives or a
	// hanging one ends.
	changed chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewReceiver starts a plain HTTP receiver answering the i-th delivery
// with answers[i], and every one after the last with the last (200 when
// there are none). It stops when the test ends.
func NewReceiver(t testing.TB, answers ...Answer) *Receiver {
	t.Helper()
	r := newReceiver(answers)
	r.server = httptest.NewServer(r)
	r.URL = r.server.URL + "/hooks"
	r.open()
	t.Cleanup(r.close)
	return r
}

// NewTLSReceiver is NewReceiver over https, with a certificate for
// 127.0.0.1 that CAFile trusts.
func NewTLSReceiver(t testing.TB, answers ...Answer) *Receiver {
	t.Helper()
	r := newReceiver(answers)
	r.server = httptest.NewTLSServer(r)
	r.URL = r.server.URL + "/hooks"
	r.open()
	t.Cleanup(r.close)
	return r
}

func newReceiver(answers []Answer) *Receiver {
	return &Receiver{script: answers, changed: make(chan struct{}), release: make(chan struct{})}
}

// Addr is where the receiver listens, as host:port (127.0.0.1:port): an
// entry for SANDBOX_PRIVATE_ENDPOINTS.
func (r *Receiver) Addr() string { return r.server.Listener.Addr().String() }

// open makes the receiver one of Receivers.
func (r *Receiver) open() {
	receivers.mu.Lock()
	defer receivers.mu.Unlock()
	receivers.open[netip.MustParseAddrPort(r.Addr())]++
}

// close lets hanging requests go, so that the server can stop, and
// takes the receiver out of Receivers.
func (r *Receiver) close() {
	r.Release()
	r.server.Close()
	receivers.mu.Lock()
	defer receivers.mu.Unlock()
	ap := netip.MustParseAddrPort(r.Addr())
	if receivers.open[ap]--; receivers.open[ap] <= 0 {
		delete(receivers.open, ap)
	}
}

// Receivers are the addresses the running receivers of this process
// listen on, in either environment: Config lets the webhook service reach
// them, and no other loopback port. They come and go as tests start
// them, on ports picked as they listen, so no list fixed at start could
// name them.
var Receivers webhook.PrivateEndpoints = receivers

var receivers = &openReceivers{open: map[netip.AddrPort]int{}}

type openReceivers struct {
	mu   sync.Mutex
	open map[netip.AddrPort]int
}

func (o *openReceivers) Allows(_ webhook.Environment, addr netip.AddrPort) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.open[netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())] > 0
}

// CAFile writes the certificate of a TLS receiver to a PEM file, for
// ENDPOINT_CA_FILE, and returns its path. Every TLS receiver has the same
// certificate (httptest's), so one file trusts them all.
func (r *Receiver) CAFile(t testing.TB) string {
	t.Helper()
	cert := r.server.Certificate()
	if cert == nil {
		t.Fatal("CAFile of a receiver without TLS")
	}
	path := filepath.Join(t.TempDir(), "receiver-ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Trust sets the secrets deliveries are checked with from now on.
func (r *Receiver) Trust(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = slices.Clone(secrets)
}

// Release answers the hanging deliveries, and every later one that would
// hang, at once.
func (r *Receiver) Release() {
	r.once.Do(func() { close(r.release) })
}

// Deliveries returns what arrived so far, in order of arrival.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.deliveries)
}

// Hanging counts the deliveries held unanswered right now.
func (r *Receiver) Hanging() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hanging
}

// MaxHanging is the most deliveries held unanswered at once so far.
func (r *Receiver) MaxHanging() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.maxHanging
}

// Wait returns the deliveries once at least n arrived, or fails the test
// after within.
func (r *Receiver) Wait(t testing.TB, n int, within time.Duration) []Delivery {
	t.Helper()
	ok := r.WaitFor(within, func(d []Delivery, _ int) bool { return len(d) >= n })
	got := r.Deliveries()
	if !ok {
		t.Fatalf("%d deliveries after %s, want %d", len(got), within, n)
	}
	return got
}

// WaitFor waits until cond, given the deliveries and the number hanging,
// holds, and reports whether it did within.
func (r *Receiver) WaitFor(within time.Duration, cond func(deliveries []Delivery, hanging int) bool) bool {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		met, changed := cond(slices.Clone(r.deliveries), r.hanging), r.changed
		r.mu.Unlock()
		if met {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

// notify wakes the waiters; r.mu is held.
func (r *Receiver) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *Receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return // the sender gave up mid-request
	}
	r.mu.Lock()
	answer := Answer{}
	if n := len(r.deliveries); n < len(r.script) {
		answer = r.script[n]
	} else if len(r.script) > 0 {
		answer = r.script[len(r.script)-1]
	}
	d := Delivery{Header: req.Header.Clone(), Body: body, At: time.Now(), Checks: map[string]error{}, Answer: answer}
	for _, secret := range r.secrets {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, req.Header)
		}
		d.Checks[secret] = err
	}
	r.deliveries = append(r.deliveries, d)
	if answer.Hang {
		r.hanging++
		r.maxHanging = max(r.maxHanging, r.hanging)
	}
	r.notify()
	r.mu.Unlock()

	if answer.Hang {
		select {
		case <-r.release:
		case <-req.Context().Done():
		}
		r.mu.Lock()
		r.hanging--
		r.notify()
		r.mu.Unlock()
	}
	status := answer.Status
	if status == 0 {
		status = http.StatusOK
	}
	switch {
	case answer.Cut:
		cut(w)
	case answer.Truncate:
		w.Header().Set("Content-Length", strconv.Itoa(2*len(answer.Body)+2))
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer.Body+"x")
		_ = http.NewResponseController(w).Flush()
		cut(w)
	default:
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer.Body)
	}
}

// cut closes the request's connection under the handler.
func cut(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// CountingListener listens on a loopback port of its own, closed with the
// test, and counts the connections made to it: a test's proof that an
// address was never dialled. It returns the listener's host:port.
func CountingListener(t testing.TB) (addr string, accepted *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), accepted
}
