package charts

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"

	"github.com/esimplatform/esim/libs/redisurl"

	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	serializerjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/httpserver"
	libpostgres "github.com/esimplatform/esim/libs/postgres"
)

// valuesFiles are the two ways each chart is deployed: values.yaml alone
// (production-like) and values-dev.yaml layered over it (kind/Tilt).
var valuesFiles = []string{"values.yaml", "values-dev.yaml"}

// minKubeVersion is the oldest Kubernetes the charts support (their
// kubeVersion): the preStop sleep action is on by default from 1.30. Charts
// are rendered and linted against it, so a template that needs a newer API
// fails here.
var minKubeVersion = chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}

const (
	namespace = "esim"
	// nonRootUID is the "nonroot" user of the base image (tools/imagebase).
	nonRootUID = 65532
)

// TestMain silences the standard logger: Helm's loader logs every symlink it
// follows, and each chart's charts/library is one by design. Failures come
// back as errors, not log lines.
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}

// rendered is one object out of a chart or a manifest file.
type rendered struct {
	source string
	obj    runtime.Object
}

// strictYAML is the decoder the API server applies with strict field
// validation (kubectl's default): case-sensitive field names, unknown and
// duplicate fields reported. sigs.k8s.io/yaml's UnmarshalStrict is not
// enough: it decodes with encoding/json, which matches names regardless of
// case, so "readOnlyRootFileSystem: true" would pass here and be dropped by
// the cluster.
var strictYAML = serializerjson.NewSerializerWithOptions(serializerjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
	serializerjson.SerializerOptions{Yaml: true, Strict: true})

// decodeStrict decodes one YAML document into the Kubernetes API type named
// by its apiVersion and kind. Unknown kinds, unknown or misspelt fields
// (case included), duplicate keys and wrong types are errors: the offline
// equivalent of the API server's strict field validation.
func decodeStrict(doc []byte) (runtime.Object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, errors.New("document has no apiVersion or kind")
	}
	obj, _, err := strictYAML.Decode(doc, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	return obj, nil
}

// splitDocuments splits a multi-document YAML stream, dropping documents
// that hold only comments or whitespace (templates that render nothing).
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var probe any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			return nil, err
		}
		if probe != nil {
			docs = append(docs, doc)
		}
	}
}

func decodeAll(t *testing.T, source string, data []byte) []rendered {
	t.Helper()
	docs, err := splitDocuments(data)
	if err != nil {
		t.Fatalf("%s: %v", source, err)
	}
	var out []rendered
	for i, doc := range docs {
		obj, err := decodeStrict(doc)
		if err != nil {
			t.Errorf("%s (document %d): %v", source, i+1, err)
			continue
		}
		out = append(out, rendered{source: source, obj: obj})
	}
	return out
}

// applicationCharts lists the services' chart folders next to this file,
// without the library chart and the umbrella chart (umbrella_test.go).
func applicationCharts(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		meta, err := chartutil.LoadChartfile(filepath.Join(e.Name(), "Chart.yaml"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		if meta.Type != "library" && meta.Name != umbrella {
			names = append(names, e.Name())
		}
	}
	return names
}

// overrides reads the values layered over values.yaml, as `helm -f` does.
func overrides(t *testing.T, chartName, valuesFile string) map[string]any {
	t.Helper()
	if valuesFile == "values.yaml" {
		return map[string]any{}
	}
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartName, valuesFile))
	if err != nil {
		t.Fatal(err)
	}
	return vals.AsMap()
}

// renderChart renders a chart the way `helm install NAME charts/NAME -n esim`
// would, with the release named after the chart.
func renderChart(chartName string, vals map[string]any) (map[string]string, error) {
	chrt, err := loader.Load(chartName)
	if err != nil {
		return nil, err
	}
	return renderLoaded(chrt, vals)
}

func renderLoaded(chrt *chart.Chart, vals map[string]any) (map[string]string, error) {
	return renderFor(chrt, vals, minKubeVersion)
}

// renderFor renders against a cluster of the given version and, as `helm
// install` does, refuses a chart whose kubeVersion excludes it.
func renderFor(chrt *chart.Chart, vals map[string]any, kube chartutil.KubeVersion) (map[string]string, error) {
	return renderRelease(chrt, vals, kube, chrt.Name())
}

