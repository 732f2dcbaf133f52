package charts

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// umbrella is the chart that installs the whole platform in one release.
const umbrella = "esim"

// internalSecret is the Secret the umbrella makes with the services'
// credentials for one another.
const internalSecret = "esim-internal"

// operatorSecrets are the Secrets an operator creates before installing the
// umbrella, with the keys the services read from each: the README's
// operator section names every one.
var operatorSecrets = map[string][]string{
	"esim-database":    {"accounts", "catalogue", "ordering", "wallet", "webhook"},
	"esim-redis":       {"url"},
	"esim-webhook-key": {"key"},
}

// renderUmbrella renders the umbrella as `helm install RELEASE charts/esim`
// with vals over its values.yaml, and groups the objects by the service
// chart that made them ("" for the umbrella's own).
func renderUmbrella(t *testing.T, release string, vals map[string]any) map[string][]rendered {
	t.Helper()
	chrt, err := loader.Load(umbrella)
	if err != nil {
		t.Fatal(err)
	}
	out, err := renderRelease(chrt, vals, minKubeVersion, release)
	if err != nil {
		t.Fatalf("render %s as release %s: %v", umbrella, release, err)
	}
	bySvc := map[string][]rendered{}
	for _, r := range decodeRendered(t, out) {
		// Sources are esim/templates/... or esim/charts/<service>/templates/...
		svc := ""
		if rest, ok := strings.CutPrefix(r.source, umbrella+"/charts/"); ok {
			svc, _, _ = strings.Cut(rest, "/")
		}
		bySvc[svc] = append(bySvc[svc], r)
	}
	return bySvc
}

func TestUmbrellaLintsStrict(t *testing.T) {
	for name, vals := range map[string]map[string]any{
		"values.yaml":    {},
		"with simulator": {"smdp-sim": map[string]any{"enabled": true}},
	} {
		t.Run(name, func(t *testing.T) {
			linter := lint.AllWithKubeVersionAndSchemaValidation(umbrella, vals, namespace, &minKubeVersion, false)
			for _, m := range linter.Messages {
				if m.Severity >= support.WarningSev {
					t.Error(m.Error())
				}
			}
		})
	}
}

// TestUmbrellaInstallsEveryService renders the umbrella under a release
// name unlike any chart's and holds each service's part to the checks its
// own chart passes, with names that do not depend on the release.
func TestUmbrellaInstallsEveryService(t *testing.T) {
	bySvc := renderUmbrella(t, "prod-platform", map[string]any{})
	for _, s := range declared(t) {
		if s.Name == "smdp-sim" {
			if len(bySvc[s.Name]) != 0 {
				t.Errorf("the SM-DP+ simulator is installed by default: it is for development only")
			}
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			objs := bySvc[s.Name]
			checkChart(t, s.Name, false, objs)
			for _, r := range objs {
				switch o := r.obj.(type) {
				case *appsv1.Deployment:
					if o.Name != s.Name {
						t.Errorf("Deployment %s: want %s whatever the release is called", o.Name, s.Name)
					}
				case *corev1.Service:
					// The services' charts address each other as
					// http://<name> (their *_URL defaults).
					if o.Name != s.Name {
						t.Errorf("Service %s: want %s whatever the release is called", o.Name, s.Name)
					}
				}
			}
		})
	}
	withSim := renderUmbrella(t, "prod-platform", map[string]any{"smdp-sim": map[string]any{"enabled": true}})
	// The simulator is development's, with its development certificates.
	checkChart(t, "smdp-sim", true, withSim["smdp-sim"])
}

