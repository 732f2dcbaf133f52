package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Where an endpoint may lead. Partners choose the URLs, so without a rule
// a URL would make the platform call into its own network: the cloud's
// metadata service, a database, the SM-DP+ simulator's control API. One
// rule (CheckDestination) is applied twice: by the sender to every
// address it dials, so that a name resolving elsewhere by then (DNS
// rebinding) gets nowhere, and by SetEndpoint to what a live URL names or
// resolves to, so that a partner learns of a wrong URL when saving it.

// PrivateEndpoints are the loopback, private and shared (CGNAT)
// addresses, each with its port, that an environment's endpoints may
// reach besides public ones: receivers on a developer's machine, each
// named. Only kinds AddressKind calls openable are ever let through, so
// no list opens a link-local (metadata) or unspecified address.
type PrivateEndpoints interface {
	Allows(env Environment, addr netip.AddrPort) bool
}

// HostPorts lists private endpoints one by one, per environment.
type HostPorts map[Environment][]netip.AddrPort

// Allows implements PrivateEndpoints.
func (h HostPorts) Allows(env Environment, addr netip.AddrPort) bool {
	return slices.Contains(h[env], netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()))
}

// Resolver looks up a host name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DestinationError is an address an endpoint may not reach.
type DestinationError struct {
	Addr netip.Addr
	// Kind is AddressKind's, with its article: "a loopback".
	Kind string
}

func (e *DestinationError) Error() string {
	return fmt.Sprintf("%s is %s address", e.Addr, e.Kind)
}

// CheckDestination refuses an address env's endpoints may not reach: an
// unspecified, link-local, multicast or reserved one always, and a
// loopback, private or shared one unless allowed lists it with its port.
func CheckDestination(env Environment, to netip.AddrPort, allowed PrivateEndpoints) error {
	kind, openable := AddressKind(to.Addr())
	if kind == "" || (openable && allowed != nil && allowed.Allows(env, to)) {
		return nil
	}
	return &DestinationError{Addr: to.Addr().Unmap().WithZone(""), Kind: kind}
}

var (
	// 100.64.0.0/10 (RFC 6598): carrier-grade NAT, and in many clusters
	// the nodes' or pods' own network.
	sharedPrefix = netip.MustParsePrefix("100.64.0.0/10")
	// 64:ff9b::/96 (RFC 6052) reaches the IPv4 address in its last 32
	// bits through a NAT64 gateway; 2002::/16 (RFC 3056) the one in bits
	// 16 to 48 through 6to4.
	nat64Prefix  = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour    = netip.MustParsePrefix("2002::/16")
	reservedNets = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking, often internal
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
		netip.MustParsePrefix("100::/64"),        // discard-only
		netip.MustParsePrefix("2001:db8::/32"),   // documentation
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	}
)

// AddressKind names the kind of a non-public address, with its article
// ("a loopback"), or is "" for a public one. openable is true for the
// kinds PrivateEndpoints may open: loopback, private and shared (CGNAT).
// IPv4 addresses in IPv6 clothes (mapped, NAT64, 6to4) are judged as the
// IPv4 address they reach.
func AddressKind(addr netip.Addr) (kind string, openable bool) {
	addr = addr.Unmap().WithZone("")
	switch {
	case !addr.IsValid():
		return "an invalid", false
	case addr.IsUnspecified():
		return "an unspecified", false
	case addr.IsLoopback():
		return "a loopback", true
	case addr.IsMulticast():
		return "a multicast", false
	case addr.IsLinkLocalUnicast():
		return "a link-local", false
	case addr.IsPrivate():
		return "a private", true
	case sharedPrefix.Contains(addr):
		return "a shared (CGNAT)", true
	case nat64Prefix.Contains(addr):
		b := addr.As16()
		return AddressKind(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(addr):
		b := addr.As16()
		return AddressKind(netip.AddrFrom4([4]byte(b[2:6])))
	}
	for _, p := range reservedNets {
		if p.Contains(addr) {
			return "a reserved", false
		}
	}
	if !addr.IsGlobalUnicast() {
		return "a reserved", false
	}
	return "", false
}

// lookupBudget bounds the look-up of a live URL's host when it is saved:
// a name whose servers do not answer by then counts as not resolving yet.
const lookupBudget = 3 * time.Second

// checkLiveDestination refuses a live URL whose host is, or resolves
// to, an address live endpoints may not reach. A name that does not
// resolve (yet) is accepted: the sender checks every address it dials.
func (s *Service) checkLiveDestination(ctx context.Context, u *url.URL) error {
	host := u.Hostname()
	port := uint16(443)
	if p := u.Port(); p != "" {
		n, _ := strconv.ParseUint(p, 10, 16) // validURL checked it
		port = uint16(n)
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if err := CheckDestination(Live, netip.AddrPortFrom(addr, port), s.allowed); err != nil {
			return invalid("url", "must not be a loopback, private or link-local address in live: "+err.Error())
		}
		return nil
	}
	if s.resolver == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, lookupBudget)
	defer cancel()
	addrs, err := s.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, addr := range addrs {
		var refused *DestinationError
		if errors.As(CheckDestination(Live, netip.AddrPortFrom(addr, port), s.allowed), &refused) {
			return invalid("url", fmt.Sprintf("must not resolve to a loopback, private or link-local address in live: %s resolves to %s, %s address", host, refused.Addr, refused.Kind))
		}
	}
	return nil
}

// numericHost reports whether host ends in a number, as the WHATWG URL
// standard says: its last label is decimal digits or 0x and hex digits.
// Browsers and C resolvers read such a host as an IPv4 address in some
// form (2130706433, 0x7f.1, 127.1 are all 127.0.0.1), which no domain
// name can be, since top-level domains are never numeric.
func numericHost(host string) bool {
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	last := labels[len(labels)-1]
	if rest, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(rest, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}