// renderRelease renders as `helm install RELEASE` would.
func renderRelease(chrt *chart.Chart, vals map[string]any, kube chartutil.KubeVersion, release string) (map[string]string, error) {
	if c := chrt.Metadata.KubeVersion; c != "" && !chartutil.IsCompatibleRange(c, kube.String()) {
		return nil, fmt.Errorf("chart requires kubeVersion %s, which excludes Kubernetes %s", c, kube.String())
	}
	if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = kube
	opts := chartutil.ReleaseOptions{Name: release, Namespace: namespace, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(chrt, vals, opts, caps)
	if err != nil {
		return nil, err
	}
	return engine.Render(chrt, rv)
}

func renderObjects(t *testing.T, chartName, valuesFile string) []rendered {
	t.Helper()
	out, err := renderChart(chartName, overrides(t, chartName, valuesFile))
	if err != nil {
		t.Fatalf("render %s with %s: %v", chartName, valuesFile, err)
	}
	return decodeRendered(t, out)
}

// decodeRendered decodes every manifest of a rendered chart, in file order.
func decodeRendered(t *testing.T, out map[string]string) []rendered {
	t.Helper()
	files := make([]string, 0, len(out))
	for f := range out {
		files = append(files, f)
	}
	sort.Strings(files)
	var objs []rendered
	for _, f := range files {
		if strings.HasSuffix(f, "NOTES.txt") {
			continue
		}
		objs = append(objs, decodeAll(t, f, []byte(out[f]))...)
	}
	return objs
}

func TestEveryChartIsListed(t *testing.T) {
	got := applicationCharts(t)
	var want []string
	for _, s := range declared(t) {
		want = append(want, s.Name)
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("chart folders %v, services in services.yaml %v", got, want)
	}
	if generated := slices.Sorted(maps.Keys(services)); !slices.Equal(generated, want) {
		t.Fatalf("services_gen_test.go lists %v, services.yaml %v: run make generate", generated, want)
	}
}

// declaredService is an entry of services.yaml, as far as the charts need it.
type declaredService struct {
	Name     string   `json:"name"`
	Port     int      `json:"port"`
	Database bool     `json:"database"`
	Redis    bool     `json:"redis"`
	Kafka    bool     `json:"kafka"`
	Public   bool     `json:"public"`
	Calls    []string `json:"calls"`
	// Env holds ${<service>.<VAR>}: the listeners of other services it
	// reaches.
	Env map[string]string `json:"env"`
}

// declared reads services.yaml, the one list of services.
func declared(t *testing.T) []declaredService {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Services []declaredService `json:"services"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("services.yaml: %v", err)
	}
	return file.Services
}

// callersOf lists the services that call name.
func callersOf(t *testing.T, name string) []string {
	var callers []string
	for _, s := range declared(t) {
		if slices.Contains(s.Calls, name) {
			callers = append(callers, s.Name)
		}
	}
	return callers
}

// TestLintStrict is `helm lint --strict -f FILE` for every chart: warnings
// fail as errors do.
func TestLintStrict(t *testing.T) {
	for _, c := range applicationCharts(t) {
		for _, vf := range valuesFiles {
			t.Run(c+"/"+vf, func(t *testing.T) {
				linter := lint.AllWithKubeVersionAndSchemaValidation(c, overrides(t, c, vf), namespace, &minKubeVersion, false)
				for _, m := range linter.Messages {
					if m.Severity >= support.WarningSev {
						t.Error(m.Error())
					} else {
						t.Log(m.Error())
					}
				}
			})
		}
	}
	// The library chart is linted on its own too (it renders nothing).
	linter := lint.All("library", nil, namespace, false)
	for _, m := range linter.Messages {
		if m.Severity >= support.WarningSev {
			t.Error(m.Error())
		}
	}
}

func TestChartsRender(t *testing.T) {
	for _, c := range applicationCharts(t) {
		for _, vf := range valuesFiles {
			t.Run(c+"/"+vf, func(t *testing.T) {
				objs := renderObjects(t, c, vf)
				checkChart(t, c, vf == "values-dev.yaml", objs)
			})
		}
	}
}

// publicCharts are the charts the internet reaches, each through an
// Ingress of its own in production, with the paths that Ingress routes:
// the partner API (the gateway: the API and the QR images, httpapi.QRPath,
// and nothing else, since the probes answer on the same port) and the
// partner portal (a web site on a host of its own: all of it). Every other
// chart is internal: no Ingress, and a NetworkPolicy that admits only its
// callers.
var publicCharts = map[string][]string{
	"gateway": {"/v1", "/qr"},
	"portal":  {"/"},
}

// TestPublicCharts: a service that serves the partner API (public in
// services.yaml) has an Ingress, and every public chart is a chart.
func TestPublicCharts(t *testing.T) {
	charts := applicationCharts(t)
	for name := range publicCharts {
		if !slices.Contains(charts, name) {
			t.Errorf("publicCharts lists %s, which is no chart", name)
		}
	}
	for _, s := range declared(t) {
		if _, ok := publicCharts[s.Name]; s.Public && !ok {
			t.Errorf("%s serves the partner API (services.yaml) but is not among publicCharts", s.Name)
		}
	}
}

// checkIngress holds the public surface: in production the public charts
// alone have an Ingress, one each, and it routes exactly their paths to
// their Service (for the gateway /v1 and /qr: the probes share its port),
// over TLS.
func checkIngress(t *testing.T, chartName string, dev bool, svc *corev1.Service, ingresses []*networkingv1.Ingress) {
	t.Helper()
	paths, public := publicCharts[chartName]
	want := 0
	if public && !dev {
		want = 1
	}
	if len(ingresses) != want {
		t.Fatalf("%d Ingresses, want %d", len(ingresses), want)
	}
	for _, ing := range ingresses {
		if len(ing.Spec.TLS) == 0 || ing.Spec.TLS[0].SecretName == "" {
			t.Errorf("Ingress %s without TLS: credentials would cross the internet in clear", ing.Name)
		}
		if ing.Spec.DefaultBackend != nil || len(ing.Spec.Rules) == 0 {
			t.Errorf("Ingress %s: a default backend or no rules would route more than %v", ing.Name, paths)
		}
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				t.Fatalf("Ingress %s: rule without paths", ing.Name)
			}
			var routed []string
			for _, p := range rule.HTTP.Paths {
				routed = append(routed, p.Path)
				if p.PathType == nil || *p.PathType != networkingv1.PathTypePrefix {
					t.Errorf("Ingress %s routes %q as %v, want a prefix", ing.Name, p.Path, p.PathType)
				}
				if b := p.Backend.Service; b == nil || b.Name != svc.Name || b.Port.Name != "http" {
					t.Errorf("Ingress %s: backend %+v, want Service %s port http", ing.Name, p.Backend, svc.Name)
				}
			}
			if !slices.Equal(routed, paths) {
				t.Errorf("Ingress %s routes %v, want %v only", ing.Name, routed, paths)
			}
		}
	}
}

// singleReplica are the charts that run one replica in production too,
// and why.
var singleReplica = map[string]string{
	"smdp-sim": "the simulator keeps its profiles and orders in memory, so a second replica would answer for profiles it never issued",
}

// checkSecretFiles: Secrets mounted as files are read-only, for the pod's
// group at most, and mounted where a volume of that name is.
func checkSecretFiles(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	ps := d.Spec.Template.Spec
	secretVolumes := map[string]bool{}
	for _, v := range ps.Volumes {
		if v.Secret == nil {
			continue
		}
		secretVolumes[v.Name] = true
		if m := v.Secret.DefaultMode; m == nil || *m&0o037 != 0 {
			t.Errorf("volume %s: defaultMode %v, want at most 0440 (the pod's group reads, no one writes)", v.Name, m)
		}
		if isTrue(v.Secret.Optional) {
			t.Errorf("volume %s: an optional Secret hides missing files until they are read", v.Name)
		}
	}
	mounted := map[string]bool{}
	for _, m := range ps.Containers[0].VolumeMounts {
		if secretVolumes[m.Name] {
			mounted[m.Name] = true
			if !m.ReadOnly {
				t.Errorf("volume %s is mounted writable at %s", m.Name, m.MountPath)
			}
		}
	}
	for name := range secretVolumes {
		if !mounted[name] {
			t.Errorf("Secret volume %s is mounted nowhere", name)
		}
	}
}

func checkChart(t *testing.T, chartName string, dev bool, objs []rendered) {
	var (
		deployments []*appsv1.Deployment
		svcs        []*corev1.Service
		hpas        []*autoscalingv2.HorizontalPodAutoscaler
		pdbs        []*policyv1.PodDisruptionBudget
		secrets     = map[string]*corev1.Secret{}
		accountSA   []*corev1.ServiceAccount
		ingresses   []*networkingv1.Ingress
		policies    []*networkingv1.NetworkPolicy
	)
	for _, r := range objs {
		m, err := metaOf(r.obj)
		if err != nil {
			t.Fatalf("%s: %v", r.source, err)
		}
		checkLabels(t, r.source, m.GetLabels())
		// Explicit namespaces: Tilt and plain `kubectl apply` of rendered
		// output must land where `helm -n` would.
		if m.GetNamespace() != namespace {
			t.Errorf("%s: namespace %q, want the release namespace %q", r.source, m.GetNamespace(), namespace)
		}
		switch o := r.obj.(type) {
		case *appsv1.Deployment:
			deployments = append(deployments, o)
		case *corev1.Service:
			svcs = append(svcs, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			hpas = append(hpas, o)
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, o)
		case *corev1.Secret:
			secrets[o.Name] = o
		case *corev1.ServiceAccount:
			accountSA = append(accountSA, o)
		case *networkingv1.NetworkPolicy:
			policies = append(policies, o)
		case *networkingv1.Ingress:
			ingresses = append(ingresses, o)
		default:
			t.Errorf("%s: unexpected %T", r.source, r.obj)
		}
	}
	if len(deployments) != 1 || len(svcs) != 1 || len(accountSA) != 1 {
		t.Fatalf("want one Deployment, Service and ServiceAccount, got %d, %d, %d", len(deployments), len(svcs), len(accountSA))
	}
	d := deployments[0]
	checkDeployment(t, d)
	checkEnv(t, chartName, dev, d, secrets)
	// Without a policy in production every pod of the cluster could call
	// the internal APIs, and the checks below would hold for nothing.
	if !dev && len(policies) != 1 {
		t.Errorf("want one NetworkPolicy in production, got %d", len(policies))
	}
	checkNetworkPolicies(t, chartName, d, policies)

	pod := labels.Set(d.Spec.Template.Labels)
	if sel := labels.SelectorFromSet(d.Spec.Selector.MatchLabels); !sel.Matches(pod) {
		t.Errorf("Deployment selector %v does not match its pods %v", sel, pod)
	}
	if d.Spec.Template.Spec.ServiceAccountName != accountSA[0].Name {
		t.Errorf("pods run as %q, the chart creates %q", d.Spec.Template.Spec.ServiceAccountName, accountSA[0].Name)
	}
	if a := accountSA[0].AutomountServiceAccountToken; a == nil || *a {
		t.Error("ServiceAccount must set automountServiceAccountToken: false")
	}

	s := svcs[0]
	if !labels.SelectorFromSet(s.Spec.Selector).Matches(pod) {
		t.Errorf("Service selector %v does not match the pods %v", s.Spec.Selector, pod)
	}
	// The Service carries the API (http) and the further listeners
	// (extraPorts), each by its container port's name, never /metrics.
	ports := containerPorts(d.Spec.Template.Spec.Containers[0])
	var targets []string
	for _, p := range s.Spec.Ports {
		target := p.TargetPort.String()
		targets = append(targets, target)
		if target == "metrics" || ports[target] == 0 || p.Name != target {
			t.Errorf("Service port %s targets %s, want a named container port of its name other than metrics", p.Name, target)
		}
	}
	for name := range ports {
		if name != "metrics" && !slices.Contains(targets, name) {
			t.Errorf("container port %s is on no Service port", name)
		}
	}
	checkSecretFiles(t, d)

	checkIngress(t, chartName, dev, s, ingresses)

	if dev {
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
			t.Errorf("dev: want 1 replica, got %v", d.Spec.Replicas)
		}
		if len(hpas)+len(pdbs) != 0 {
			t.Errorf("dev: want no HPA or PDB, got %d and %d", len(hpas), len(pdbs))
		}
		return
	}
	if len(secrets) != 0 {
		t.Error("production values must not render Secrets: they come from the cluster's secret manager")
	}
	if why, ok := singleReplica[chartName]; ok {
		if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || len(hpas)+len(pdbs) != 0 {
			t.Errorf("want 1 replica and no HPA or PDB (%s), got %v, %d HPAs and %d PDBs", why, d.Spec.Replicas, len(hpas), len(pdbs))
		}
		return
	}
	if d.Spec.Replicas != nil {
		t.Errorf("with an HPA the Deployment must leave replicas unset, got %d", *d.Spec.Replicas)
	}
	if len(hpas) != 1 {
		t.Fatalf("want one HPA, got %d", len(hpas))
	}
	h := hpas[0]
	if h.Spec.ScaleTargetRef.Kind != "Deployment" || h.Spec.ScaleTargetRef.Name != d.Name {
		t.Errorf("HPA targets %s %s, want Deployment %s", h.Spec.ScaleTargetRef.Kind, h.Spec.ScaleTargetRef.Name, d.Name)
	}
	if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
		t.Errorf("HPA replicas %v..%d: want at least 2", h.Spec.MinReplicas, h.Spec.MaxReplicas)
	}
	if len(pdbs) != 1 {
		t.Fatalf("want one PDB, got %d", len(pdbs))
	}
	checkPDB(t, pdbs[0], pod, *h.Spec.MinReplicas)
}

// checkPDB holds the budget to what keeps node drains moving: it selects
// the pods, always allows one eviction even at the HPA's minimum, and lets
// pods that are not Ready go regardless (with the default policy, all
// replicas unready at once, as during a database outage, block every
// drain until the outage ends).
func checkPDB(t *testing.T, pdb *policyv1.PodDisruptionBudget, pod labels.Set, minReplicas int32) {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(pod) {
		t.Errorf("PDB selector %v does not match the pods (%v)", pdb.Spec.Selector, err)
	}
	switch {
	case pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable != nil:
		t.Error("PDB sets both minAvailable and maxUnavailable")
	case pdb.Spec.MaxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, int(minReplicas), true)
		if err != nil || n < 1 {
			t.Errorf("PDB maxUnavailable %s allows no eviction at %d replicas (%v)", pdb.Spec.MaxUnavailable.String(), minReplicas, err)
		}
	case pdb.Spec.MinAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(minReplicas), true)
		if err != nil || n >= int(minReplicas) {
			t.Errorf("PDB minAvailable %s allows no eviction at %d replicas (%v)", pdb.Spec.MinAvailable.String(), minReplicas, err)
		}
	default:
		t.Error("PDB sets neither minAvailable nor maxUnavailable")
	}
	if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
		t.Errorf("PDB unhealthyPodEvictionPolicy %v, want AlwaysAllow so unready pods never block a drain", p)
	}
}

// TestIngressRefusesPlainHTTP: an Ingress without TLS is an explicit
// choice (TLS ended in front of the controller), never an omission, in
// every public chart.
func TestIngressRefusesPlainHTTP(t *testing.T) {
	for _, c := range slices.Sorted(maps.Keys(publicCharts)) {
		t.Run(c, func(t *testing.T) {
			plain := map[string]any{"ingress": map[string]any{"tlsSecretName": ""}}
			if _, err := renderChart(c, plain); err == nil || !strings.Contains(err.Error(), "tlsSecretName") {
				t.Fatalf("want the chart to refuse an Ingress without TLS, got %v", err)
			}
			plain["ingress"].(map[string]any)["allowPlainHTTP"] = true
			out, err := renderChart(c, plain)
			if err != nil {
				t.Fatalf("allowPlainHTTP: %v", err)
			}
			rendered := 0
			for name, doc := range out {
				if strings.HasSuffix(name, "ingress.yaml") {
					rendered++
					if !strings.Contains(doc, "kind: Ingress") || strings.Contains(doc, "tls:") {
						t.Errorf("allowPlainHTTP rendered %s as:\n%s", name, doc)
					}
				}
			}
			if rendered != 1 {
				t.Errorf("allowPlainHTTP: %d ingress.yaml templates rendered, want 1", rendered)
			}
		})
	}
}

// TestPDBRefusesToBlockDrains: zero is refused however it is written (a
// quoted "0" is truthy in a template, and renders as the number 0), and
// refusing is by value: budgets that allow an eviction still render.
func TestPDBRefusesToBlockDrains(t *testing.T) {
	pdb := func(v any) (map[string]string, error) {
		return renderChart("accounts", map[string]any{"podDisruptionBudget": map[string]any{"maxUnavailable": v}})
	}
	for _, v := range []any{0, 0.0, "0", "00", "0%", "00%", "-0", "", nil} {
		if _, err := pdb(v); err == nil || !strings.Contains(err.Error(), "maxUnavailable") {
			t.Errorf("maxUnavailable %#v: want the chart to refuse it, got %v", v, err)
		}
	}
	for v, want := range map[any]string{1: "1", 2.0: "2", "1": "1", "25%": "25%", "100%": "100%"} {
		out, err := pdb(v)
		if err != nil {
			t.Errorf("maxUnavailable %#v: %v", v, err)
			continue
		}
		obj, err := decodeStrict([]byte(out["accounts/templates/pdb.yaml"]))
		if err != nil {
			t.Fatalf("maxUnavailable %#v: %v", v, err)
		}
		if got := obj.(*policyv1.PodDisruptionBudget).Spec.MaxUnavailable; got == nil || got.String() != want {
			t.Errorf("maxUnavailable %#v rendered as %v, want %s", v, got, want)
		}
	}
}

// TestMetricsPortMustDifferFromContainerPort: on the API's port /metrics
// would again admit its scrapers to the API. The service refuses it too,
// but only when it starts; the chart refuses the install. Any other port
// carries through to the listener, the container port and the annotation.
func TestMetricsPortMustDifferFromContainerPort(t *testing.T) {
	for _, vals := range []map[string]any{
		{"metrics": map[string]any{"port": 8080}},
		{"containerPort": 9090},
	} {
		if _, err := renderChart("accounts", vals); err == nil || !strings.Contains(err.Error(), "metrics.port") || !strings.Contains(err.Error(), "must differ from containerPort") {
			t.Errorf("%v: want the chart to refuse the metrics port on the API's, got %v", vals, err)
		}
	}
	out, err := renderChart("accounts", map[string]any{"metrics": map[string]any{"port": 9100}})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := decodeStrict([]byte(out["accounts/templates/deployment.yaml"]))
	if err != nil {
		t.Fatal(err)
	}
	d := obj.(*appsv1.Deployment)
	c := d.Spec.Template.Spec.Containers[0]
	checkMetricsPort(t, c)
	if p := containerPorts(c)["metrics"]; p != 9100 || d.Spec.Template.Annotations["prometheus.io/port"] != "9100" {
		t.Errorf("metrics.port 9100: metrics port %d, prometheus.io/port %q", p, d.Spec.Template.Annotations["prometheus.io/port"])
	}
}

// TestDerivedEnvCannotBeSet: HTTP_ADDR and METRICS_ADDR come from the
// ports, so the listeners, the probes and the NetworkPolicy agree. Set
// again in env or secretEnv, the container would carry both values and the
// service would read the later one.
func TestDerivedEnvCannotBeSet(t *testing.T) {
	for chartName, names := range map[string][]string{
		"accounts": {"HTTP_ADDR", "METRICS_ADDR"},
		// An extraPorts listener's, derived from its containerPort.
		"smdp-sim": {"HTTP_ADDR", "METRICS_ADDR", "ES2PLUS_ADDR"},
	} {
		for _, name := range names {
			for from, vals := range map[string]map[string]any{
				"env":       {"env": map[string]any{name: ":9999"}},
				"secretEnv": {"secretEnv": map[string]any{name: map[string]any{"secretName": "s", "key": "k"}}},
			} {
				if _, err := renderChart(chartName, vals); err == nil || !strings.Contains(err.Error(), "env "+name+" is set twice") {
					t.Errorf("%s: %s in %s: want the chart to refuse it, got %v", chartName, name, from, err)
				}
			}
		}
	}
}

// TestExtraPortsMustDiffer: a further listener on the API's or the
// metrics port, or under their names, would make the NetworkPolicy and
// the Service ambiguous; the chart refuses it.
func TestExtraPortsMustDiffer(t *testing.T) {
	for _, p := range []map[string]any{
		{"name": "es2plus", "containerPort": 8080, "env": "ES2PLUS_ADDR"},
		{"name": "es2plus", "containerPort": 9090, "env": "ES2PLUS_ADDR"},
		{"name": "http", "containerPort": 8443, "env": "ES2PLUS_ADDR"},
		{"name": "es2plus", "containerPort": 8443},
	} {
		if _, err := renderChart("smdp-sim", map[string]any{"extraPorts": []any{p}}); err == nil || !strings.Contains(err.Error(), "extraPorts") {
			t.Errorf("extraPorts %v: want the chart to refuse it, got %v", p, err)
		}
	}
}

// TestMetricsDisabled: without metrics nothing is scraped and no one is
// admitted to the metrics port, but /metrics stays off the API's port:
// with METRICS_ADDR unset the service would serve it to every caller of
// the API.
func TestMetricsDisabled(t *testing.T) {
	for _, c := range applicationCharts(t) {
		t.Run(c, func(t *testing.T) {
			out, err := renderChart(c, map[string]any{"metrics": map[string]any{"enabled": false}})
			if err != nil {
				t.Fatal(err)
			}
			var d *appsv1.Deployment
			var policies []*networkingv1.NetworkPolicy
			for _, r := range decodeRendered(t, out) {
				switch o := r.obj.(type) {
				case *appsv1.Deployment:
					d = o
				case *networkingv1.NetworkPolicy:
					policies = append(policies, o)
				}
			}
			if d == nil || len(policies) != 1 {
				t.Fatalf("want a Deployment and a NetworkPolicy, got %v and %d", d != nil, len(policies))
			}
			for k := range d.Spec.Template.Annotations {
				if strings.HasPrefix(k, "prometheus.io/") {
					t.Errorf("annotation %s with metrics disabled", k)
				}
			}
			checkMetricsPort(t, d.Spec.Template.Spec.Containers[0])
			checkNetworkPolicies(t, c, d, policies)
		})
	}
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

func checkLabels(t *testing.T, source string, l map[string]string) {
	t.Helper()
	for _, k := range []string{
		"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
		"app.kubernetes.io/component", "app.kubernetes.io/part-of", "app.kubernetes.io/managed-by", "helm.sh/chart",
	} {
		if l[k] == "" {
			t.Errorf("%s: label %s missing", source, k)
		}
	}
}

func checkDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	ps := d.Spec.Template.Spec
	if a := ps.AutomountServiceAccountToken; a == nil || *a {
		t.Error("pod must set automountServiceAccountToken: false")
	}
	if sc := ps.SecurityContext; sc == nil || !isTrue(sc.RunAsNonRoot) || !isUID(sc.RunAsUser) ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot, runAsUser %d, seccomp RuntimeDefault", sc, nonRootUID)
	}
	// Old pods serve until new ones are Ready, which they are only once
	// migrated (migrations are expand-only: docs/conventions.md).
	if ru := d.Spec.Strategy.RollingUpdate; d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil ||
		ru.MaxUnavailable == nil || ru.MaxUnavailable.String() != "0" {
		t.Errorf("strategy %+v: want a rolling update with maxUnavailable 0", d.Spec.Strategy)
	}
	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v: want prometheus.io scrape and path", ann)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(ps.Containers))
	}
	c := ps.Containers[0]
	if !strings.Contains(c.Image, "@sha256:") {
		i := strings.LastIndex(c.Image, ":")
		if i < 0 || strings.Contains(c.Image[i:], "/") || c.Image[i+1:] == "latest" {
			t.Errorf("image %q: want a pinned tag or digest, never latest", c.Image)
		}
	}
	sc := c.SecurityContext
	if sc == nil || !isTrue(sc.RunAsNonRoot) || !isUID(sc.RunAsUser) || !isTrue(sc.ReadOnlyRootFilesystem) ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %+v: want non-root %d, read-only root, no privilege escalation, drop ALL, RuntimeDefault", sc, nonRootUID)
	}
	for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[res], c.Resources.Limits[res]
		if req.IsZero() || lim.IsZero() || req.Cmp(lim) > 0 {
			t.Errorf("%s: request %s, limit %s: want both, request <= limit", res, req.String(), lim.String())
		}
	}
	ports := containerPorts(c)
	port := ports["http"]
	if port == 0 {
		t.Fatal("container has no port named http")
	}
	checkMetricsPort(t, c)
	if p := ann["prometheus.io/port"]; p != strconv.Itoa(int(ports["metrics"])) {
		t.Errorf("prometheus.io/port %q: Prometheus must scrape the metrics port %d, the only one serving /metrics", p, ports["metrics"])
	}
	probes := []struct {
		name string
		p    *corev1.Probe
		path string
	}{{"startup", c.StartupProbe, "/healthz"}, {"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}}
	for _, pr := range probes {
		if pr.p == nil || pr.p.HTTPGet == nil {
			t.Errorf("%s probe: want an HTTP probe on %s", pr.name, pr.path)
			continue
		}
		if pr.p.HTTPGet.Path != pr.path || pr.p.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe: %s on port %s, want %s on http", pr.name, pr.p.HTTPGet.Path, pr.p.HTTPGet.Port.String(), pr.path)
		}
	}
	// A hung dependency must get /readyz's 503 naming it, not a probe
	// timeout that names nothing.
	if r := c.ReadinessProbe; r != nil && time.Duration(r.TimeoutSeconds)*time.Second <= httpserver.ReadyCheckTimeout {
		t.Errorf("readiness probe timeout %ds is not above /readyz's own check timeout %s", r.TimeoutSeconds, httpserver.ReadyCheckTimeout)
	}
	for _, e := range c.Env {
		if e.Name == "HTTP_ADDR" && e.Value != ":"+strconv.Itoa(int(port)) {
			t.Errorf("HTTP_ADDR %q does not listen on the container port %d", e.Value, port)
		}
	}
	checkShutdownBudget(t, ps, c)
	checkMemoryBudget(t, c)
}

func containerPorts(c corev1.Container) map[string]int32 {
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	return ports
}

// checkMetricsPort: /metrics is served on a port of its own, the one named
// metrics, and never on the API's: a NetworkPolicy admits by port, so
// sharing it would let whoever may scrape call the API. METRICS_ADDR is
// what moves it there; unset, the service serves /metrics on HTTP_ADDR.
func checkMetricsPort(t *testing.T, c corev1.Container) {
	t.Helper()
	ports := containerPorts(c)
	if ports["metrics"] == 0 {
		t.Fatal("container has no port named metrics")
	}
	if ports["metrics"] == ports["http"] {
		t.Errorf("ports metrics and http are both %d: /metrics must not share the API's port", ports["http"])
	}
	addr, set := "", false
	for _, e := range c.Env {
		if e.Name == "METRICS_ADDR" {
			addr, set = e.Value, true
		}
	}
	if want := ":" + strconv.Itoa(int(ports["metrics"])); !set || addr != want {
		t.Errorf("METRICS_ADDR %q (set: %v), want %q: the metrics port, or /metrics is served on the API's", addr, set, want)
	}
}

// checkNetworkPolicies holds who may reach which port. The internal APIs
// have no authentication yet, so no peer admitted to the http port may be
// a whole namespace (every pod in it could call them), and in accounts and
// catalogue none may be Prometheus or its namespace: it scrapes the
// metrics port, which serves nothing but /metrics and so may admit a whole
// namespace, as long as the rule admitting it admits no other port. That
// port is admitted exactly when the pods are scraped.
func checkNetworkPolicies(t *testing.T, chartName string, d *appsv1.Deployment, policies []*networkingv1.NetworkPolicy) {
	t.Helper()
	ports := containerPorts(d.Spec.Template.Spec.Containers[0])
	_, public := publicCharts[chartName]
	internal := !public
	monitoring := labels.Set{"kubernetes.io/metadata.name": "monitoring"}
	prometheus := labels.Set{"app.kubernetes.io/name": "prometheus"}
	scraped := d.Spec.Template.Annotations["prometheus.io/scrape"] == "true"
	for _, np := range policies {
		metricsAdmitted := false
		for i, rule := range np.Spec.Ingress {
			where := fmt.Sprintf("NetworkPolicy %s rule %d", np.Name, i+1)
			if admitsPort(rule, "metrics", ports["metrics"]) {
				metricsAdmitted = true
				if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || rule.Ports[0].Port.String() != "metrics" || rule.Ports[0].EndPort != nil {
					t.Errorf("%s admits the metrics port with %v: want the port metrics alone, so that its peers reach nothing else", where, rule.Ports)
				}
			}
			if !admitsPort(rule, "http", ports["http"]) {
				continue
			}
			if internal && len(rule.From) == 0 {
				t.Errorf("%s admits every source to the http port of an internal API", where)
			}
			for _, peer := range rule.From {
				if peer.NamespaceSelector != nil && (peer.PodSelector == nil || selects(peer.PodSelector, labels.Set{})) {
					t.Errorf("%s admits every pod of namespaces %v to the http port; name the pods too", where, peer.NamespaceSelector.MatchLabels)
				}
				if internal && (selects(peer.NamespaceSelector, monitoring) || selects(peer.PodSelector, prometheus)) {
					t.Errorf("%s admits the monitoring namespace or Prometheus (%+v) to the http port: it scrapes the metrics port, and on http it could call the API", where, peer)
				}
			}
		}
		if internal && len(np.Spec.Ingress) > 0 {
			for _, caller := range callersOf(t, chartName) {
				if !slices.ContainsFunc(np.Spec.Ingress, func(rule networkingv1.NetworkPolicyIngressRule) bool {
					return admitsPort(rule, "http", ports["http"]) && slices.ContainsFunc(rule.From, func(peer networkingv1.NetworkPolicyPeer) bool {
						return peer.NamespaceSelector == nil && selects(peer.PodSelector, labels.Set{"app.kubernetes.io/name": caller})
					})
				}) {
					t.Errorf("NetworkPolicy %s does not admit %s, which calls %s (services.yaml), to the http port", np.Name, caller, chartName)
				}
			}
		}
		if metricsAdmitted != scraped {
			t.Errorf("NetworkPolicy %s: metrics port admitted %v, pods scraped %v: want both or neither", np.Name, metricsAdmitted, scraped)
		}
	}
}

// admitsPort reports whether an ingress rule admits the container port of
// that name and number: a rule without ports, or a port entry without a
// port, admits them all.
func admitsPort(rule networkingv1.NetworkPolicyIngressRule, name string, number int32) bool {
	if len(rule.Ports) == 0 {
		return true
	}
	for _, p := range rule.Ports {
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String && p.Port.StrVal == name:
			return true
		case p.Port.Type == intstr.Int && (p.Port.IntVal == number || p.EndPort != nil && p.Port.IntVal <= number && number <= *p.EndPort):
			return true
		}
	}
	return false
}

// selects reports whether a label selector (nil: none) picks a set of
// labels; an empty selector picks everything.
func selects(sel *metav1.LabelSelector, l labels.Set) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(l)
}

// checkMemoryBudget: the runtime's soft cap (GOMEMLIMIT) must sit under the
// container's memory limit with room for what the runtime does not count
// (the binary, thread stacks outside the heap): at or past the limit the
// kernel kills the pod before the collector is asked to try harder.
func checkMemoryBudget(t *testing.T, c corev1.Container) {
	t.Helper()
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("no memory limit")
	}
	var soft config.MemoryLimit
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" {
			if err := soft.EnvDecode(e.Value); err != nil {
				t.Errorf("GOMEMLIMIT: %v", err)
			}
		}
	}
	if soft <= 0 || int64(soft) > limit.Value()*9/10 {
		t.Errorf("GOMEMLIMIT %d bytes, want set and at most 90%% of the memory limit %s", soft, limit.String())
	}
}

// afterDrain is the most a service spends after its HTTP server drained:
// closing its database pool, then flushing telemetry (shutdownBudget in
// libs/telemetry).
const afterDrain = libpostgres.CloseBudget + 3*time.Second

// checkShutdownBudget: the kubelet runs the preStop sleep, then sends
// SIGTERM, and kills the container terminationGracePeriodSeconds after the
// start of it all. The service drains for up to SHUTDOWN_TIMEOUT, then
// closes its pool and flushes telemetry; all of it must fit, or SIGKILL cuts requests that
// were promised a clean finish. The sleep itself is needed: the services
// close their listener on SIGTERM, so endpoints must be gone by then.
func checkShutdownBudget(t *testing.T, ps corev1.PodSpec, c corev1.Container) {
	t.Helper()
	var sleep time.Duration
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		sleep = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	}
	if sleep <= 0 {
		t.Error("no preStop sleep: SIGTERM would close the listener while endpoints still route to the pod")
	}
	var drain time.Duration
	for _, e := range c.Env {
		if e.Name == "SHUTDOWN_TIMEOUT" {
			var err error
			if drain, err = time.ParseDuration(e.Value); err != nil {
				t.Errorf("SHUTDOWN_TIMEOUT %q: %v", e.Value, err)
			}
		}
	}
	if drain <= 0 {
		t.Error("SHUTDOWN_TIMEOUT is not set to a positive duration")
	}
	if ps.TerminationGracePeriodSeconds == nil {
		t.Fatal("terminationGracePeriodSeconds is not set")
	}
	grace := time.Duration(*ps.TerminationGracePeriodSeconds) * time.Second
	if need := sleep + drain + afterDrain; grace < need {
		t.Errorf("terminationGracePeriodSeconds %s < preStop sleep %s + SHUTDOWN_TIMEOUT %s + closing the pool and flushing telemetry %s",
			grace, sleep, drain, afterDrain)
	}
}

// credentialEnv are the variables that carry passwords: they must come
// from Secrets, never from plain values that land in the Deployment, the
// Helm release and `kubectl describe`. In development the chart brings
// those Secrets itself, and each value is held to the dependency in k8s/
// it must reach.
// secretStandIns stand for the production Secrets of the variables a
// service checks the form of.
var secretStandIns = map[string]string{
	"DATABASE_URL": "postgres://stand-in:stand-in@db.example.com:5432/stand-in",
	"CALLERS":      "operator:" + strings.Repeat("0", 64),
	"REDIS_URL":    "redis://:stand-in@redis.example.com:6379/0",
	// The base64 of 32 bytes, as the webhook service requires.
	"SECRETS_KEY": "c3RhbmQtaW4tZm9yLWEtMzItYnl0ZS1hZXMta2V5ISE=",
}

var credentialEnv = map[string]func(t *testing.T, deps []rendered, value string){
	"DATABASE_URL": checkDevPostgresURL,
	"REDIS_URL":    checkDevRedisURL,
}

func isTrue(b *bool) bool { return b != nil && *b }

func isUID(id *int64) bool { return id != nil && *id == nonRootUID }

// envDiff reports the variables a container sets but the service does not
// read, and those the service reads but the container does not set.
func envDiff(set, read []string) (extra, missing []string) {
	for _, n := range set {
		if !slices.Contains(read, n) {
			extra = append(extra, n)
		}
	}
	for _, n := range read {
		if !slices.Contains(set, n) {
			missing = append(missing, n)
		}
	}
	return extra, missing
}

func checkEnv(t *testing.T, chartName string, dev bool, d *appsv1.Deployment, secrets map[string]*corev1.Secret) {
	t.Helper()
	c := d.Spec.Template.Spec.Containers[0]
	var names []string
	for _, e := range c.Env {
		if slices.Contains(names, e.Name) {
			t.Errorf("env %s is set twice", e.Name)
		}
		names = append(names, e.Name)
		if e.ValueFrom == nil {
			if _, ok := credentialEnv[e.Name]; ok {
				t.Errorf("env %s is a plain value: credentials come from a Secret (secretEnv)", e.Name)
			}
			if u, err := url.Parse(e.Value); err == nil && u.User != nil {
				if _, ok := u.User.Password(); ok {
					t.Errorf("env %s holds a password in a plain value: use secretEnv", e.Name)
				}
			}
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		if ref == nil {
			t.Errorf("env %s: only secretKeyRef is expected in valueFrom", e.Name)
			continue
		}
		if isTrue(ref.Optional) {
			t.Errorf("env %s: an optional Secret hides a missing credential until the first request", e.Name)
		}
		if dev {
			// A local cluster has no secret manager: the dev values must
			// bring every Secret they reference.
			s, ok := secrets[ref.Name]
			if !ok || s.StringData[ref.Key] == "" {
				t.Errorf("dev: env %s references Secret %s key %s, which the chart does not create", e.Name, ref.Name, ref.Key)
			}
		}
	}
	if len(c.EnvFrom) != 0 {
		t.Error("envFrom hides which variables are set; list them in env")
	}
	// Production Secrets live in the cluster's secret manager, out of
	// reach here: a stand-in of the form the service checks (a URL for
	// the connection URLs), or as long as the longest minimum a service
	// sets (AUTH_CACHE_SECRET's 32 bytes), lets the rest of the
	// configuration be parsed and validated. The dev Secrets are rendered with the chart,
	// and their values are what the service gets in a kind cluster.
	values := map[string]string{}
	for _, e := range c.Env {
		values[e.Name] = e.Value
		if ref := e.ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			values[e.Name] = cmp.Or(secretStandIns[e.Name], "stand-in-for-a-value-from-the-secret-manager")
			if s, ok := secrets[ref.SecretKeyRef.Name]; dev && ok {
				values[e.Name] = s.StringData[ref.SecretKeyRef.Key]
			}
		}
	}
	if err := parsers[chartName](func(k string) string { return values[k] }); err != nil {
		t.Errorf("%s would refuse to start with these values: %v", chartName, err)
	}
	if dev {
		deps := devManifests(t)
		for name, check := range credentialEnv {
			if v, ok := values[name]; ok {
				check(t, deps, v)
			}
		}
		if v, ok := values["KAFKA_BROKERS"]; ok {
			checkDevKafkaBrokers(t, deps, v)
		}
	}
	extra, missing := envDiff(names, services[chartName])
	if len(extra)+len(missing) != 0 {
		t.Errorf("env differs from %s's server.Config: set but not read %v, read but not set %v", chartName, extra, missing)
	}
}

// devManifests decodes what k8s/ runs beside the charts in development:
// every object of k8s/*.yaml but kind's cluster config.
func devManifests(t *testing.T) []rendered {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "k8s", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []rendered
	for _, f := range files {
		if filepath.Base(f) == "kind-config.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, decodeAll(t, f, data)...)
	}
	return objs
}

// backend is a container a Service port forwards to, with its pod.
type backend struct {
	pod       corev1.PodSpec
	container corev1.Container
}

// devBackends finds the containers behind host:port in the dev cluster:
// the Service the host names, the port it exposes, and the containers of
// the workloads it selects that listen on its target port. Anything
// missing is an error: the service would fail to connect at start.
func devBackends(t *testing.T, deps []rendered, what, host string, port int) []backend {
	t.Helper()
	// Short names resolve within the namespace, as do the longer forms.
	name := host
	for _, suffix := range []string{".svc.cluster.local", ".svc", ""} {
		if n, ok := strings.CutSuffix(host, "."+namespace+suffix); ok {
			name = n
			break
		}
	}
	var svc *corev1.Service
	for _, r := range deps {
		if s, ok := r.obj.(*corev1.Service); ok && s.Name == name {
			svc = s
		}
	}
	if svc == nil {
		t.Errorf("%s host %s: k8s/ defines no Service %s", what, host, name)
		return nil
	}
	var sp *corev1.ServicePort
	for i, p := range svc.Spec.Ports {
		if int(p.Port) == port {
			sp = &svc.Spec.Ports[i]
		}
	}
	if sp == nil {
		t.Errorf("%s %s:%d: Service %s does not expose port %d", what, host, port, svc.Name, port)
		return nil
	}
	target := sp.TargetPort
	if target.Type == intstr.Int && target.IntVal == 0 {
		target = intstr.FromInt32(sp.Port) // unset: the Service's own port
	}
	var out []backend
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for _, r := range deps {
		var tmpl corev1.PodTemplateSpec
		switch o := r.obj.(type) {
		case *appsv1.Deployment:
			tmpl = o.Spec.Template
		case *appsv1.StatefulSet:
			tmpl = o.Spec.Template
		default:
			continue
		}
		if len(svc.Spec.Selector) == 0 || !sel.Matches(labels.Set(tmpl.Labels)) {
			continue
		}
		for _, c := range tmpl.Spec.Containers {
			for _, cp := range c.Ports {
				if (target.Type == intstr.String && target.StrVal == cp.Name) ||
					(target.Type == intstr.Int && target.IntVal == cp.ContainerPort) {
					out = append(out, backend{pod: tmpl.Spec, container: c})
				}
			}
		}
	}
	if len(out) == 0 {
		t.Errorf("%s %s:%d: no container in k8s/ listens behind Service %s port %d", what, host, port, svc.Name, port)
	}
	return out
}

// containerEnv is the environment a container starts with, Secrets and
// ConfigMaps from k8s/ resolved, as the image's entrypoint reads it.
func containerEnv(deps []rendered, c corev1.Container) map[string]string {
	secrets, configMaps := map[string]map[string]string{}, map[string]map[string]string{}
	for _, r := range deps {
		switch o := r.obj.(type) {
		case *corev1.Secret:
			data := maps.Clone(o.StringData)
			if data == nil {
				data = map[string]string{}
			}
			for k, v := range o.Data {
				data[k] = string(v)
			}
			secrets[o.Name] = data
		case *corev1.ConfigMap:
			configMaps[o.Name] = o.Data
		}
	}
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		switch {
		case from.SecretRef != nil:
			for k, v := range secrets[from.SecretRef.Name] {
				env[from.Prefix+k] = v
			}
		case from.ConfigMapRef != nil:
			for k, v := range configMaps[from.ConfigMapRef.Name] {
				env[from.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = secrets[e.ValueFrom.SecretKeyRef.Name][e.ValueFrom.SecretKeyRef.Key]
		case e.ValueFrom.ConfigMapKeyRef != nil:
			env[e.Name] = configMaps[e.ValueFrom.ConfigMapKeyRef.Name][e.ValueFrom.ConfigMapKeyRef.Key]
		}
	}
	return env
}

// postgresInitDir is where the postgres image looks for scripts to run
// when it initialises an empty data directory.
const postgresInitDir = "/docker-entrypoint-initdb.d"

// createDatabase finds the databases an init script creates. Unquoted
// names fold to lower case, as Postgres folds them; a statement in a
// comment creates nothing.
var (
	createDatabase = regexp.MustCompile(`(?i)\bCREATE\s+DATABASE\s+("[^"]+"|[\w$]+)`)
	sqlComment     = regexp.MustCompile(`--[^\n]*`)
)

// initDatabases lists the databases the init scripts mounted into a
// postgres container create (ConfigMaps mounted at postgresInitDir).
func initDatabases(deps []rendered, b backend) []string {
	var volume string
	for _, m := range b.container.VolumeMounts {
		if strings.TrimSuffix(m.MountPath, "/") == postgresInitDir {
			volume = m.Name
		}
	}
	var configMap string
	for _, v := range b.pod.Volumes {
		if v.Name == volume && v.ConfigMap != nil {
			configMap = v.ConfigMap.Name
		}
	}
	var dbs []string
	for _, r := range deps {
		cm, ok := r.obj.(*corev1.ConfigMap)
		if !ok || configMap == "" || cm.Name != configMap {
			continue
		}
		for key, script := range cm.Data {
			// The entrypoint runs *.sql files; *.sh ones could create
			// databases too, but not in a way read here.
			if !strings.HasSuffix(key, ".sql") {
				continue
			}
			for _, m := range createDatabase.FindAllStringSubmatch(sqlComment.ReplaceAllString(script, ""), -1) {
				if name, ok := strings.CutPrefix(m[1], `"`); ok {
					dbs = append(dbs, strings.TrimSuffix(name, `"`))
				} else {
					dbs = append(dbs, strings.ToLower(m[1]))
				}
			}
		}
	}
	return dbs
}

// checkDevPostgresURL holds a dev DATABASE_URL to the Postgres of k8s/.
// It is parsed as libpostgres.Open parses it at start (pgxpool.ParseConfig,
// over pgx's and pgconn's), so a value the service would refuse fails here;
// then every host it names must be a Service of k8s/ in front of a postgres
// container whose credentials it carries, and whose init scripts create
// its database: the services do not create their databases (Open's create
// is false), and a fresh cluster has none other.
func checkDevPostgresURL(t *testing.T, deps []rendered, databaseURL string) {
	t.Helper()
	// pgconn fills what a URL leaves out from PG* variables and ~/.pgpass.
	// The pod has neither (its environment is exactly server.Config's), so
	// the parse here must not borrow the test runner's.
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "PG") {
			t.Setenv(k, "")
		}
	}
	t.Setenv("PGPASSFILE", os.DevNull)
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		t.Errorf("dev DATABASE_URL: the service would refuse it at start: %v", err)
		return
	}
	cc := cfg.ConnConfig
	type hostPort struct {
		host string
		port uint16
	}
	hosts := []hostPort{{cc.Host, cc.Port}}
	for _, fb := range cc.Fallbacks {
		if hp := (hostPort{fb.Host, fb.Port}); !slices.Contains(hosts, hp) {
			hosts = append(hosts, hp)
		}
	}
	for _, hp := range hosts {
		for _, b := range devBackends(t, deps, "dev DATABASE_URL", hp.host, int(hp.port)) {
			env := containerEnv(deps, b.container)
			user := env["POSTGRES_USER"]
			if user == "" {
				user = "postgres" // the image's default superuser
			}
			if cc.User != user {
				t.Errorf("dev DATABASE_URL for %s: user %q, the postgres container %s has POSTGRES_USER %q",
					hp.host, cc.User, b.container.Name, user)
			}
			// A dev password, but still not echoed: a failure log is no
			// place for one.
			if cc.Password != env["POSTGRES_PASSWORD"] {
				t.Errorf("dev DATABASE_URL for %s: the password is not POSTGRES_PASSWORD of the postgres container %s",
					hp.host, b.container.Name)
			}
			if dbs := initDatabases(deps, b); !slices.Contains(dbs, cc.Database) {
				t.Errorf("dev DATABASE_URL for %s: database %q is not created by the init scripts of container %s (they create %v)",
					hp.host, cc.Database, b.container.Name, dbs)
			}
		}
	}
}

