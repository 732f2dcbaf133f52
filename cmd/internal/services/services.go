// Package services reads services.yaml, the one declaration of the
// platform's services that `make run`, `make generate` and the tests
// follow: adding a service is its folder, its chart and an entry there.
package services

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// File is the declaration's name, at the root of the repository.
const File = "services.yaml"

// Service is one entry of services.yaml (documented there).
type Service struct {
	Name     string            `json:"name"`
	Port     int               `json:"port"`
	Database bool              `json:"database,omitempty"`
	Redis    bool              `json:"redis,omitempty"`
	Kafka    bool              `json:"kafka,omitempty"`
	Public   bool              `json:"public,omitempty"`
	Calls    []string          `json:"calls,omitempty"`
	Secrets  []string          `json:"secrets,omitempty"`
	Keys     []string          `json:"keys,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	// Listeners are the service's listeners besides HTTP_ADDR: the
	// variable that takes the address and its port under make run.
	Listeners map[string]int `json:"listeners,omitempty"`
}

// ListenerKey names a further listener of s among Options.Addrs and in
// ${...} of env values: "smdp-sim.ES2PLUS_ADDR".
func (s Service) ListenerKey(variable string) string { return s.Name + "." + variable }

// URLVar is the variable a caller of s reads its base URL from:
// ACCOUNTS_URL for accounts.
func (s Service) URLVar() string {
	return strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_")) + "_URL"
}

// Platform is every declared service, in the order of the file.
type Platform []Service

// Get returns the service of that name.
func (p Platform) Get(name string) (Service, bool) {
	i := slices.IndexFunc(p, func(s Service) bool { return s.Name == name })
	if i < 0 {
		return Service{}, false
	}
	return p[i], true
}

// Names lists the services in the order of the file.
func (p Platform) Names() []string {
	names := make([]string, len(p))
	for i, s := range p {
		names[i] = s.Name
	}
	return names
}

// CallersOf lists the services that call name.
func (p Platform) CallersOf(name string) []string {
	var callers []string
	for _, s := range p {
		if slices.Contains(s.Calls, name) {
			callers = append(callers, s.Name)
		}
	}
	return callers
}

// Public is the service that serves the partner API.
func (p Platform) Public() Service {
	for _, s := range p {
		if s.Public {
			return s
		}
	}
	return Service{}
}

// StartOrder groups the services so that each starts after every service
// it calls: the first group calls nobody.
func (p Platform) StartOrder() [][]Service {
	started := map[string]bool{}
	var groups [][]Service
	for len(started) < len(p) {
		var group []Service
		for _, s := range p {
			if started[s.Name] {
				continue
			}
			if !slices.ContainsFunc(s.Calls, func(c string) bool { return !started[c] }) {
				group = append(group, s)
			}
		}
		if len(group) == 0 {
			// Load refuses cycles; a Platform built otherwise starts the rest together.
			for _, s := range p {
				if !started[s.Name] {
					group = append(group, s)
				}
			}
		}
		for _, s := range group {
			started[s.Name] = true
		}
		groups = append(groups, group)
	}
	return groups
}

// Find looks for services.yaml in dir and its parents, so that a command
// run anywhere in the repository finds it.
func Find(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		path := filepath.Join(d, File)
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("%s not found in %s or any directory above it: run this from the repository", File, dir)
		}
	}
}

// Load reads and checks a declaration.
func Load(path string) (Platform, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

var (
	validName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,40}$`)
	validVar  = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
)

// Parse reads a declaration, refusing unknown fields and anything that
// could not start: a name twice, a port twice, a call to no service, calls
// in a cycle, other than one public service.
func Parse(data []byte) (Platform, error) {
	var file struct {
		Services Platform `json:"services"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		return nil, err
	}
	p := file.Services
	var errs []error
	names, ports := map[string]bool{}, map[int]string{}
	public := 0
	for i, s := range p {
		switch {
		case !validName.MatchString(s.Name):
			errs = append(errs, fmt.Errorf("service %d: name %q: want lower-case letters, digits and dashes", i+1, s.Name))
		case names[s.Name]:
			errs = append(errs, fmt.Errorf("service %s is declared twice", s.Name))
		}
		names[s.Name] = true
		if s.Port < 1 || s.Port > 65535 {
			errs = append(errs, fmt.Errorf("%s: port %d: want 1 to 65535", s.Name, s.Port))
		} else if other, taken := ports[s.Port]; taken {
			errs = append(errs, fmt.Errorf("%s: port %d is %s's too", s.Name, s.Port, other))
		}
		ports[s.Port] = s.Name
		for _, v := range keys(s.Listeners) {
			port := s.Listeners[v]
			switch other, taken := ports[port]; {
			case !validVar.MatchString(v) || v == "HTTP_ADDR":
				errs = append(errs, fmt.Errorf("%s: listener %q: want an environment variable name other than HTTP_ADDR", s.Name, v))
			case port < 1 || port > 65535:
				errs = append(errs, fmt.Errorf("%s: listener %s port %d: want 1 to 65535", s.Name, v, port))
			case taken:
				errs = append(errs, fmt.Errorf("%s: listener %s port %d is %s's too", s.Name, v, port, other))
			}
			ports[port] = s.ListenerKey(v)
		}
		if s.Public {
			public++
		}
		for _, v := range slices.Concat(s.Secrets, s.Keys, keys(s.Env)) {
			if !validVar.MatchString(v) {
				errs = append(errs, fmt.Errorf("%s: %q is not an environment variable name", s.Name, v))
			}
		}
	}
	for _, s := range p {
		for _, c := range s.Calls {
			if !names[c] || c == s.Name {
				errs = append(errs, fmt.Errorf("%s calls %q, which is no other service", s.Name, c))
			}
		}
	}
	if public != 1 {
		errs = append(errs, fmt.Errorf("%d services are public; want exactly one, the partner API", public))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cycle := p.cycle(); cycle != nil {
		return nil, fmt.Errorf("calls go round in a circle: %s", strings.Join(cycle, " -> "))
	}
	return p, nil
}

// cycle returns a path of calls that comes back to where it started.
func (p Platform) cycle() []string {
	state := map[string]int{} // 1: on the path, 2: done
	var path []string
	var visit func(name string) []string
	visit = func(name string) []string {
		switch state[name] {
		case 1:
			return append(slices.Clone(path[slices.Index(path, name):]), name)
		case 2:
			return nil
		}
		state[name] = 1
		path = append(path, name)
		s, _ := p.Get(name)
		for _, c := range s.Calls {
			if found := visit(c); found != nil {
				return found
			}
		}
		path = path[:len(path)-1]
		state[name] = 2
		return nil
	}
	for _, s := range p {
		if found := visit(s.Name); found != nil {
			return found
		}
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
