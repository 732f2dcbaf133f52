// Package servicestest builds the declared services for tests that start
// the platform as `make run` does.
package servicestest

import (
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/esimplatform/esim/cmd/internal/loopbacktest"
	"github.com/esimplatform/esim/cmd/internal/services"
)

// Build compiles every service of services.yaml, and the extra packages
// (paths from the repository root, such as ./cmd/esimctl), into dir, and
// returns the declaration.
func Build(t testing.TB, dir string, extra ...string) services.Platform {
	t.Helper()
	p := Load(t)
	root, _ := services.Find(".")
	pkgs := slicesOf(p, extra)
	var wg sync.WaitGroup
	errs := make([]error, len(pkgs))
	outs := make([][]byte, len(pkgs))
	for i, pkg := range pkgs {
		wg.Go(func() {
			build := exec.Command("go", "build", "-o", filepath.Join(dir, filepath.Base(pkg)), pkg)
			build.Dir = filepath.Dir(root)
			outs[i], errs[i] = build.CombinedOutput()
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("build %s: %v\n%s", pkgs[i], err, outs[i])
		}
	}
	return p
}

func slicesOf(p services.Platform, extra []string) []string {
	pkgs := make([]string, 0, len(p)+len(extra))
	for _, s := range p {
		pkgs = append(pkgs, "./services/"+s.Name+"/cmd/"+s.Name)
	}
	return append(pkgs, extra...)
}

// Load reads the declaration, as Start does by default.
func Load(t testing.TB) services.Platform {
	t.Helper()
	path, err := services.Find(".")
	if err != nil {
		t.Fatal(err)
	}
	p, err := services.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FreeAddrs gives every service a free loopback address of its own, so a
// test never meets a developer's `make run` on the default ports.
func FreeAddrs(t testing.TB, p services.Platform) map[string]string {
	addrs := map[string]string{}
	for _, s := range p {
		addrs[s.Name] = loopbacktest.FreeAddr(t)
		for v := range s.Listeners {
			addrs[s.ListenerKey(v)] = loopbacktest.FreeAddr(t)
		}
	}
	return addrs
}

// Databases names the services that own a database.
func Databases(p services.Platform) []string {
	var names []string
	for _, s := range p {
		if s.Database {
			names = append(names, s.Name)
		}
	}
	return names
}