// checkDevRedisURL holds a dev REDIS_URL to the Redis of k8s/: parsed as the
// gateway's redis.Connect parses it, its address must be a Service of k8s/
// in front of a container.
func checkDevRedisURL(t *testing.T, deps []rendered, redisURL string) {
	t.Helper()
	opts, err := redisurl.Parse(redisURL)
	if err != nil {
		t.Errorf("dev REDIS_URL: the gateway would refuse it at start: %v", err)
		return
	}
	host, port, err := net.SplitHostPort(opts.Addr)
	n, perr := strconv.Atoi(port)
	if opts.Network != "tcp" || err != nil || perr != nil {
		t.Errorf("dev REDIS_URL: %s address %q is not a Service's host:port", opts.Network, opts.Addr)
		return
	}
	devBackends(t, deps, "dev REDIS_URL", host, n)
}

// checkDevKafkaBrokers holds a dev KAFKA_BROKERS to the Kafka of k8s/:
// each host:port must be a Service of k8s/ in front of a container.
func checkDevKafkaBrokers(t *testing.T, deps []rendered, brokers string) {
	t.Helper()
	for _, b := range strings.Split(brokers, ",") {
		host, port, err := net.SplitHostPort(b)
		n, perr := strconv.Atoi(port)
		if err != nil || perr != nil {
			t.Errorf("dev KAFKA_BROKERS: %q is not a Service's host:port", b)
			continue
		}
		devBackends(t, deps, "dev KAFKA_BROKERS", host, n)
	}
}

