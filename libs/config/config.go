// Package config parses a service's typed configuration from environment
// variables once, in run, through github.com/sethvargo/go-envconfig.
//
// Services read `getenv` instead of the process environment so tests and the
// `make run` launcher can hand each service its own settings.
package config

import (
	"context"
	"reflect"
	"sort"
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

// Parse fills target (a pointer to a struct with `env` tags) from getenv.
func Parse(ctx context.Context, getenv Getenv, target any) error {
	return envconfig.ProcessWith(ctx, &envconfig.Config{
		Target:   target,
		Lookuper: lookuper(getenv),
	})
}

// EnvVars lists every environment variable a config struct reads, sorted.
// Deployment checks use it to prove a chart sets exactly what the service
// reads.
func EnvVars(cfg any) []string {
	seen := map[string]bool{}
	collect(reflect.TypeOf(cfg), "", seen)
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func collect(t reflect.Type, prefix string, seen map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("env")
		name, _, _ := strings.Cut(tag, ",")
		name = strings.TrimSpace(name)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !isLeaf(ft) {
			p := prefix
			if strings.Contains(tag, "prefix=") {
				_, after, _ := strings.Cut(tag, "prefix=")
				p += strings.TrimSpace(strings.Split(after, ",")[0])
			}
			collect(ft, p, seen)
			continue
		}
		if name != "" {
			seen[prefix+name] = true
		}
	}
}

// isLeaf reports struct types envconfig decodes as one value.
func isLeaf(t reflect.Type) bool {
	return t.PkgPath() == "time" || reflect.PointerTo(t).Implements(reflect.TypeOf((*envconfig.Decoder)(nil)).Elem())
}
