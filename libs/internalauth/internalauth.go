// Package internalauth is how the platform's services know who calls them.
// Every internal (Twirp) API requires a bearer token that names its caller,
// a service or an operator, and each method lists the callers it serves;
// a network policy is a second fence, never the only one.
//
// A caller holds its own token (INTERNAL_TOKEN). A service holds only the
// SHA-256 of each token it accepts (CALLERS), so a compromised service can
// answer calls but cannot make them in another's name. Tokens carry 256
// random bits, so an unsalted hash is enough and allows a plain lookup.
package internalauth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/twitchtv/twirp"
)

// Caller names who makes an internal call.
type Caller string

// The callers of the platform's internal APIs. Operator is a person or
// tool acting with an operator credential (esimctl, `make run`); Portal
// is the partners' web portal, acting for the partner signed in.
const (
	Operator Caller = "operator"
	Gateway  Caller = "gateway"
	Ordering Caller = "ordering"
	Portal   Caller = "portal"
)

// MinTokenLength is the shortest token accepted: 32 bytes, 256 bits when
// random, as NewToken and `openssl rand -base64 32` give.
const MinTokenLength = 32

// NewToken returns a fresh token: 32 random bytes, base64url.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Hash is the form a service keeps of a token it accepts: hex SHA-256.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Entry is one CALLERS entry for caller's token: "name:hash".
func Entry(caller Caller, token string) string {
	return string(caller) + ":" + Hash(token)
}

// Callers are the credentials a service accepts: CALLERS, a comma-separated
// list of "name:sha256-hex" entries. A name may appear more than once, so a
// token can be rotated without a window in which calls are refused.
type Callers struct {
	entries []entry
}

type entry struct {
	caller Caller
	hash   [sha256.Size]byte
}

var callerName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// ParseCallers reads a CALLERS value. Errors never quote a hash.
func ParseCallers(raw string) (Callers, error) {
	var c Callers
	for i, item := range strings.Split(raw, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, hash, ok := strings.Cut(item, ":")
		if !ok || !callerName.MatchString(name) {
			return Callers{}, fmt.Errorf("entry %d: want name:sha256-hex, the name in lower case (such as gateway:<64 hex digits>)", i+1)
		}
		var e entry
		if len(hash) != hex.EncodedLen(sha256.Size) || !decodes(e.hash[:], hash) {
			return Callers{}, fmt.Errorf("entry %d (%s): want the token's SHA-256 as 64 hex digits", i+1, name)
		}
		e.caller = Caller(name)
		c.entries = append(c.entries, e)
	}
	if len(c.entries) == 0 {
		return Callers{}, errors.New("no callers: want name:sha256-hex entries, comma-separated")
	}
	return c, nil
}

func decodes(dst []byte, hexText string) bool {
	_, err := hex.Decode(dst, []byte(hexText))
	return err == nil
}

// MustCallers is ParseCallers for values built in code.
func MustCallers(entries ...string) Callers {
	c, err := ParseCallers(strings.Join(entries, ","))
	if err != nil {
		panic(err)
	}
	return c
}

// EnvDecode makes Callers a config field type.
func (c *Callers) EnvDecode(raw string) error {
	parsed, err := ParseCallers(raw)
	if err != nil {
		return err
	}
	*c = parsed
	return nil
}

// Names lists the callers, each once, for logs and messages.
func (c Callers) Names() []Caller {
	var names []Caller
	for _, e := range c.entries {
		if !slices.Contains(names, e.caller) {
			names = append(names, e.caller)
		}
	}
	return names
}

// String shows the names only.
func (c Callers) String() string {
	names := make([]string, 0, len(c.entries))
	for _, n := range c.Names() {
		names = append(names, string(n))
	}
	return strings.Join(names, ",")
}

// identify returns the caller whose token this is. Every entry is compared,
// in constant time, whatever matched: the time taken says nothing about
// which hash came close.
func (c Callers) identify(token string) (Caller, bool) {
	sum := sha256.Sum256([]byte(token))
	var found Caller
	for _, e := range c.entries {
		if subtle.ConstantTimeCompare(e.hash[:], sum[:]) == 1 {
			found = e.caller
		}
	}
	return found, found != ""
}

// Policy says, for each method of a Twirp service, which callers may call
// it. A method it does not name serves nobody.
type Policy map[string][]Caller

// Check reports methods the policy leaves out or names but the service
// lacks, so a service cannot ship a method nobody may call by accident,
// nor a rule for a method that was renamed.
func (p Policy) Check(methods []string) error {
	var errs []error
	for _, m := range methods {
		if _, ok := p[m]; !ok {
			errs = append(errs, fmt.Errorf("method %s has no rule", m))
		}
	}
	for m := range p {
		if !slices.Contains(methods, m) {
			errs = append(errs, fmt.Errorf("rule for %s, which the service does not have", m))
		}
	}
	return errors.Join(errs...)
}

type callerKey struct{}

// CallerFrom returns the authenticated caller of an internal call.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// WithCaller returns ctx as Protect leaves it for a call by caller, for
// code that runs a use case in a caller's name without an HTTP request.
func WithCaller(ctx context.Context, caller Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// Protect serves next, a Twirp handler, only to callers whose token is in
// callers and whom policy lets call the method. Nothing reaches next
// otherwise: no token or an unknown one is answered unauthenticated, a
// known caller outside the method's rule permission_denied, both in
// Twirp's error form. The method is the last element of the path, as
// Twirp routes it; a path outside the service's prefix names none of its
// methods and goes to next, which answers it bad_route.
func Protect(next Service, callers Callers, policy Policy, log *slog.Logger) http.Handler {
	prefix := next.PathPrefix()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, prefix) {
			next.ServeHTTP(w, r)
			return
		}
		method := path.Base(r.URL.Path)
		caller, ok := callers.identify(bearer(r.Header))
		if !ok {
			log.WarnContext(r.Context(), "internal call refused: no valid credential", "method", method)
			writeError(w, twirp.NewError(twirp.Unauthenticated, "missing or unknown internal credential: send Authorization: Bearer <token of the calling service or operator>"))
			return
		}
		if !slices.Contains(policy[method], caller) {
			log.WarnContext(r.Context(), "internal call refused: caller not allowed", "method", method, "caller", string(caller))
			writeError(w, twirp.NewError(twirp.PermissionDenied, fmt.Sprintf("%s may not call %s", caller, method)))
			return
		}
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), caller)))
	})
}

// Service is a Twirp server, as protoc-gen-twirp generates them.
type Service interface {
	http.Handler
	// PathPrefix is where its methods are: "/twirp/<package>.<Service>/".
	PathPrefix() string
}

func writeError(w http.ResponseWriter, err twirp.Error) {
	// Only fails when the connection is gone.
	_ = twirp.WriteError(w, err)
}

// bearer is the token of an "Authorization: Bearer <token>" header, or ""
// when there is not exactly one such header.
func bearer(h http.Header) string {
	values := h.Values("Authorization")
	if len(values) != 1 {
		return ""
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// Client returns a copy of hc that sends token with every request, for a
// Twirp client of another service.
func Client(hc *http.Client, token string) *http.Client {
	authed := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	authed.Transport = &bearerTransport{base: base, value: "Bearer " + token}
	return &authed
}

type bearerTransport struct {
	base  http.RoundTripper
	value string
}

func (t *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not change the caller's request
	r.Header.Set("Authorization", t.value)
	return t.base.RoundTrip(r)
}