// TestServiceURLsResolve checks that every in-cluster URL a chart passes to
// its service (ACCOUNTS_URL=http://accounts, ...) names a Service another
// chart renders, on a port that Service exposes.
func TestServiceURLsResolve(t *testing.T) {
	for _, vf := range valuesFiles {
		t.Run(vf, func(t *testing.T) {
			ports := map[string][]int32{}
			var deployments []*appsv1.Deployment
			for _, c := range applicationCharts(t) {
				for _, r := range renderObjects(t, c, vf) {
					switch o := r.obj.(type) {
					case *corev1.Service:
						for _, p := range o.Spec.Ports {
							ports[o.Name] = append(ports[o.Name], p.Port)
						}
					case *appsv1.Deployment:
						deployments = append(deployments, o)
					}
				}
			}
			checked := 0
			for _, d := range deployments {
				for _, e := range d.Spec.Template.Spec.Containers[0].Env {
					u, err := url.Parse(e.Value)
					if err != nil || (u.Scheme != "http" && u.Scheme != "https") || strings.Contains(u.Hostname(), ".") {
						continue
					}
					port := int32(80)
					if u.Scheme == "https" {
						port = 443
					}
					if _, p, err := net.SplitHostPort(u.Host); err == nil {
						n, _ := strconv.Atoi(p)
						port = int32(n)
					}
					checked++
					if !slices.Contains(ports[u.Hostname()], port) {
						t.Errorf("%s %s=%s: no chart renders Service %s with port %d", d.Name, e.Name, e.Value, u.Hostname(), port)
					}
				}
			}
			if checked == 0 {
				t.Error("no in-cluster service URL found: the gateway should have some")
			}
		})
	}
}