// TestUmbrellaWiresCredentials checks the Secret references of every
// service: each names either a key the umbrella's internal Secret holds or
// one of operatorSecrets, and every CALLERS lists exactly the services.yaml
// callers and the operator, each by the SHA-256 of the token that caller
// is given.
func TestUmbrellaWiresCredentials(t *testing.T) {
	bySvc := renderUmbrella(t, "esim", map[string]any{})
	var internal *corev1.Secret
	for _, r := range bySvc[""] {
		if s, ok := r.obj.(*corev1.Secret); ok && s.Name == internalSecret {
			internal = s
		}
	}
	if internal == nil {
		t.Fatalf("the umbrella renders no Secret %s", internalSecret)
	}
	tokens := map[string]string{}
	for k, v := range internal.Data {
		if name, ok := strings.CutSuffix(k, "-token"); ok {
			if len(v) < 32 {
				t.Errorf("%s: %d bytes, want at least 32", k, len(v))
			}
			tokens[name] = string(v)
		}
	}
	if tokens["operator"] == "" {
		t.Errorf("%s has no operator-token for esimctl", internalSecret)
	}
	used := map[string][]string{}
	for _, s := range declared(t) {
		for _, r := range bySvc[s.Name] {
			d, ok := r.obj.(*appsv1.Deployment)
			if !ok {
				continue
			}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
					continue
				}
				ref := e.ValueFrom.SecretKeyRef
				used[ref.Name] = append(used[ref.Name], ref.Key)
				switch {
				case ref.Name == internalSecret:
					if _, ok := internal.Data[ref.Key]; !ok {
						t.Errorf("%s: %s reads %s key %s, which the umbrella does not make", s.Name, e.Name, ref.Name, ref.Key)
					}
				case !slices.Contains(operatorSecrets[ref.Name], ref.Key):
					t.Errorf("%s: %s reads Secret %s key %s, neither made by the umbrella nor among the operator's Secrets", s.Name, e.Name, ref.Name, ref.Key)
				}
				switch e.Name {
				case "CALLERS":
					checkCallers(t, s.Name, string(internal.Data[ref.Key]), tokens)
				case "INTERNAL_TOKEN":
					if want := s.Name + "-token"; ref.Key != want {
						t.Errorf("%s: INTERNAL_TOKEN is key %s, want %s (the token its callees' CALLERS hash)", s.Name, ref.Key, want)
					}
				}
			}
		}
	}
	// Every Secret the operator is asked for is read by some service, with
	// every key asked for.
	for name, keys := range operatorSecrets {
		for _, k := range keys {
			if !slices.Contains(used[name], k) {
				t.Errorf("operator Secret %s key %s is read by no service", name, k)
			}
		}
	}
}

// checkCallers holds a service's CALLERS to services.yaml: its callers and
// the operator, each hashed from the token the umbrella gives that caller.
func checkCallers(t *testing.T, service, callers string, tokens map[string]string) {
	t.Helper()
	want := append(callersOf(t, service), "operator")
	sort.Strings(want)
	var got []string
	for _, entry := range strings.Split(callers, ",") {
		name, hash, ok := strings.Cut(entry, ":")
		if !ok {
			t.Errorf("%s: CALLERS entry %q is not name:sha256-hex", service, entry)
			continue
		}
		sum := sha256.Sum256([]byte(tokens[name]))
		if tokens[name] == "" || hash != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: CALLERS entry for %s is not the SHA-256 of the token %s is given", service, name, name)
		}
		got = append(got, name)
	}
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s: CALLERS lists %v, want %v (services.yaml and the operator)", service, got, want)
	}
}

// TestUmbrellaSharedValues: the image registry and tag and the settings
// under global reach every service that uses them, once.
func TestUmbrellaSharedValues(t *testing.T) {
	bySvc := renderUmbrella(t, "esim", map[string]any{
		"global": map[string]any{
			"image": map[string]any{"registry": "registry.example/mirror/", "tag": "1.2.3"},
			"env":   map[string]any{"KAFKA_BROKERS": "b1.example:9092,b2.example:9092", "LOG_LEVEL": "warn"},
		},
		"wallet": map[string]any{"image": map[string]any{"tag": "1.2.4"}},
	})
	for _, s := range declared(t) {
		for _, r := range bySvc[s.Name] {
			d, ok := r.obj.(*appsv1.Deployment)
			if !ok {
				continue
			}
			c := d.Spec.Template.Spec.Containers[0]
			tag := "1.2.3"
			if s.Name == "wallet" {
				tag = "1.2.4" // a service's own tag wins
			}
			if want := "registry.example/mirror/" + s.Name + ":" + tag; c.Image != want {
				t.Errorf("%s: image %s, want %s", s.Name, c.Image, want)
			}
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
			}
			if env["LOG_LEVEL"] != "warn" {
				t.Errorf("%s: LOG_LEVEL %q, want the shared warn", s.Name, env["LOG_LEVEL"])
			}
			brokers, has := env["KAFKA_BROKERS"]
			if s.Kafka && brokers != "b1.example:9092,b2.example:9092" {
				t.Errorf("%s uses Kafka: KAFKA_BROKERS %q, want the shared brokers", s.Name, brokers)
			}
			if !s.Kafka && has {
				t.Errorf("%s does not use Kafka but is given KAFKA_BROKERS", s.Name)
			}
		}
	}
}

