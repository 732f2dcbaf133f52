package server_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twitchtv/twirp"

	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/server"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// resolver answers for the names it knows, as a DNS server of the test's
// would, and asks the system about the others.
type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if addrs, ok := r[host]; ok {
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return addrs, nil
	}
	return net.DefaultResolver.LookupNetIP(ctx, network, host)
}

// Where a delivery may go is checked on each address dialled, with only
// the host:ports SANDBOX_PRIVATE_ENDPOINTS lists open. In sandbox, the
// receiver on the listed host:port gets its delivery; the same host on
// another port, a private address not listed and the metadata address
// are refused, every attempt saying why, and the port not listed sees no
// connection. In live, a name that looked public when saved (as DNS
// rebinding would make it) and is loopback when dialled is refused too.
func TestEndpointsReachOnlyTheHostPortsListed(t *testing.T) {
	t.Parallel()
	hooks := webhooktest.NewReceiver(t)
	listed := webhook.HostPorts{webhook.Sandbox: {netip.MustParseAddrPort(hooks.Addr())}}
	for _, a := range []string{"10.0.0.1", "169.254.169.254"} {
		// Whatever happens below must not send a packet to these: the
		// check itself refuses them first, or the test stops here.
		if webhook.CheckDestination(webhook.Sandbox, netip.AddrPortFrom(netip.MustParseAddr(a), 80), listed) == nil {
			t.Fatalf("the check lets %s through", a)
		}
	}
	otherAddr, accepted := webhooktest.CountingListener(t)
	_, other, _ := net.SplitHostPort(otherAddr)
	s := start(t, func(c *server.Config) {
		c.TestEndpoints = nil
		c.SandboxPrivateEndpoints = []string{hooks.Addr()}
		c.Resolver = resolver{"localhost": {netip.MustParseAddr("93.184.216.34")}}
	})
	wants := map[string]struct {
		env  accountsv1.Environment
		errs []string
	}{
		"http://127.0.0.1:" + other + "/hooks":  {sandbox, []string{"refused: 127.0.0.1 is a loopback address"}},
		"http://10.0.0.1/hooks":                 {sandbox, []string{"refused: 10.0.0.1 is a private address"}},
		"http://169.254.169.254/latest":         {sandbox, []string{"refused: 169.254.169.254 is a link-local address"}},
		"https://localhost:" + other + "/hooks": {live, []string{"refused: 127.0.0.1 is a loopback address", "refused: ::1 is a loopback address"}},
	}
	ids := map[string]string{}
	for url, w := range wants {
		scope, _ := s.endpoint(t, w.env, url)
		ids[url] = s.ping(t, scope).GetId()
	}
	scope, secret := s.endpoint(t, sandbox, hooks.URL)
	hooks.Trust(secret)
	ok := s.ping(t, scope)

	for url, w := range wants {
		got := s.wait(t, ids[url], failed, 30*time.Second)
		for _, a := range got.GetAttempts() {
			if !slices.Contains(w.errs, a.GetError()) || a.GetStatusCode() != 0 {
				t.Errorf("%s attempt %d: %d %q, want %q", url, a.GetNumber(), a.GetStatusCode(), a.GetError(), w.errs[0])
			}
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the port not listed got %d connections", n)
	}
	s.wait(t, ok.GetId(), delivered, 30*time.Second)
	if d := hooks.Wait(t, 1, 10*time.Second); !d[0].VerifiedBy(secret) {
		t.Error("the delivery to the host:port listed does not verify")
	}
}

// A live URL that is, or resolves to, an address live endpoints may not
// reach is refused when it is set, naming url and saying why, and
// nothing is stored; one whose name does not resolve yet is accepted (the
// sender checks every address it dials). Sandbox URLs are checked when
// dialled only.
func TestLiveURLsAreCheckedWhenSaved(t *testing.T) {
	t.Parallel()
	s := start(t, func(c *server.Config) {
		c.Resolver = resolver{
			"hooks.loopback.test": {netip.MustParseAddr("127.0.0.1")},
			"hooks.private.test":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.7")},
			"hooks.metadata.test": {netip.MustParseAddr("169.254.169.254")},
			"hooks.mapped.test":   {netip.MustParseAddr("::ffff:192.168.1.1")},
			"hooks.public.test":   {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1:248:1893:25c8:1946")},
			"hooks.later.test":    {},
		}
	})
	ctx := context.Background()
	refused := map[string]string{
		"https://127.0.0.1/hooks":                    "127.0.0.1 is a loopback address",
		"https://127.0.0.1:8443/hooks":               "127.0.0.1 is a loopback address",
		"https://10.1.2.3/hooks":                     "10.1.2.3 is a private address",
		"https://172.16.0.1/hooks":                   "172.16.0.1 is a private address",
		"https://192.168.0.1/hooks":                  "192.168.0.1 is a private address",
		"https://100.64.0.1/hooks":                   "100.64.0.1 is a shared (CGNAT) address",
		"https://169.254.169.254/latest/meta-data":   "169.254.169.254 is a link-local address",
		"https://0.0.0.0/hooks":                      "0.0.0.0 is an unspecified address",
		"https://[::1]/hooks":                        "::1 is a loopback address",
		"https://[fd00::1]/hooks":                    "fd00::1 is a private address",
		"https://[fe80::1]/hooks":                    "fe80::1 is a link-local address",
		"https://[::]/hooks":                         "is an unspecified address",
		"https://[::ffff:127.0.0.1]/hooks":           "127.0.0.1 is a loopback address",
		"https://[::ffff:7f00:1]/hooks":              "127.0.0.1 is a loopback address",
		"https://[::ffff:169.254.169.254]/hooks":     "169.254.169.254 is a link-local address",
		"https://[64:ff9b::a9fe:a9fe]/hooks":         "64:ff9b::a9fe:a9fe is a link-local address",
		"https://[fe80::1%25eth0]/hooks":             "network interface",
		"https://2130706433/hooks":                   "not a number in another form",
		"https://0x7f000001/hooks":                   "not a number in another form",
		"https://0x7f.0.0.1/hooks":                   "not a number in another form",
		"https://017700000001/hooks":                 "not a number in another form",
		"https://127.1/hooks":                        "not a number in another form",
		"https://0177.0.0.1/hooks":                   "not a number in another form",
		"https://localhost/hooks":                    "localhost resolves to",
		"https://localhost:9999/hooks":               "localhost resolves to",
		"https://hooks.loopback.test/hooks":          "hooks.loopback.test resolves to 127.0.0.1, a loopback address",
		"https://hooks.private.test/hooks":           "hooks.private.test resolves to 10.0.0.7, a private address",
		"https://hooks.metadata.test/latest":         "hooks.metadata.test resolves to 169.254.169.254, a link-local address",
		"https://hooks.mapped.test/hooks":            "hooks.mapped.test resolves to 192.168.1.1, a private address",
		"https://hooks.loopback.test:4443/hooks?a=b": "hooks.loopback.test resolves to 127.0.0.1",
	}
	fresh := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: live}
	kept, _ := s.endpoint(t, live, "https://hooks.public.test/hooks")
	before, err := s.operator.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: kept})
	if err != nil {
		t.Fatal(err)
	}
	for url, why := range refused {
		for _, scope := range []*webhookv1.Scope{fresh, kept} {
			_, err := s.operator.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: url})
			var twerr twirp.Error
			if !errors.As(err, &twerr) || twerr.Code() != twirp.InvalidArgument || twerr.Meta("argument") != "url" || !strings.Contains(twerr.Msg(), why) {
				t.Errorf("live %s: %v; want invalid_argument on url saying %q", url, err, why)
			}
		}
	}
	if _, err := s.operator.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: fresh}); codeOf(err) != twirp.NotFound {
		t.Errorf("GetEndpoint of the scope whose every URL was refused: %v; want not_found", err)
	}
	after, err := s.operator.GetEndpoint(ctx, &webhookv1.GetEndpointRequest{Scope: kept})
	if err != nil || after.GetUrl() != before.GetUrl() || !after.GetUpdatedAt().AsTime().Equal(before.GetUpdatedAt().AsTime()) || after.GetSecret() != before.GetSecret() {
		t.Errorf("the endpoint after refused changes: %v, %v; want it as before: %v", after, err, before)
	}

	for _, url := range []string{
		"https://hooks.later.test/hooks",                 // does not resolve yet
		"https://partner-not-yet.invalid/hooks",          // nor ever, by the system's resolver
		"https://hooks.public.test:8443/hooks",           // resolves to public addresses only
		"https://93.184.216.34/hooks",                    // public
		"https://[2606:2800:220:1:248:1893:25c8:1946]/x", // public
	} {
		scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: live}
		if e, err := s.operator.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: url}); err != nil || e.GetUrl() != url {
			t.Errorf("live %s: %v, %v; want it stored", url, e, err)
		}
	}
	for _, url := range []string{"https://127.0.0.1/hooks", "http://localhost:9999/hooks", "https://hooks.metadata.test/latest"} {
		scope := &webhookv1.Scope{AccountId: uuid.NewString(), Environment: sandbox}
		if _, err := s.operator.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{Scope: scope, Url: url}); err != nil {
			t.Errorf("sandbox %s: %v; want it stored, to be checked when dialled", url, err)
		}
	}
}

func codeOf(err error) twirp.ErrorCode {
	var twerr twirp.Error
	if errors.As(err, &twerr) {
		return twerr.Code()
	}
	return ""
}