// TestChartsDeclareKubeVersion: a cluster too old for the templates must
// fail the install with a clear message rather than accept a Deployment
// whose preStop sleep it drops or rejects.
func TestChartsDeclareKubeVersion(t *testing.T) {
	tooOld := chartutil.KubeVersion{Version: "v1.29.0", Major: "1", Minor: "29"}
	for _, c := range applicationCharts(t) {
		chrt, err := loader.Load(c)
		if err != nil {
			t.Fatal(err)
		}
		if chrt.Metadata.KubeVersion == "" {
			t.Errorf("%s: Chart.yaml has no kubeVersion", c)
			continue
		}
		if _, err := renderFor(chrt, map[string]any{}, minKubeVersion); err != nil {
			t.Errorf("%s on Kubernetes %s: %v", c, minKubeVersion.String(), err)
		}
		if _, err := renderFor(chrt, map[string]any{}, tooOld); err == nil {
			t.Errorf("%s: kubeVersion %q admits Kubernetes %s, which has no preStop sleep by default", c, chrt.Metadata.KubeVersion, tooOld.String())
		}
	}
}

func TestChartRefusesLatestTag(t *testing.T) {
	vals := map[string]any{"image": map[string]any{"tag": "latest"}}
	if _, err := renderChart("accounts", vals); err == nil || !strings.Contains(err.Error(), "latest") {
		t.Fatalf("want the chart to refuse image.tag latest, got %v", err)
	}
}

func TestImageDefaultsToAppVersionAndPrefersDigest(t *testing.T) {
	chrt, err := loader.Load("accounts")
	if err != nil {
		t.Fatal(err)
	}
	image := func(vals map[string]any) string {
		t.Helper()
		out, err := renderChart("accounts", vals)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decodeStrict([]byte(out["accounts/templates/deployment.yaml"]))
		if err != nil {
			t.Fatal(err)
		}
		return obj.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image
	}
	if got, want := image(map[string]any{}), "ghcr.io/esimplatform/accounts:"+chrt.Metadata.AppVersion; got != want {
		t.Errorf("image %q, want %q", got, want)
	}
	digest := "sha256:" + strings.Repeat("ab", 32)
	if got := image(map[string]any{"image": map[string]any{"digest": digest}}); got != "ghcr.io/esimplatform/accounts@"+digest {
		t.Errorf("image %q, want the digest", got)
	}
}

