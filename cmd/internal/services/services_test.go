package services_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/esimplatform/esim/cmd/internal/services"
)

// TestTheRepositoryFollowsTheDeclaration keeps the "add a service"
// checklist of docs/conventions.md honest: every service folder has an
// entry and a chart, every entry has a folder, a main package and a chart.
func TestTheRepositoryFollowsTheDeclaration(t *testing.T) {
	root, p := load(t)
	folders, err := os.ReadDir(filepath.Join(root, "services"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range folders {
		if _, declared := p.Get(f.Name()); f.IsDir() && !declared {
			t.Errorf("services/%s has no entry in %s", f.Name(), services.File)
		}
	}
	for _, s := range p {
		for _, want := range []string{
			filepath.Join("services", s.Name, "cmd", s.Name, "main.go"),
			filepath.Join("charts", s.Name, "Chart.yaml"),
			filepath.Join("charts", s.Name, "values-dev.yaml"),
		} {
			if _, err := os.Stat(filepath.Join(root, want)); err != nil {
				t.Errorf("%s is declared in %s, but %s is missing (docs/conventions.md, Add a service)", s.Name, services.File, want)
			}
		}
	}
	charts, _ := filepath.Glob(filepath.Join(root, "charts", "*", "values-dev.yaml"))
	for _, c := range charts {
		if name := filepath.Base(filepath.Dir(c)); !slices.Contains(p.Names(), name) {
			t.Errorf("charts/%s has no entry in %s", name, services.File)
		}
	}
}

func TestParseRefusesWhatCouldNotStart(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown field":  {"services:\n- {name: a, port: 1, public: true, dtabase: true}", "unknown field"},
		"bad name":       {"services:\n- {name: A_b, port: 1, public: true}", `name "A_b"`},
		"twice":          {"services:\n- {name: a, port: 1, public: true}\n- {name: a, port: 2}", "a is declared twice"},
		"port twice":     {"services:\n- {name: a, port: 1, public: true}\n- {name: b, port: 1}", "b: port 1 is a's too"},
		"no port":        {"services:\n- {name: a, public: true}", "a: port 0"},
		"unknown call":   {"services:\n- {name: a, port: 1, public: true, calls: [b]}", `a calls "b"`},
		"calls itself":   {"services:\n- {name: a, port: 1, public: true, calls: [a]}", `a calls "a"`},
		"no public":      {"services:\n- {name: a, port: 1}", "0 services are public"},
		"two public":     {"services:\n- {name: a, port: 1, public: true}\n- {name: b, port: 2, public: true}", "2 services are public"},
		"cycle":          {"services:\n- {name: a, port: 1, public: true, calls: [b]}\n- {name: b, port: 2, calls: [c]}\n- {name: c, port: 3, calls: [b]}", "b -> c -> b"},
		"bad secret var": {"services:\n- {name: a, port: 1, public: true, secrets: [lower]}", `"lower" is not an environment variable`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := services.Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestStartOrderPutsCalleesFirst(t *testing.T) {
	p, err := services.Parse([]byte(`services:
- {name: gateway, port: 1, public: true, calls: [ordering, accounts]}
- {name: ordering, port: 2, calls: [wallet, catalogue]}
- {name: accounts, port: 3}
- {name: wallet, port: 4}
- {name: catalogue, port: 5}
`))
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for _, g := range p.StartOrder() {
		var names []string
		for _, s := range g {
			names = append(names, s.Name)
		}
		got = append(got, names)
	}
	want := [][]string{{"accounts", "wallet", "catalogue"}, {"ordering"}, {"gateway"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("StartOrder = %v, want %v", got, want)
	}
	if callers := p.CallersOf("wallet"); !slices.Equal(callers, []string{"ordering"}) {
		t.Errorf("CallersOf(wallet) = %v", callers)
	}
	if s, _ := p.Get("catalogue"); s.URLVar() != "CATALOGUE_URL" {
		t.Errorf("URLVar = %s", s.URLVar())
	}
}

// load reads services.yaml, found from here, and says where the
// repository's root is.
func load(t *testing.T) (root string, p services.Platform) {
	t.Helper()
	path, err := services.Find(".")
	if err != nil {
		t.Fatal(err)
	}
	p, err = services.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(path), p
}
