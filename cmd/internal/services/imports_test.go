package services_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/esimplatform/esim"

// TestImportRules holds the boundaries between bounded contexts that
// separate modules would otherwise have to: a service's code never
// imports another service (it calls it over Twirp), and neither does a
// library, a contract in proto/ or esimctl (which takes the numbers it
// checks from proto/limits). Test helpers (packages named *test) may:
// they start other services for tests.
func TestImportRules(t *testing.T) {
	root, p := load(t)
	// forbidden(owner) reports the imports owner's code may not make:
	// another service, and cmd/ unless owner is cmd itself.
	forbidden := func(owner string) func(dep string) bool {
		return func(dep string) bool {
			rest, ok := strings.CutPrefix(dep, module+"/services/")
			if !ok {
				return strings.HasPrefix(dep, module+"/cmd/") && owner != "cmd"
			}
			return owner == "" || strings.SplitN(rest, "/", 2)[0] != owner
		}
	}
	check := func(pattern string, isForbidden func(string) bool) {
		t.Helper()
		var prod []string
		for _, pkg := range goList(t, root, "-f", "{{.ImportPath}}", pattern) {
			if !isTestHelper(pkg) {
				prod = append(prod, pkg)
			}
		}
		if len(prod) == 0 {
			t.Fatalf("%s: no packages", pattern)
		}
		for _, pkg := range prod {
			for _, dep := range goList(t, root, "-deps", "-f", "{{.ImportPath}}", pkg) {
				if isForbidden(dep) {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
	for _, s := range p {
		check("./services/"+s.Name+"/...", forbidden(s.Name))
	}
	check("./libs/...", forbidden(""))
	check("./proto/...", forbidden(""))
	check("./cmd/esimctl", forbidden("cmd"))
}

// isTestHelper reports whether pkg is a package tests import (pgtest,
// orderingtest, ...), which may start services of their own.
func isTestHelper(pkg string) bool {
	for _, el := range strings.Split(pkg, "/") {
		if strings.HasSuffix(el, "test") {
			return true
		}
	}
	return false
}

func goList(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		t.Fatalf("go list %s: %s", strings.Join(args, " "), msg)
	}
	return strings.Fields(string(out))
}