// The strict decoder is what makes the render tests meaningful: prove it
// rejects what a lenient decoder would silently drop.
func TestStrictDecodeRejectsMistakes(t *testing.T) {
	valid := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  selector:
    matchLabels: {app: x}
  template:
    metadata:
      labels: {app: x}
    spec:
      containers:
        - name: x
          image: x:1
          imagePullPolicy: IfNotPresent
          securityContext:
            readOnlyRootFilesystem: true
`
	if _, err := decodeStrict([]byte(valid)); err != nil {
		t.Fatalf("valid Deployment rejected: %v", err)
	}
	cases := map[string]string{
		"misspelt field":      strings.Replace(valid, "imagePullPolicy:", "imagePullPolcy:", 1),
		"misplaced field":     strings.Replace(valid, "  selector:", "  replica: 2\n  selector:", 1),
		"wrong type":          strings.Replace(valid, "image: x:1", "image: [x]", 1),
		"duplicate key":       strings.Replace(valid, "  name: x\n", "  name: x\n  name: z\n", 1),
		"unknown kind":        strings.Replace(valid, "kind: Deployment", "kind: Deploymnet", 1),
		"unknown api version": strings.Replace(valid, "apps/v1", "apps/v1beta9", 1),
		"no kind":             strings.Replace(valid, "kind: Deployment\n", "", 1),
		// A lenient decoder sets ReadOnlyRootFilesystem from this; the API
		// server, case-sensitive, drops it and the root stays writable.
		"field in the wrong case": strings.Replace(valid, "readOnlyRootFilesystem:", "readOnlyRootFileSystem:", 1),
	}
	for name, doc := range cases {
		if _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestEnvDiffReportsBothSides(t *testing.T) {
	extra, missing := envDiff([]string{"HTTP_ADDR", "TYPO_URL"}, []string{"DATABASE_URL", "HTTP_ADDR"})
	if !slices.Equal(extra, []string{"TYPO_URL"}) || !slices.Equal(missing, []string{"DATABASE_URL"}) {
		t.Fatalf("extra %v, missing %v", extra, missing)
	}
}

// TestDevManifestsDecodeStrictly checks everything under k8s/: the kind
// cluster config against kind's own types, every other document against the
// Kubernetes API types, all namespaced objects in the esim namespace.
func TestDevManifestsDecodeStrictly(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "k8s", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no manifests under k8s/")
	}
	kinds := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "kind-config.yaml" {
			var cluster kindv1alpha4.Cluster
			if err := yaml.UnmarshalStrict(data, &cluster); err != nil {
				t.Errorf("%s: %v", f, err)
			}
			if cluster.Kind != "Cluster" || cluster.APIVersion != "kind.x-k8s.io/v1alpha4" || len(cluster.Nodes) == 0 ||
				len(cluster.Nodes[0].ExtraPortMappings) == 0 {
				t.Errorf("%s: want a kind v1alpha4 Cluster with a port mapping for the gateway", f)
			}
			checkNodePortsMapped(t, cluster)
			continue
		}
		for _, r := range decodeAll(t, f, data) {
			m, err := metaOf(r.obj)
			if err != nil {
				t.Fatal(err)
			}
			kind := r.obj.GetObjectKind().GroupVersionKind().Kind
			if kind == "" {
				kind = fmt.Sprintf("%T", r.obj)
			}
			kinds[kind] = true
			switch o := r.obj.(type) {
			case *corev1.Namespace:
				continue
			case *appsv1.Deployment:
				checkDevWorkload(t, f+" "+o.Name, o.Spec.Template.Spec)
			case *appsv1.StatefulSet:
				checkDevWorkload(t, f+" "+o.Name, o.Spec.Template.Spec)
			}
			if m.GetNamespace() != namespace {
				t.Errorf("%s: %s %s is in namespace %q, want %q", f, kind, m.GetName(), m.GetNamespace(), namespace)
			}
		}
	}
	t.Logf("kinds: %v", kinds)
}

// checkDevWorkload holds the dependencies' containers to what keeps a dev
// cluster reproducible and its start ordered: images pinned to a version
// (a moving tag changes the cluster under everyone), a readiness probe (Tilt
// starts the services once their dependencies are ready) and memory bounds.
func checkDevWorkload(t *testing.T, source string, ps corev1.PodSpec) {
	t.Helper()
	for _, c := range ps.Containers {
		ref := c.Image
		if at := strings.Index(ref, "@"); at >= 0 {
			ref = ref[:at]
		}
		colon := strings.LastIndex(ref, ":")
		if !strings.Contains(c.Image, "@sha256:") &&
			(colon < 0 || strings.Contains(ref[colon:], "/") || ref[colon+1:] == "latest" || !strings.ContainsAny(ref[colon+1:], "0123456789")) {
			t.Errorf("%s: image %q is not pinned to a version", source, c.Image)
		}
		if c.ReadinessProbe == nil {
			t.Errorf("%s: container %s has no readiness probe", source, c.Name)
		}
		if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: container %s needs a memory request and limit", source, c.Name)
		}
	}
}

// kindCluster reads k8s/kind-config.yaml, the dev cluster's config.
func kindCluster(t *testing.T) kindv1alpha4.Cluster {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "k8s", "kind-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cluster kindv1alpha4.Cluster
	if err := yaml.UnmarshalStrict(data, &cluster); err != nil {
		t.Fatalf("kind-config.yaml: %v", err)
	}
	return cluster
}

// kindMappings are the cluster's port mappings by the node port they
// reach.
func kindMappings(cluster kindv1alpha4.Cluster) map[int32]kindv1alpha4.PortMapping {
	mapped := map[int32]kindv1alpha4.PortMapping{}
	for _, n := range cluster.Nodes {
		for _, m := range n.ExtraPortMappings {
			mapped[m.ContainerPort] = m
		}
	}
	return mapped
}

// devNodePorts are a chart's dev Service's node ports by port name, nil
// when the Service is no NodePort.
func devNodePorts(t *testing.T, chartName string) map[string]int32 {
	t.Helper()
	for _, r := range renderObjects(t, chartName, "values-dev.yaml") {
		svc, ok := r.obj.(*corev1.Service)
		if !ok || svc.Spec.Type != corev1.ServiceTypeNodePort {
			continue
		}
		ports := map[string]int32{}
		for _, p := range svc.Spec.Ports {
			ports[p.Name] = p.NodePort
		}
		return ports
	}
	return nil
}

// checkNodePortsMapped proves the kind port mappings reach every dev
// NodePort, so the files cannot drift apart: a node port kind does not map
// (or one the cluster picks at random) is reachable from nowhere. The
// gateway's dev Service must be one: it is the API's way in without Tilt,
// and the API the portal's dev pages point at.
func checkNodePortsMapped(t *testing.T, cluster kindv1alpha4.Cluster) {
	t.Helper()
	mapped := kindMappings(cluster)
	for _, c := range applicationCharts(t) {
		ports := devNodePorts(t, c)
		if ports == nil && c == "gateway" {
			t.Error("the gateway's dev Service is no NodePort: kind-config.yaml maps the API's")
		}
		for name, p := range ports {
			if _, ok := mapped[p]; p == 0 || !ok {
				t.Errorf("%s dev Service port %s: nodePort %d is not mapped by kind-config.yaml", c, name, p)
			}
		}
	}
}

// gatewayOnKind is the partner API's base as kind exposes it to the
// developer's machine: the host and port kind-config.yaml maps to the
// gateway's dev node port, and /v1, the path of the API (publicCharts).
// A mapping on loopback (or every address) is reachable as localhost too.
func gatewayOnKind(t *testing.T) []string {
	t.Helper()
	nodePort := devNodePorts(t, "gateway")["http"]
	m, ok := kindMappings(kindCluster(t))[nodePort]
	if nodePort == 0 || !ok || m.HostPort == 0 {
		t.Fatalf("kind-config.yaml maps no host port to the gateway's dev node port %d", nodePort)
	}
	hosts := []string{m.ListenAddress}
	if ip := net.ParseIP(m.ListenAddress); m.ListenAddress == "" || ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	var urls []string
	for _, h := range hosts {
		urls = append(urls, "http://"+net.JoinHostPort(h, strconv.Itoa(int(m.HostPort)))+"/v1")
	}
	return urls
}

// TestPortal holds the portal's settings that its own parse accepts
// either way: its session cookie Secure in production, where the Ingress
// serves it over https, and the partner API its pages show (the curl
// examples, the QR images) being the gateway's public https one there, and
// in development the gateway as kind exposes it.
func TestPortal(t *testing.T) {
	d, _ := deploymentOf(t, renderObjects(t, "portal", "values.yaml"))
	env := envOf(d.Spec.Template.Spec.Containers[0])
	if env["SECURE_COOKIES"] != "true" {
		t.Errorf("SECURE_COOKIES %q in production, want \"true\": without it the session cookie may go out over plain http", env["SECURE_COOKIES"])
	}
	if u, err := url.Parse(env["PUBLIC_API_URL"]); err != nil || u.Scheme != "https" || u.Path != "/v1" {
		t.Errorf("PUBLIC_API_URL %q in production, want the API's https://.../v1: partners send their keys there", env["PUBLIC_API_URL"])
	}

	dev, _ := deploymentOf(t, renderObjects(t, "portal", "values-dev.yaml"))
	got := envOf(dev.Spec.Template.Spec.Containers[0])["PUBLIC_API_URL"]
	if want := gatewayOnKind(t); !slices.Contains(want, got) {
		t.Errorf("dev PUBLIC_API_URL %q, want the gateway as kind exposes it (k8s/kind-config.yaml, charts/gateway/values-dev.yaml): one of %v", got, want)
	}
}

// TestDevCallersAcceptTokens: in the dev cluster each service's
// INTERNAL_TOKEN (from its dev Secret) must be accepted by every service
// it calls (services.yaml), its SHA-256 among their dev CALLERS under its
// name (libs/internalauth), or every call it makes there is refused.
func TestDevCallersAcceptTokens(t *testing.T) {
	devEnv := func(name string) map[string]string {
		objs := renderObjects(t, name, "values-dev.yaml")
		d, _ := deploymentOf(t, objs)
		return containerEnv(objs, d.Spec.Template.Spec.Containers[0])
	}
	checked := 0
	for _, s := range declared(t) {
		if len(s.Calls) == 0 {
			continue
		}
		token := devEnv(s.Name)["INTERNAL_TOKEN"]
		if token == "" {
			t.Errorf("%s calls %v but its dev values give it no INTERNAL_TOKEN", s.Name, s.Calls)
			continue
		}
		sum := sha256.Sum256([]byte(token))
		entry := s.Name + ":" + hex.EncodeToString(sum[:])
		for _, callee := range s.Calls {
			checked++
			if callers := strings.Split(devEnv(callee)["CALLERS"], ","); !slices.Contains(callers, entry) {
				t.Errorf("%s's dev CALLERS do not accept %s's dev token: want %s among them", callee, s.Name, entry)
			}
		}
	}
	if checked == 0 {
		t.Error("no service calls another in services.yaml: nothing checked")
	}
}

// TestDevKafkaKRaft checks the single-node Kafka's settings against each
// other, as the apache/kafka image reads them: KAFKA_* variables become the
// whole broker configuration (server.properties is not used once any is
// set), so a missing or inconsistent one is a broker that never starts or
// a consumer group that never forms.
func TestDevKafkaKRaft(t *testing.T) {
	path := filepath.Join("..", "k8s", "kafka.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		sts *appsv1.StatefulSet
		svc *corev1.Service
	)
	for _, r := range decodeAll(t, path, data) {
		switch o := r.obj.(type) {
		case *appsv1.StatefulSet:
			sts = o
		case *corev1.Service:
			svc = o
		}
	}
	if sts == nil || svc == nil || len(sts.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%s: want one StatefulSet with one container and one Service", path)
	}
	ps := sts.Spec.Template.Spec
	c := ps.Containers[0]
	if !strings.HasPrefix(c.Image, "apache/kafka:") {
		t.Errorf("image %q: the variables below are those of apache/kafka", c.Image)
	}
	// Service links would add KAFKA_PORT, KAFKA_SERVICE_HOST, ...: the image
	// turns them into broker properties.
	if ps.EnableServiceLinks == nil || *ps.EnableServiceLinks {
		t.Error("enableServiceLinks must be false")
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if id, err := base64.RawURLEncoding.DecodeString(env["CLUSTER_ID"]); err != nil || len(id) != 16 {
		t.Errorf("CLUSTER_ID %q: want a base64url UUID (16 bytes), as kafka-storage format needs (%v)", env["CLUSTER_ID"], err)
	}
	roles := strings.Split(env["KAFKA_PROCESS_ROLES"], ",")
	if !slices.Contains(roles, "broker") || !slices.Contains(roles, "controller") {
		t.Errorf("KAFKA_PROCESS_ROLES %q: one node must be broker and controller", env["KAFKA_PROCESS_ROLES"])
	}
	if env["KAFKA_ZOOKEEPER_CONNECT"] != "" {
		t.Error("KAFKA_ZOOKEEPER_CONNECT set: KRaft mode has no ZooKeeper")
	}
	listeners := parseListeners(t, "KAFKA_LISTENERS", env["KAFKA_LISTENERS"])
	advertised := parseListeners(t, "KAFKA_ADVERTISED_LISTENERS", env["KAFKA_ADVERTISED_LISTENERS"])
	protocols := map[string]bool{}
	for _, kv := range strings.Split(env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"], ",") {
		name, _, _ := strings.Cut(kv, ":")
		protocols[name] = true
	}
	for name := range listeners {
		if !protocols[name] {
			t.Errorf("listener %s has no entry in KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", name)
		}
	}
	controller := env["KAFKA_CONTROLLER_LISTENER_NAMES"]
	if _, ok := listeners[controller]; !ok || controller == "" {
		t.Errorf("KAFKA_CONTROLLER_LISTENER_NAMES %q is not among KAFKA_LISTENERS", controller)
	}
	if _, ok := advertised[controller]; ok {
		t.Error("the controller listener must not be advertised to clients")
	}
	// controller.quorum.voters: this node, on its controller listener.
	id, hostPort, _ := strings.Cut(env["KAFKA_CONTROLLER_QUORUM_VOTERS"], "@")
	if _, port, err := net.SplitHostPort(hostPort); err != nil || id != env["KAFKA_NODE_ID"] || port != listeners[controller] {
		t.Errorf("KAFKA_CONTROLLER_QUORUM_VOTERS %q: want %s@...:%s (node id, controller port)",
			env["KAFKA_CONTROLLER_QUORUM_VOTERS"], env["KAFKA_NODE_ID"], listeners[controller])
	}
	// Clients reach what the broker advertises: the Service, on a port that
	// forwards to the listener.
	if len(advertised) == 0 {
		t.Error("KAFKA_ADVERTISED_LISTENERS is empty")
	}
	for name, hp := range advertised {
		host, port, _ := strings.Cut(hp, ":")
		if host != svc.Name {
			t.Errorf("advertised listener %s host %q, want the Service %q", name, host, svc.Name)
		}
		if listeners[name] == "" {
			t.Errorf("advertised listener %s is not among KAFKA_LISTENERS", name)
		}
		found := false
		for _, sp := range svc.Spec.Ports {
			for _, cp := range c.Ports {
				if strconv.Itoa(int(sp.Port)) == port && sp.TargetPort.String() == cp.Name && strconv.Itoa(int(cp.ContainerPort)) == listeners[name] {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("advertised %s=%s: no Service port %s forwards to the listener's port %s", name, hp, port, listeners[name])
		}
	}
	// Internal topics default to replication factor 3: on one broker the
	// consumer offsets topic could never be created.
	for _, k := range []string{"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"} {
		if env[k] != "1" {
			t.Errorf("%s %q, want 1 on a single broker", k, env[k])
		}
	}
	if c.ReadinessProbe == nil {
		t.Error("no readiness probe")
	}
}

// parseListeners reads "NAME://host:port,..." into name -> port, or for
// advertised listeners name -> host:port.
func parseListeners(t *testing.T, key, v string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(v, ",") {
		name, hp, ok := strings.Cut(l, "://")
		host, port, err := net.SplitHostPort(hp)
		if !ok || err != nil {
			t.Errorf("%s: %q is not NAME://host:port", key, l)
			continue
		}
		if key == "KAFKA_ADVERTISED_LISTENERS" {
			out[name] = host + ":" + port
		} else {
			out[name] = port
		}
	}
	return out
}

// tiltServices reads the SERVICES dict of the Tiltfile: service name -> the
// resources it waits for.
// tiltServices is the Tiltfile's SERVICES: each service of services.yaml
// with the resources it waits for, as the Tiltfile's resource_deps makes
// them (Postgres, Redis, Kafka, the services it calls).
func tiltServices(t *testing.T, tiltfile string) map[string][]string {
	t.Helper()
	if !strings.Contains(tiltfile, "read_yaml('services.yaml')") {
		t.Fatal("Tiltfile: SERVICES is not read from services.yaml")
	}
	out := map[string][]string{}
	// The charts whose dev values make a Secret of certificates
	// (devCerts), by its name.
	owners := map[string]string{}
	secretFiles := map[string][]string{}
	for _, s := range declared(t) {
		vals, err := chartutil.ReadValuesFile(filepath.Join(s.Name, "values-dev.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if create, _ := vals.PathValue("devCerts.create"); create == true {
			name, _ := vals.PathValue("devCerts.name")
			owners[fmt.Sprint(name)] = s.Name
		}
		files, _ := vals["secretFiles"].([]any)
		for _, f := range files {
			if m, ok := f.(map[string]any); ok {
				secretFiles[s.Name] = append(secretFiles[s.Name], fmt.Sprint(m["secretName"]))
			}
		}
	}
	for _, s := range declared(t) {
		deps := []string{}
		if s.Database {
			deps = append(deps, "postgres")
		}
		if s.Redis {
			deps = append(deps, "redis")
		}
		if s.Kafka {
			deps = append(deps, "kafka")
		}
		deps = append(deps, s.Calls...)
		// A pod mounting another chart's Secret cannot start before it.
		for _, secret := range secretFiles[s.Name] {
			if owner, ok := owners[secret]; ok && owner != s.Name && !slices.Contains(deps, owner) {
				deps = append(deps, owner)
			}
		}
		out[s.Name] = deps
	}
	return out
}

// tiltConstants reads the Tiltfile's top-level string constants
// (NAMESPACE = 'esim').
func tiltConstants(tiltfile string) map[string]string {
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*) = '([^']*)'$`).FindAllStringSubmatch(tiltfile, -1) {
		vars[m[1]] = m[2]
	}
	return vars
}

