// Package config parses a service's typed configuration from environment
// variables once, in run, through github.com/sethvargo/go-envconfig.
//
// Services read `getenv` instead of the process environment so tests and the
// `make run` launcher can hand each service its own settings.
package config

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sethvargo/go-envconfig"
)

// Getenv is the signature of os.Getenv.
type Getenv func(string) string

// lookuper adapts a Getenv: an empty value counts as unset, so defaults apply
// to variables that are declared but blank (as Kubernetes often renders them).
type lookuper Getenv

func (l lookuper) Lookup(key string) (string, bool) {
	v := l(key)
	return v, v != ""
}

// Validator is a configuration with rules its types cannot express.
type Validator interface{ Validate() error }

// Parse fills target (a pointer to a struct with `env` tags) from getenv,
// then, when every variable decoded, runs target's Validate if it has one.
// Errors name the environment variable, never the Go field, and every
// variable that does not decode is reported at once, so an operator fixes a
// deployment in one pass.
func Parse(ctx context.Context, getenv Getenv, target any) error {
	v := reflect.ValueOf(target)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("config: target must be a pointer to a struct, not %T", target)
	}
	var errs []error
	for _, f := range leaves(v.Elem().Type(), "", nil) {
		if err := decode(ctx, getenv, v.Elem().FieldByIndex(f.index), f); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if val, ok := target.(Validator); ok {
		return val.Validate()
	}
	return nil
}

// decode reads one variable into dst through envconfig, given a struct of
// that one field: envconfig keeps its decoding, defaults and required
// checks, and its errors, which name the Go field, are renamed here.
func decode(ctx context.Context, getenv Getenv, dst reflect.Value, f leaf) error {
	one := reflect.New(reflect.StructOf([]reflect.StructField{{
		Name: "Value",
		Type: dst.Type(),
		Tag:  reflect.StructTag(`env:"` + f.name + f.options + `"`),
	}}))
	err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: one.Interface(), Lookuper: lookuper(getenv)})
	switch {
	case errors.Is(err, envconfig.ErrMissingRequired):
		return fmt.Errorf("%s is required", f.name)
	case err != nil:
		// "Value: <what the decoder said>", and the decoder quotes the value.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		return fmt.Errorf("%s: %w", f.name, err)
	}
	dst.Set(one.Elem().Field(0))
	return nil
}

// EnvVars lists every environment variable a config struct reads, sorted.
// Deployment checks use it to prove a chart sets exactly what the service
// reads.
func EnvVars(cfg any) []string {
	var names []string
	for _, f := range leaves(reflect.TypeOf(cfg), "", nil) {
		names = append(names, f.name)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// leaf is one variable of a config struct: its full name (nested structs'
// prefixes applied), the tag's options after the name, and where it sits.
type leaf struct {
	name    string
	options string
	index   []int
}

func leaves(t reflect.Type, prefix string, index []int) []leaf {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []leaf
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("env")
		name, options, _ := strings.Cut(tag, ",")
		name = strings.TrimSpace(name)
		at := append(slices.Clone(index), i)
		if f.Type.Kind() == reflect.Struct && !isLeaf(f.Type) {
			p := prefix
			if _, after, ok := strings.Cut(tag, "prefix="); ok {
				p += strings.TrimSpace(strings.Split(after, ",")[0])
			}
			out = append(out, leaves(f.Type, p, at)...)
			continue
		}
		if name != "" {
			if options != "" {
				options = "," + options
			}
			out = append(out, leaf{name: prefix + name, options: options, index: at})
		}
	}
	return out
}

// isLeaf reports struct types envconfig decodes as one value.
func isLeaf(t reflect.Type) bool {
	return t.PkgPath() == "time" || reflect.PointerTo(t).Implements(reflect.TypeOf((*envconfig.Decoder)(nil)).Elem())
}

// BaseURL is a service's base URL, where paths are appended: http:// or
// https://, a host, no query or fragment, and no trailing slash. As a
// config field it is checked and normalised when the environment is
// parsed.
type BaseURL string

// EnvDecode makes BaseURL a config field type.
func (u *BaseURL) EnvDecode(raw string) error {
	base, err := ParseBaseURL(raw)
	if err != nil {
		return err
	}
	*u = BaseURL(base)
	return nil
}

// ParseBaseURL checks a base URL and returns it without a trailing slash,
// which would turn every path appended to it into "//...". A URL without a
// scheme is refused at start: net/http would take "host:8081" for scheme
// "host" and fail every call, and an exporter would post to nowhere, both
// long after the process was declared ready. The error never shows a
// password or a query.
func ParseBaseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Opaque == "" &&
		u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" {
		return strings.TrimRight(raw, "/"), nil
	}
	return "", fmt.Errorf("%s is not an http:// or https:// base URL with a host and no query", shownURL(raw))
}

// shownURL is raw fit for an error message: quoted, with a password and a
// query (which may carry a token) masked where the URL has the shape that
// net/url can mask them in, and not shown at all where it has not. Without
// "//", "http:user:password@host" has no user info to redact.
func shownURL(raw string) string {
	if masked, ok := maskURL(raw); ok {
		return strconv.Quote(masked)
	}
	if strings.ContainsAny(raw, "@?") {
		return "(not shown: it may hold a password)"
	}
	return strconv.Quote(raw)
}

