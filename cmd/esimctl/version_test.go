package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// What the toolchain stamps is read as it is: a tagged module version, a
// pseudo-version, or "devel" when there is none; the revision, its time and
// whether the checkout was modified, when the build recorded them.
func TestBuildVersion(t *testing.T) {
	const rev = "1964cc40e83760d154a1eb2e4f4a4593aa49a201"
	stamped := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
		{Key: "vcs.time", Value: "2026-11-29T12:00:00Z"}, {Key: "vcs.modified", Value: "true"}}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"no build information", nil, false, "esimctl devel go"},
		{"go run or go test", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, true, "esimctl devel go1.26.0"},
		{"a workspace build from a checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: stamped}, true,
			"esimctl devel (1964cc40e837, 2026-11-29T12:00:00Z, modified) go1.26.0"},
		{"go install of a tag", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.4.0"}}, true, "esimctl v1.4.0 go1.26.0"},
		{"a module build from a clean checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261129120000-1964cc40e837"},
			Settings: stamped[:3]}, true, "esimctl v0.0.0-20261129120000-1964cc40e837 (1964cc40e837, 2026-11-29T12:00:00Z) go1.26.0"},
	} {
		if got := versionText(buildVersion(tc.info, tc.ok)); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	v := buildVersion(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: stamped}, true)
	if v.Version != "devel" || v.Revision == nil || *v.Revision != rev || v.CommitTime == nil || !v.Modified {
		t.Errorf("buildVersion = %+v", v)
	}
}

// version and --version print the same line, need no credential and no
// service, and version --json is the one JSON object every command prints.
func TestVersionCommand(t *testing.T) {
	// No operator token anywhere and no service address that parses:
	// version needs neither.
	env := map[string]string{"ESIM_OPERATOR_TOKEN": "", "ESIM_OPERATOR_TOKEN_FILE": filepath.Join(t.TempDir(), "none"),
		"ESIM_ACCOUNTS_URL": "notaurl", "ESIM_ORDERING_URL": "notaurl"}
	want := versionText(thisBuild()) + "\n"
	// go test records no VCS revision and no module version.
	if !strings.HasPrefix(want, "esimctl devel go1.") {
		t.Errorf("a test binary's version: %q", want)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := esimctl(t, env, args...).ok(t)
		if r.stdout != want || r.stderr != "" {
			t.Errorf("esimctl %s: stdout %q, stderr %q; want %q", args[0], r.stdout, r.stderr, want)
		}
	}
	var v versionView
	esimctl(t, env, "version", "--json").ok(t).data(t, &v)
	if v.Version != "devel" || v.Revision != nil || v.Go == "" {
		t.Errorf("version --json = %+v", v)
	}
	esimctl(t, env, "version", "extra").wantError(t, 2, `version takes no arguments, got ["extra"]`)
}

// A binary built as make build builds it names the build Go recorded in
// it (go version -m reads the same record independently), and, when built
// from a git checkout, the commit checked out.
func TestBuiltBinaryNamesItsBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "esimctl")
	// make build asks for -buildvcs=true where git is (workspace builds
	// stamp nothing by default).
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	recorded := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 2 && f[0] == "build":
			k, v, _ := strings.Cut(f[1], "=")
			recorded[k] = v
		case len(f) >= 3 && f[0] == "mod":
			recorded["mod"] = f[2]
		}
	}
	run := exec.Command(bin, "version", "--json")
	// Nothing a developer's shell sets may matter.
	run.Env = []string{"HOME=" + t.TempDir()}
	printed, err := run.Output()
	if err != nil {
		t.Fatalf("esimctl version --json: %v", err)
	}
	var got struct{ Data versionView }
	if err := json.Unmarshal(printed, &got); err != nil {
		t.Fatalf("esimctl version --json: %v\n%s", err, printed)
	}
	v := got.Data
	wantVersion := recorded["mod"]
	if wantVersion == "(devel)" || wantVersion == "" {
		wantVersion = "devel"
	}
	if v.Version != wantVersion {
		t.Errorf("version %q, go version -m says %q", v.Version, recorded["mod"])
	}
	rev, stamped := recorded["vcs.revision"]
	switch {
	case stamped && (v.Revision == nil || *v.Revision != rev || v.Modified != (recorded["vcs.modified"] == "true")):
		t.Errorf("version --json = %+v; go version -m records revision %s, modified %s", v, rev, recorded["vcs.modified"])
	case !stamped && v.Revision != nil:
		t.Errorf("version --json names revision %s; go version -m records none", *v.Revision)
	}
	if stamped {
		head, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatalf("the build names revision %s, but git rev-parse HEAD fails: %v", rev, err)
		}
		if strings.TrimSpace(string(head)) != rev {
			t.Errorf("the build names revision %s, HEAD is %s", rev, head)
		}
	}
	line, err := exec.Command(bin, "--version").Output()
	if err != nil || string(line) != versionText(v)+"\n" {
		t.Errorf("esimctl --version: %q, %v; want %q", line, err, versionText(v)+"\n")
	}
}