var tiltFormat = regexp.MustCompile(`^'([^']*)'\s*%\s*\((.*)\)$`)

// tiltString evaluates a Starlark string expression of the forms the
// Tiltfile writes: 'format' % (args) with %s verbs, or quoted literals and
// names bound in vars joined by +. Anything else is an error rather than a
// guess at what Tilt would compute.
func tiltString(expr string, vars map[string]string) (string, error) {
	expr = strings.TrimSpace(expr)
	if m := tiltFormat.FindStringSubmatch(expr); m != nil {
		args := strings.Split(strings.TrimSuffix(strings.TrimSpace(m[2]), ","), ",")
		if strings.Count(m[1], "%s") != len(args) || strings.Count(m[1], "%") != len(args) {
			return "", fmt.Errorf("%s: want one %%s per argument", expr)
		}
		out := m[1]
		for _, a := range args {
			v, err := tiltString(a, vars)
			if err != nil {
				return "", err
			}
			out = strings.Replace(out, "%s", v, 1)
		}
		return out, nil
	}
	var out strings.Builder
	for _, term := range strings.Split(expr, "+") {
		term = strings.TrimSpace(term)
		if len(term) >= 2 && (term[0] == '\'' || term[0] == '"') && term[len(term)-1] == term[0] {
			out.WriteString(term[1 : len(term)-1])
		} else if v, ok := vars[term]; ok {
			out.WriteString(v)
		} else {
			return "", fmt.Errorf("cannot evaluate %q in %q", term, expr)
		}
	}
	return out.String(), nil
}

// tiltSelects reports whether an objects entry of k8s_resource, Tilt's
// name:kind[:namespace] matched without regard to case, picks obj.
func tiltSelects(selector string, obj runtime.Object) bool {
	parts := strings.Split(selector, ":")
	m, err := metaOf(obj)
	kinds, _, kerr := scheme.Scheme.ObjectKinds(obj)
	if err != nil || kerr != nil || len(parts) < 2 || len(parts) > 3 {
		return false
	}
	return strings.EqualFold(parts[0], m.GetName()) && strings.EqualFold(parts[1], kinds[0].Kind) &&
		(len(parts) == 2 || strings.EqualFold(parts[2], m.GetNamespace()))
}

// TestTiltfile checks what the Tiltfile takes on trust, without a cluster
// (TestTiltCI runs it with tilt ci, but names no culprit, and forwards no
// port on its cluster): its service list is the chart list, every service has a main
// package to build and a dev image name Tilt can substitute, every
// dependency names a resource that exists, every object it groups into a
// resource is one that k8s/ or the service's chart defines, the public
// charts are forwarded (from their `make run` ports) to their container
// ports, and the k8s/ files it applies exist.
// Tilt would refuse each of these mistakes only at `tilt up`.
func TestTiltfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "Tiltfile"))
	if err != nil {
		t.Fatal(err)
	}
	tiltfile := string(data)
	svcs := tiltServices(t, tiltfile)
	names := slices.Sorted(maps.Keys(svcs))
	if charts := applicationCharts(t); !slices.Equal(names, charts) {
		t.Fatalf("Tiltfile SERVICES %v, charts %v", names, charts)
	}

	files, _ := filepath.Glob(filepath.Join("..", "k8s", "*.yaml"))
	for _, f := range files {
		if filepath.Base(f) != "kind-config.yaml" && !strings.Contains(tiltfile, "'k8s/"+filepath.Base(f)+"'") {
			t.Errorf("Tiltfile does not apply %s", f)
		}
	}
	for _, m := range regexp.MustCompile(`['"](k8s/[^'"]*)['"]`).FindAllStringSubmatch(tiltfile, -1) {
		if _, err := os.Stat(filepath.Join("..", m[1])); err != nil {
			t.Errorf("Tiltfile names %s: %v", m[1], err)
		}
	}

	// Resources a service may wait for: the workloads of k8s/ and the
	// other services.
	deps := devManifests(t)
	resources := map[string]bool{"namespace": true}
	for _, r := range deps {
		switch o := r.obj.(type) {
		case *appsv1.Deployment:
			resources[o.Name] = true
		case *appsv1.StatefulSet:
			resources[o.Name] = true
		}
	}
	for _, n := range names {
		resources[n] = true
	}

	checkTiltObjects(t, tiltfile, names, deps)

	// The build path is computed per service; ko builds the main package
	// found there, and an unknown path fails only when Tilt runs the build.
	build := regexp.MustCompile(`(?s)custom_build\(.*?command=\[\s*'tilt/ko-build.sh',\s*(.*?)\],`).FindStringSubmatch(tiltfile)
	if build == nil {
		t.Fatal("Tiltfile: no custom_build running tilt/ko-build.sh PATH")
	}

	for _, n := range names {
		for _, d := range svcs[n] {
			if !resources[d] || d == n {
				t.Errorf("Tiltfile: %s waits for %q, which is no resource", n, d)
			}
		}
		dir, err := tiltString(build[1], map[string]string{"name": n})
		if err != nil {
			t.Fatalf("Tiltfile custom_build path: %v", err)
		}
		if st, err := os.Stat(filepath.Join("..", dir)); err != nil || !st.IsDir() {
			t.Errorf("Tiltfile builds %s for %s, which is no directory (%v)", dir, n, err)
		} else if st, err := os.Stat(filepath.Join("..", dir, "main.go")); err != nil || st.IsDir() {
			t.Errorf("Tiltfile builds %s for %s, which holds no main.go (%v)", dir, n, err)
		}
		vals, err := chartutil.ReadValuesFile(filepath.Join(n, "values-dev.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if repo, _ := vals.PathValue("image.repository"); repo != "esim/"+n {
			t.Errorf("%s/values-dev.yaml image.repository %v: Tilt builds and substitutes esim/%s", n, repo, n)
		}
	}

	checkTiltForwards(t, tiltfile)

	for _, script := range []string{"ko-build.sh", "helm.sh"} {
		st, err := os.Stat(filepath.Join("..", "tilt", script))
		if err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("tilt/%s must exist and be executable (%v)", script, err)
		} else if !strings.Contains(tiltfile, "'tilt/"+script+"'") {
			t.Errorf("Tiltfile does not run tilt/%s", script)
		}
	}
}

// checkTiltForwards reads the Tiltfile's PORT_FORWARDS: each public chart
// is forwarded, and every forward goes from the service's `make run` port
// (services.yaml), so URLs are the same under both, to the port its dev
// pods serve HTTP on.
func checkTiltForwards(t *testing.T, tiltfile string) {
	t.Helper()
	dict := regexp.MustCompile(`(?s)\nPORT_FORWARDS = \{\n(.*?)\n\}`).FindStringSubmatch(tiltfile)
	if dict == nil {
		t.Fatal("Tiltfile: no PORT_FORWARDS = {...}")
	}
	entry := regexp.MustCompile(`^\s*'([a-z0-9-]+)':\s*\['(\d+):(\d+)'\],?$`)
	forwarded := map[string][2]string{}
	for _, line := range strings.Split(dict[1], "\n") {
		m := entry.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("Tiltfile PORT_FORWARDS: %q is not 'name': ['local:remote'],", line)
			continue
		}
		forwarded[m[1]] = [2]string{m[2], m[3]}
	}
	for _, c := range slices.Sorted(maps.Keys(publicCharts)) {
		if _, ok := forwarded[c]; !ok {
			t.Errorf("Tiltfile: no port forward for %s, a public chart", c)
		}
	}
	ports := map[string]int{}
	for _, s := range declared(t) {
		ports[s.Name] = s.Port
	}
	for _, n := range slices.Sorted(maps.Keys(forwarded)) {
		local, remote := forwarded[n][0], forwarded[n][1]
		p, ok := ports[n]
		if !ok {
			t.Errorf("Tiltfile forwards %s, which is no service of services.yaml", n)
			continue
		}
		if local != strconv.Itoa(p) {
			t.Errorf("Tiltfile forwards %s from localhost:%s, its `make run` port is %d", n, local, p)
		}
		d, _ := deploymentOf(t, renderObjects(t, n, "values-dev.yaml"))
		if http := containerPorts(d.Spec.Template.Spec.Containers[0])["http"]; strconv.Itoa(int(http)) != remote {
			t.Errorf("Tiltfile forwards to %s's port %s, it listens on %d", n, remote, http)
		}
	}
}

