package webhook_test

import (
	"context"
	"errors"
	"hash/fnv"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	. "github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/aesgcm"
)

// fuzzResolver resolves each name to a public or a private address, or
// to nothing, as a hash of the name says: a live URL must be refused
// exactly when its name resolves to a private one.
type fuzzResolver struct{}

var (
	publicAddr  = netip.MustParseAddr("93.184.216.34")
	privateAddr = netip.MustParseAddr("10.0.0.7")
)

func (fuzzResolver) resolve(host string) []netip.Addr {
	h := fnv.New32a()
	h.Write([]byte(host))
	switch h.Sum32() % 3 {
	case 0:
		return []netip.Addr{publicAddr}
	case 1:
		return []netip.Addr{publicAddr, privateAddr}
	}
	return nil
}

func (r fuzzResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if addrs := r.resolve(host); addrs != nil {
		return addrs, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// endsInNumber is the WHATWG URL standard's test of a host that browsers
// read as an IPv4 address: its last label is digits, or 0x and hex.
func endsInNumber(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	last := strings.ToLower(labels[len(labels)-1])
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// FuzzSetEndpointURL sets any string as an endpoint URL, in sandbox or
// live. It never panics; it refuses only with a ValidationError naming
// url; and a URL it accepts is one the sender sends as it was checked:
// printable ASCII of at most MaxURLLength, http or https (https in live),
// a host in ASCII that is a name or a plain IP address, a port from 1 to
// 65535 if any, no user info, no fragment; parsed alike by net/http; in
// live, neither an address nor a name resolving to one that live
// endpoints may not reach.
func FuzzSetEndpointURL(f *testing.F) {
	sealer, err := aesgcm.New(make([]byte, aesgcm.KeySize))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string, live bool) {
		env := Sandbox
		if live {
			env = Live
		}
		svc := NewService(Deps{Store: newFakeStore(), Sealer: sealer, Poster: &poster{}, Resolver: fuzzResolver{}})
		e, err := svc.SetEndpoint(context.Background(), Scope{AccountID: uuid.New(), Environment: env}, raw)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != "url" || ve.Reason == "" {
				t.Fatalf("%s %q: %v (%T), want a ValidationError on url", env, raw, err, err)
			}
			return
		}
		if e.URL != raw {
			t.Fatalf("%s %q stored as %q", env, raw, e.URL)
		}
		if len(raw) > MaxURLLength || strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r > '~' }) || strings.Contains(raw, "#") {
			t.Fatalf("%s %q accepted: too long, not printable ASCII, or with a fragment", env, raw)
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("%s %q accepted, but does not parse: %v", env, raw, err)
		}
		scheme := strings.ToLower(u.Scheme)
		if (scheme != "https" && scheme != "http") || (live && scheme != "https") {
			t.Fatalf("%s %q accepted with scheme %q", env, raw, u.Scheme)
		}
		host := u.Hostname()
		if host == "" || u.Opaque != "" || u.User != nil || u.Fragment != "" {
			t.Fatalf("%s %q accepted: host %q, opaque %q, user %v, fragment %q", env, raw, host, u.Opaque, u.User, u.Fragment)
		}
		if strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r > '~' }) {
			t.Fatalf("%s %q accepted with the host %q", env, raw, host)
		}
		port := uint64(443)
		if scheme == "http" {
			port = 80
		}
		if p := u.Port(); p != "" {
			if port, err = strconv.ParseUint(p, 10, 16); err != nil || port == 0 {
				t.Fatalf("%s %q accepted with the port %q", env, raw, p)
			}
		}
		addr, ipErr := netip.ParseAddr(host)
		if ipErr == nil && addr.Zone() != "" {
			t.Fatalf("%s %q accepted with a zone", env, raw)
		}
		if ipErr != nil && endsInNumber(host) {
			t.Fatalf("%s %q accepted with the host %q, which browsers read as an IPv4 address", env, raw, host)
		}
		// The sender parses the URL again to send it: it must read the
		// same host and port.
		req, err := http.NewRequest(http.MethodPost, raw, nil)
		if err != nil || req.URL.Hostname() != host || req.URL.Port() != u.Port() {
			t.Fatalf("%s %q accepted, but the sender reads it as %v (%v)", env, raw, req, err)
		}
		if !live {
			return
		}
		to := []netip.Addr{addr}
		if ipErr != nil {
			to = fuzzResolver{}.resolve(host)
		}
		for _, a := range to {
			if err := CheckDestination(Live, netip.AddrPortFrom(a, uint16(port)), nil); err != nil {
				t.Fatalf("live %q accepted, but it leads to %v", raw, err)
			}
		}
	})
}