// TestUmbrellaCallsFollowServicesYAML: the umbrella's calls map, which
// makes the internal credentials, is services.yaml's, with the operator
// calling every service that owns a database (esimctl).
func TestUmbrellaCallsFollowServicesYAML(t *testing.T) {
	vals, err := chartutil.ReadValuesFile(filepath.Join(umbrella, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	calls, err := vals.Table("internalCredentials.calls")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	for _, s := range declared(t) {
		if len(s.Calls) > 0 {
			want[s.Name] = slices.Sorted(slices.Values(s.Calls))
		}
		if s.Database {
			want["operator"] = append(want["operator"], s.Name)
		}
	}
	sort.Strings(want["operator"])
	got := map[string][]string{}
	for caller, called := range calls {
		list, _ := called.([]any)
		for _, c := range list {
			got[caller] = append(got[caller], c.(string))
		}
		sort.Strings(got[caller])
	}
	for caller := range want {
		if !slices.Equal(got[caller], want[caller]) {
			t.Errorf("internalCredentials.calls.%s is %v, services.yaml says %v", caller, got[caller], want[caller])
		}
	}
	for caller := range got {
		if _, ok := want[caller]; !ok {
			t.Errorf("internalCredentials.calls.%s: %s calls nothing in services.yaml", caller, caller)
		}
	}
}

// TestReadmeNamesTheOperatorSecrets: the README's operator section is the
// install, and it must name what the install needs.
func TestReadmeNamesTheOperatorSecrets(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	if i := strings.Index(section, "### Install it on a cluster"); i >= 0 {
		section = section[i:]
		if j := strings.Index(section[4:], "\n## "); j >= 0 {
			section = section[:j+4]
		}
	} else {
		t.Fatal(`README.md has no "### Install it on a cluster" section`)
	}
	if !strings.Contains(section, "helm install esim charts/esim") {
		t.Error("the README's install section does not install charts/esim")
	}
	for name, keys := range operatorSecrets {
		if !strings.Contains(section, name) {
			t.Errorf("the README's install section does not name Secret %s", name)
		}
		for _, k := range keys {
			if !strings.Contains(section, "--from-literal="+k+"=") && !strings.Contains(section, "--from-file="+k+"=") {
				t.Errorf("the README's install section does not set key %s of %s", k, name)
			}
		}
	}
}

// TestUmbrellaServiceMonitors: global.serviceMonitor gives every service a
// ServiceMonitor carrying its labels.
func TestUmbrellaServiceMonitors(t *testing.T) {
	chrt, err := loader.Load(umbrella)
	if err != nil {
		t.Fatal(err)
	}
	out, err := renderRelease(chrt, map[string]any{"global": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
	}}, minKubeVersion, "esim")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range declared(t) {
		if s.Name == "smdp-sim" {
			continue // not installed by default
		}
		doc := out[umbrella+"/charts/"+s.Name+"/templates/servicemonitor.yaml"]
		var sm serviceMonitor
		for _, d := range strings.Split(doc, "\n---\n") {
			if strings.Contains(d, "kind: ServiceMonitor") {
				if err := yaml.UnmarshalStrict([]byte(d), &sm); err != nil {
					t.Fatalf("%s: %v", s.Name, err)
				}
			}
		}
		if sm.Metadata.Labels["release"] != "prom" {
			t.Errorf("%s: ServiceMonitor labels %v, want the global release: prom", s.Name, sm.Metadata.Labels)
		}
	}
}