// checkTiltObjects resolves every entry of the Tiltfile's objects lists
// (objects=[...] and objects.append(...)) to the one object it names, as
// Tilt does at load time: top-level entries among the objects of k8s/, those
// in service() once per service, among k8s/'s and that service's chart's.
func checkTiltObjects(t *testing.T, tiltfile string, services []string, deps []rendered) {
	t.Helper()
	def := regexp.MustCompile(`(?ms)^def service\(name, deps\):\n.*?(^\S|\z)`).FindStringIndex(tiltfile)
	if def == nil {
		t.Fatal("Tiltfile: no def service(name, deps)")
	}
	checked := 0
	resolve := func(where, expr string, vars map[string]string, objs []rendered) {
		sel, err := tiltString(expr, vars)
		if err != nil {
			t.Errorf("Tiltfile objects entry in %s: %v", where, err)
			return
		}
		var found []string
		for _, r := range objs {
			if tiltSelects(sel, r.obj) {
				found = append(found, r.source)
			}
		}
		if len(found) != 1 {
			t.Errorf("Tiltfile objects entry %q in %s selects %d objects, want one (%v)", sel, where, len(found), found)
		}
		checked++
	}
	lists := regexp.MustCompile(`\bobjects\s*=\s*\[([^\]]*)\]|\bobjects\.append\(([^)]*)\)`)
	for _, m := range lists.FindAllStringSubmatchIndex(tiltfile, -1) {
		start, end := m[2], m[3]
		if start < 0 { // objects.append(...)
			start, end = m[4], m[5]
		}
		list := tiltfile[start:end]
		var entries []string
		for _, e := range strings.Split(list, ",") {
			if e = strings.TrimSpace(e); e != "" {
				entries = append(entries, e)
			}
		}
		if m[0] < def[0] || m[0] >= def[1] {
			for _, e := range entries {
				resolve("the top level", e, tiltConstants(tiltfile), deps)
			}
			continue
		}
		for _, n := range services {
			vars := tiltConstants(tiltfile)
			vars["name"] = n
			vals, err := chartutil.ReadValuesFile(filepath.Join(n, "values-dev.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			create, _ := vals.PathValue("devSecret.create")
			if create == true {
				secret, _ := vals.PathValue("devSecret.name")
				vars["secret['name']"] = fmt.Sprint(secret)
			}
			if create, _ := vals.PathValue("devCerts.create"); create == true {
				certs, _ := vals.PathValue("devCerts.name")
				vars["certs['name']"] = fmt.Sprint(certs)
			}
			objs := append(slices.Clone(deps), renderObjects(t, n, "values-dev.yaml")...)
			for _, e := range entries {
				// service() adds the dev Secret only when the chart
				// creates one.
				if _, bound := vars["secret['name']"]; !bound && strings.Contains(e, "secret[") {
					continue
				}
				if _, bound := vars["certs['name']"]; !bound && strings.Contains(e, "certs[") {
					continue
				}
				resolve("service() for "+n, e, vars, objs)
			}
		}
	}
	if checked == 0 {
		t.Error("Tiltfile: no objects lists found, so none were checked")
	}
}

// TestTiltHelmRendersAsTests runs the helm the Tiltfile runs (tilt/helm.sh,
// built from the version pinned in go.mod) the way the Tiltfile runs it,
// and requires the same objects the library rendering above checks: what
// Tilt deploys is what the tests validated. It lints every chart with the
// CLI too. The first run builds helm (a minute or two).
func TestTiltHelmRendersAsTests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the helm CLI")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go on PATH to build helm with")
	}
	helm := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command("tilt/helm.sh", args...)
		cmd.Dir = ".."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("tilt/helm.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}
	for _, c := range applicationCharts(t) {
		t.Run(c, func(t *testing.T) {
			out := helm("template", c, "charts/"+c, "--namespace", namespace, "--values", "charts/"+c+"/values-dev.yaml")
			got := map[string]runtime.Object{}
			for _, r := range decodeAll(t, "helm template "+c, out) {
				m, _ := metaOf(r.obj)
				got[fmt.Sprintf("%T/%s", r.obj, m.GetName())] = r.obj
			}
			want := map[string]runtime.Object{}
			for _, r := range renderObjects(t, c, "values-dev.yaml") {
				m, _ := metaOf(r.obj)
				want[fmt.Sprintf("%T/%s", r.obj, m.GetName())] = r.obj
			}
			if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
				t.Fatalf("helm template renders %v, the tests %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
			for k, w := range want {
				// Certificates made at render differ at each one: their
				// keys must agree, and each value be there.
				if g, ok := got[k].(*corev1.Secret); ok && g.Annotations["esim.dev/generated"] == "true" {
					gs, ws := g.DeepCopy(), w.(*corev1.Secret).DeepCopy()
					for _, s := range []*corev1.Secret{gs, ws} {
						for key, v := range s.StringData {
							if v == "" {
								t.Errorf("%s: %s is empty", k, key)
							}
							s.StringData[key] = ""
						}
					}
					got[k], w = gs, ws
				}
				if !equality.Semantic.DeepEqual(got[k], w) {
					t.Errorf("%s differs between helm template and the tests' rendering", k)
				}
			}
			for _, vf := range valuesFiles {
				helm("lint", "--strict", "charts/"+c, "--namespace", namespace, "--values", "charts/"+c+"/"+vf)
			}
		})
	}
}

// Every label value must fit the API server's rule (at most 63
// characters, starting and ending with a letter or digit), whatever the
// image tag, which may be up to 128 characters and start or end with "_"
// or "." (OCI): the tag is the version label, and one that does not fit
// makes the API server refuse every object of the release.
func TestLabelsFitWhateverTheImageTag(t *testing.T) {
	for _, tag := range []string{strings.Repeat("1.2.3-rc.", 8) + "x", "_build.7-", "0.2.0"} {
		for c := range services {
			out, err := renderChart(c, map[string]any{"image": map[string]any{"tag": tag}})
			if err != nil {
				t.Fatalf("%s, tag %q: %v", c, tag, err)
			}
			for _, r := range decodeRendered(t, out) {
				raw, err := json.Marshal(r.obj)
				if err != nil {
					t.Fatal(err)
				}
				var doc any
				if err := json.Unmarshal(raw, &doc); err != nil {
					t.Fatal(err)
				}
				for _, set := range labelSets(doc) {
					for k, v := range set {
						s, _ := v.(string)
						if errs := validation.IsValidLabelValue(s); len(errs) > 0 {
							t.Errorf("%s, tag %q: %s label %s=%q: %s", c, tag, r.source, k, s, strings.Join(errs, "; "))
						}
					}
				}
			}
			if !strings.Contains(strings.Join(slices.Collect(maps.Values(out)), ""), ":"+tag) {
				t.Errorf("%s: the image is not pinned to the whole tag %q", c, tag)
			}
		}
	}
}

// labelSets finds every "labels" object in a decoded document, a pod
// template's included.
func labelSets(doc any) []map[string]any {
	var sets []map[string]any
	switch d := doc.(type) {
	case map[string]any:
		for k, v := range d {
			if m, ok := v.(map[string]any); ok && k == "labels" {
				sets = append(sets, m)
				continue
			}
			sets = append(sets, labelSets(v)...)
		}
	case []any:
		for _, v := range d {
			sets = append(sets, labelSets(v)...)
		}
	}
	return sets
}

// envOf is a container's plain environment.
func envOf(c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return env
}

// deploymentOf is the Deployment among a chart's objects, with the other
// objects by type and name.
func deploymentOf(t *testing.T, objs []rendered) (*appsv1.Deployment, map[string]runtime.Object) {
	t.Helper()
	var d *appsv1.Deployment
	byName := map[string]runtime.Object{}
	for _, r := range objs {
		m, _ := metaOf(r.obj)
		byName[fmt.Sprintf("%T/%s", r.obj, m.GetName())] = r.obj
		if o, ok := r.obj.(*appsv1.Deployment); ok {
			d = o
		}
	}
	if d == nil {
		t.Fatal("no Deployment")
	}
	return d, byName
}

// mountedSecretKey finds the Secret and key a file path of the container
// reads through a read-only Secret volume.
func mountedSecretKey(t *testing.T, d *appsv1.Deployment, path string) (secret, key string) {
	t.Helper()
	ps := d.Spec.Template.Spec
	for _, m := range ps.Containers[0].VolumeMounts {
		rel, ok := strings.CutPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
		if !ok {
			continue
		}
		for _, v := range ps.Volumes {
			if v.Name != m.Name || v.Secret == nil {
				continue
			}
			if !m.ReadOnly {
				t.Errorf("%s: volume %s is mounted writable", path, m.Name)
			}
			if len(v.Secret.Items) == 0 {
				return v.Secret.SecretName, rel
			}
			for _, it := range v.Secret.Items {
				if it.Path == rel {
					return v.Secret.SecretName, it.Key
				}
			}
			t.Errorf("%s: volume %s projects no file %s", path, m.Name, rel)
			return "", ""
		}
	}
	t.Errorf("%s is under no Secret mounted in the container", path)
	return "", ""
}

// TestSMDPSim holds the SM-DP+ simulator's production values to ES2+ on its
// own port, on the Service, with its certificates from a read-only Secret
// and the control API off; and ordering's dev values to
// calling it there with the client certificate the simulator's dev CA
// signed.
func TestSMDPSim(t *testing.T) {
	d, objs := deploymentOf(t, renderObjects(t, "smdp-sim", "values.yaml"))
	c := d.Spec.Template.Spec.Containers[0]
	env := envOf(c)
	if env["CONTROL_API"] != "false" {
		t.Errorf("CONTROL_API %q in production, want \"false\": the control API can wipe the simulator", env["CONTROL_API"])
	}
	es2plus := containerPorts(c)["es2plus"]
	if es2plus == 0 || env["ES2PLUS_ADDR"] != ":"+strconv.Itoa(int(es2plus)) {
		t.Errorf("ES2PLUS_ADDR %q, container port es2plus %d: want them to agree", env["ES2PLUS_ADDR"], es2plus)
	}
	svc, _ := objs["*v1.Service/smdp-sim"].(*corev1.Service)
	if svc == nil {
		t.Fatal("no Service smdp-sim")
	}
	if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool {
		return p.Port == 8443 && p.TargetPort.String() == "es2plus"
	}) {
		t.Errorf("Service ports %v: want 8443 to es2plus, where ordering calls", svc.Spec.Ports)
	}
	np, _ := objs["*v1.NetworkPolicy/smdp-sim"].(*networkingv1.NetworkPolicy)
	if np == nil || !slices.ContainsFunc(np.Spec.Ingress, func(rule networkingv1.NetworkPolicyIngressRule) bool {
		return admitsPort(rule, "es2plus", es2plus) && slices.ContainsFunc(rule.From, func(peer networkingv1.NetworkPolicyPeer) bool {
			return peer.NamespaceSelector == nil && selects(peer.PodSelector, labels.Set{"app.kubernetes.io/name": "ordering"})
		})
	}) {
		t.Error("the NetworkPolicy does not admit ordering to the ES2+ port")
	}
	for _, name := range []string{"TLS_CERT_FILE", "TLS_KEY_FILE", "CLIENT_CA_FILE"} {
		if secret, _ := mountedSecretKey(t, d, env[name]); secret != "smdp-sim-tls" {
			t.Errorf("%s %q: want a file of the Secret smdp-sim-tls, got %q", name, env[name], secret)
		}
	}

	// In development the simulator's chart makes the certificates, and
	// both ends read them from that one Secret.
	simDev := renderObjects(t, "smdp-sim", "values-dev.yaml")
	simD, simObjs := deploymentOf(t, simDev)
	if v := envOf(simD.Spec.Template.Spec.Containers[0])["CONTROL_API"]; v != "true" {
		t.Errorf("dev CONTROL_API %q, want \"true\"", v)
	}
	certs, _ := simObjs["*v1.Secret/esim-dev-smdp-certs"].(*corev1.Secret)
	if certs == nil {
		t.Fatal("smdp-sim's dev values make no Secret esim-dev-smdp-certs")
	}
	ord, _ := deploymentOf(t, renderObjects(t, "ordering", "values-dev.yaml"))
	ordEnv := envOf(ord.Spec.Template.Spec.Containers[0])
	if ordEnv["SMDP_URL"] != "https://smdp-sim:8443" {
		t.Errorf("ordering dev SMDP_URL %q, want https://smdp-sim:8443", ordEnv["SMDP_URL"])
	}
	pems := map[string]string{}
	for _, name := range []string{"SMDP_CERT_FILE", "SMDP_KEY_FILE", "SMDP_CA_FILE"} {
		secret, key := mountedSecretKey(t, ord, ordEnv[name])
		if secret != certs.Name || certs.StringData[key] == "" {
			t.Errorf("ordering dev %s %q: Secret %q key %q, want a key of %s", name, ordEnv[name], secret, key, certs.Name)
		}
		pems[name] = certs.StringData[key]
	}
	for _, name := range []string{"TLS_CERT_FILE", "TLS_KEY_FILE", "CLIENT_CA_FILE"} {
		f := envOf(simD.Spec.Template.Spec.Containers[0])[name]
		if secret, key := mountedSecretKey(t, simD, f); secret != certs.Name || certs.StringData[key] == "" {
			t.Errorf("smdp-sim dev %s %q: Secret %q key %q, want a key of %s", name, f, secret, key, certs.Name)
		} else {
			pems[name] = certs.StringData[key]
		}
	}
	checkDevMutualTLS(t, pems)
}

// checkDevMutualTLS: ordering's client certificate and the simulator's
// server certificate (for the name ordering dials) are signed by the CA
// each side trusts, and each key matches its certificate.
func checkDevMutualTLS(t *testing.T, pems map[string]string) {
	t.Helper()
	client, err := tls.X509KeyPair([]byte(pems["SMDP_CERT_FILE"]), []byte(pems["SMDP_KEY_FILE"]))
	if err != nil {
		t.Fatalf("ordering's client certificate and key: %v", err)
	}
	server, err := tls.X509KeyPair([]byte(pems["TLS_CERT_FILE"]), []byte(pems["TLS_KEY_FILE"]))
	if err != nil {
		t.Fatalf("smdp-sim's certificate and key: %v", err)
	}
	for _, c := range []struct {
		what, ca string
		cert     tls.Certificate
		opts     x509.VerifyOptions
	}{
		{"ordering's client certificate", pems["CLIENT_CA_FILE"], client, x509.VerifyOptions{KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}},
		{"smdp-sim's server certificate", pems["SMDP_CA_FILE"], server, x509.VerifyOptions{DNSName: "smdp-sim", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}},
	} {
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(c.ca)) {
			t.Fatalf("%s: no CA certificate", c.what)
		}
		leaf, err := x509.ParseCertificate(c.cert.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		c.opts.Roots = roots
		if _, err := leaf.Verify(c.opts); err != nil {
			t.Errorf("%s does not verify against the other side's CA: %v", c.what, err)
		}
	}
}
