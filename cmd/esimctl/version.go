package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionView is esimctl's build in --json output: what a bug report
// needs to name the exact source.
type versionView struct {
	// The module version, such as v1.4.0 for a tagged `go install`, a Go
	// pseudo-version when built from a checkout, or "devel" when the
	// build carried none (go run, go test).
	Version string `json:"version"`
	// The VCS commit built from, null when the build was not stamped.
	Revision *string `json:"revision"`
	// The commit's time, RFC 3339; null when not stamped.
	CommitTime *string `json:"commit_time"`
	// Whether the checkout had uncommitted changes: the revision alone
	// does not describe the binary then.
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
}

// buildVersion reads what the Go toolchain stamped into the binary.
// ok is false only when the binary carries no build information at all.
func buildVersion(info *debug.BuildInfo, ok bool) versionView {
	v := versionView{Version: "devel", Go: runtime.Version()}
	if !ok || info == nil {
		return v
	}
	if info.GoVersion != "" {
		v.Go = info.GoVersion
	}
	// "(devel)" is what Go records when it has no version to give.
	if mv := info.Main.Version; mv != "" && mv != "(devel)" {
		v.Version = mv
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev := s.Value
			v.Revision = &rev
		case "vcs.time":
			t := s.Value
			v.CommitTime = &t
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// versionText is the build on one line: "esimctl v1.4.0 (abc123def456,
// 2026-11-29T12:00:00Z, modified) go1.26.0".
func versionText(v versionView) string {
	s := "esimctl " + v.Version
	if v.Revision != nil {
		rev := *v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		detail := rev
		if v.CommitTime != nil {
			detail += ", " + *v.CommitTime
		}
		if v.Modified {
			detail += ", modified"
		}
		s += " (" + detail + ")"
	}
	return s + " " + v.Go
}

// thisBuild is the running binary's version.
func thisBuild() versionView {
	return buildVersion(debug.ReadBuildInfo())
}

func (c *cli) versionCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print esimctl's version and the commit it was built from",
		Long: `Print esimctl's version: the module version (a tag for a released build, a
Go pseudo-version for one built from a checkout, "devel" when the build
recorded none), the VCS revision and its time, and whether the checkout had
uncommitted changes. esimctl --version prints the same line. It calls no
service.`,
		Example: `  esimctl version
  esimctl version --json | jq -r .data.revision`,
		Args:        exactArgs(),
		Annotations: map[string]string{localAnnotation: "true"},
		RunE: func(*cobra.Command, []string) error {
			v := thisBuild()
			if c.json {
				return c.printJSON(v, nil)
			}
			_, err := fmt.Fprintln(c.stdout, versionText(v))
			return err
		},
	}
	return cmd
}