// maskURL is raw with its password, query and fragment masked, when raw
// is a URL with a host; ok is false for anything else, which only its
// owner knows how to read for secrets. An "@" that net/url did not take
// for the end of the user info means it split the URL elsewhere (a
// password holding an unencoded "/" or "#" ends the host there), and the
// password would show in the host, path or fragment.
func maskURL(raw string) (masked string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return "", false
	}
	if strings.Contains(u.Host+u.Path+u.RawQuery+u.Fragment, "@") {
		return "", false
	}
	if u.RawQuery != "" {
		u.RawQuery = "xxxxx"
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "xxxxx", ""
	}
	return u.Redacted(), true
}

// Secret is a config value that must never be shown: it prints, formats
// (with any verb) and logs as "[redacted]", so a config struct that
// reaches a log line or an error by mistake does not take it along.
// Reveal gives the value to the one place that uses it. It holds a
// pointer, not a string: fmt handles a %w or %p operand (and the fields
// of a struct under one) before it looks for Format, and then prints a
// string's bytes but only a pointer's address.
type Secret struct{ value *string }

// NewSecret returns v as a Secret, for configs built in code.
func NewSecret(v string) Secret { return Secret{value: &v} }

// EnvDecode makes Secret a config field type.
func (s *Secret) EnvDecode(raw string) error {
	s.value = &raw
	return nil
}

// Reveal returns the value; nil when unset.
func (s Secret) Reveal() []byte {
	if s.value == nil {
		return nil
	}
	return []byte(*s.value)
}

const redacted = "[redacted]"

func (Secret) String() string               { return redacted }
func (Secret) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, redacted) }
func (Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// SecretURL is a connection URL (a database's, a cache's) that may carry a
// password, in its user part or its query. It prints, formats, logs and
// encodes with both masked ("postgres://app:xxxxx@db:5432/accounts?xxxxx"),
// so a config struct that reaches a log line or an error by mistake still
// names the server but takes no password along; a value that is not a URL
// with a host (a key=value connection string, a socket path) shows as
// "[redacted]" whole. Reveal gives the URL to the client that dials it.
// It holds a pointer for the reason Secret does.
type SecretURL struct{ value *string }

// NewSecretURL returns v as a SecretURL, for configs built in code.
func NewSecretURL(v string) SecretURL { return SecretURL{value: &v} }

// EnvDecode makes SecretURL a config field type.
func (u *SecretURL) EnvDecode(raw string) error {
	u.value = &raw
	return nil
}

// Reveal returns the URL; empty when unset.
func (u SecretURL) Reveal() string {
	if u.value == nil {
		return ""
	}
	return *u.value
}

func (u SecretURL) String() string {
	if u.value == nil {
		return ""
	}
	if masked, ok := maskURL(*u.value); ok {
		return masked
	}
	return redacted
}
func (u SecretURL) Format(f fmt.State, _ rune)   { _, _ = io.WriteString(f, u.String()) }
func (u SecretURL) LogValue() slog.Value         { return slog.StringValue(u.String()) }
func (u SecretURL) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

// Runtime is the part of every service's configuration that tunes the Go
// runtime.
type Runtime struct {
	// GCPercent is how far the heap may grow past what the last collection
	// kept before the next one starts. A service keeps a few megabytes live
	// and allocates per request, so at 400 it collects a quarter as often as
	// at Go's 100, leaving more CPU to requests for about 20 MB more peak
	// memory.
	GCPercent GCPercent `env:"GOGC, default=400"`
	// MemoryLimit is a soft cap on the runtime's memory (GOMEMLIMIT): near
	// it the collector runs as often as it must, whatever GOGC says. The
	// charts set it under the container's limit: GOGC=400 alone sizes the
	// heap by what is live, and many slow connections could take a process
	// past that limit, where the kernel kills the pod. Unset or off: no cap.
	MemoryLimit MemoryLimit `env:"GOMEMLIMIT"`
}

// Apply sets the collector's target and the memory cap. The runtime reads
// GOGC and GOMEMLIMIT itself when the process starts; Apply makes the
// default target hold where GOGC is unset.
func (r Runtime) Apply() {
	debug.SetGCPercent(int(r.GCPercent))
	if r.MemoryLimit > 0 {
		debug.SetMemoryLimit(int64(r.MemoryLimit))
	}
}

// MemoryLimit is GOMEMLIMIT's value in bytes, written as the runtime takes
// it: a whole number with an optional unit (B, KiB, MiB, GiB, TiB), or
// "off" for no cap. Zero is refused: the runtime would take it as a cap of
// nothing and collect without pause.
type MemoryLimit int64

// EnvDecode makes MemoryLimit a config field type.
func (m *MemoryLimit) EnvDecode(raw string) error {
	if raw == "" || raw == "off" {
		*m = 0
		return nil
	}
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	digits, shift := raw, uint(0)
	for _, u := range units {
		if d, ok := strings.CutSuffix(raw, u.suffix); ok {
			digits, shift = d, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64>>shift {
		return fmt.Errorf("%q is not a memory size such as 200MiB (units B, KiB, MiB, GiB, TiB) or off", raw)
	}
	*m = MemoryLimit(n << shift)
	return nil
}

// GCPercent is GOGC's value: a percentage (0 collects all the time), or
// "off" (-1), as the Go runtime takes it.
type GCPercent int

// EnvDecode makes GCPercent a config field type.
func (p *GCPercent) EnvDecode(raw string) error {
	if raw == "off" {
		*p = -1
		return nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 {
		return fmt.Errorf("%q is not a percentage (0 or more) or off", raw)
	}
	*p = GCPercent(n)
	return nil
}
