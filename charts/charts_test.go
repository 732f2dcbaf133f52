package charts

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	kindv1alpha4 "sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/esimplatform/esim/libs/config"
	accounts "github.com/esimplatform/esim/services/accounts/server"
	catalogue "github.com/esimplatform/esim/services/catalogue/server"
	gateway "github.com/esimplatform/esim/services/gateway/server"
)

// services lists every application chart with the environment variables its
// service reads. A chart folder without an entry here fails
// TestEveryChartIsListed, so a new service cannot ship an unchecked chart.
var services = map[string][]string{
	"accounts":  config.EnvVars(accounts.Config{}),
	"catalogue": config.EnvVars(catalogue.Config{}),
	"gateway":   config.EnvVars(gateway.Config{}),
}

// parsers read a chart's rendered environment the way its service does at
// start, so values that would make the service refuse to start fail here.
var parsers = map[string]func(config.Getenv) error{
	"accounts":  parseAs[accounts.Config],
	"catalogue": parseAs[catalogue.Config],
	"gateway":   parseAs[gateway.Config],
}

func parseAs[C any](getenv config.Getenv) error {
	var cfg C
	if err := config.Parse(context.Background(), getenv, &cfg); err != nil {
		return err
	}
	if v, ok := any(cfg).(interface{ Validate() error }); ok {
		return v.Validate()
	}
	return nil
}

// valuesFiles are the two ways each chart is deployed: values.yaml alone
// (production-like) and values-dev.yaml layered over it (kind/Tilt).
var valuesFiles = []string{"values.yaml", "values-dev.yaml"}

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

// decodeStrict decodes one YAML document into the Kubernetes API type named
// by its apiVersion and kind. Unknown kinds, unknown or misspelt fields,
// duplicate keys and wrong types are errors: the offline equivalent of the
// API server's strict field validation.
func decodeStrict(doc []byte) (runtime.Object, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	if tm.APIVersion == "" || tm.Kind == "" {
		return nil, errors.New("document has no apiVersion or kind")
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return nil, err
	}
	obj, err := scheme.Scheme.New(gv.WithKind(tm.Kind))
	if err != nil {
		return nil, fmt.Errorf("unknown kind %s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
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

// applicationCharts lists the chart folders next to this file, without the
// library chart.
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
		if meta.Type != "library" {
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
	if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
		return nil, err
	}
	opts := chartutil.ReleaseOptions{Name: chrt.Name(), Namespace: namespace, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValues(chrt, vals, opts, chartutil.DefaultCapabilities)
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
	want := make([]string, 0, len(services))
	for s := range services {
		want = append(want, s)
	}
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("chart folders %v, services listed in charts_test.go %v", got, want)
	}
}

// TestLintStrict is `helm lint --strict -f FILE` for every chart: warnings
// fail as errors do.
func TestLintStrict(t *testing.T) {
	for _, c := range applicationCharts(t) {
		for _, vf := range valuesFiles {
			t.Run(c+"/"+vf, func(t *testing.T) {
				linter := lint.AllWithKubeVersionAndSchemaValidation(c, overrides(t, c, vf), namespace, nil, false)
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

// checkIngress holds the public surface to the API: in production the
// gateway alone has an Ingress, and it routes /v1 to the gateway's Service
// and nothing else (the probes and /metrics share the port).
func checkIngress(t *testing.T, chartName string, dev bool, svc *corev1.Service, ingresses []*networkingv1.Ingress) {
	t.Helper()
	want := 0
	if chartName == "gateway" && !dev {
		want = 1
	}
	if len(ingresses) != want {
		t.Fatalf("%d Ingresses, want %d", len(ingresses), want)
	}
	for _, ing := range ingresses {
		if ing.Spec.DefaultBackend != nil || len(ing.Spec.Rules) == 0 {
			t.Errorf("Ingress %s: a default backend or no rules would route more than /v1", ing.Name)
		}
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				t.Fatalf("Ingress %s: rule without paths", ing.Name)
			}
			for _, p := range rule.HTTP.Paths {
				if p.Path != "/v1" || p.PathType == nil || *p.PathType != networkingv1.PathTypePrefix {
					t.Errorf("Ingress %s routes %q (%v), want only the /v1 prefix", ing.Name, p.Path, p.PathType)
				}
				if b := p.Backend.Service; b == nil || b.Name != svc.Name || b.Port.Name != "http" {
					t.Errorf("Ingress %s: backend %+v, want Service %s port http", ing.Name, p.Backend, svc.Name)
				}
			}
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
	for _, p := range s.Spec.Ports {
		if p.TargetPort.String() != "http" {
			t.Errorf("Service port %s targets %s, want the named port http", p.Name, p.TargetPort.String())
		}
	}

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
	sel, err := metav1.LabelSelectorAsSelector(pdbs[0].Spec.Selector)
	if err != nil || !sel.Matches(pod) {
		t.Errorf("PDB selector %v does not match the pods (%v)", pdbs[0].Spec.Selector, err)
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
	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/path"] != "/metrics" || ann["prometheus.io/port"] == "" {
		t.Errorf("pod annotations %v: want prometheus.io scrape, port and path", ann)
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
	var port int32
	for _, p := range c.Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	if port == 0 {
		t.Fatal("container has no port named http")
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
	for _, e := range c.Env {
		if e.Name == "HTTP_ADDR" && e.Value != ":"+strconv.Itoa(int(port)) {
			t.Errorf("HTTP_ADDR %q does not listen on the container port %d", e.Value, port)
		}
	}
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
	// Values from Secrets are not known here; any non-empty stand-in lets
	// the rest of the configuration be parsed and validated.
	values := map[string]string{}
	for _, e := range c.Env {
		values[e.Name] = e.Value
		if e.ValueFrom != nil {
			values[e.Name] = "from-secret"
		}
	}
	if err := parsers[chartName](func(k string) string { return values[k] }); err != nil {
		t.Errorf("%s would refuse to start with these values: %v", chartName, err)
	}
	extra, missing := envDiff(names, services[chartName])
	if len(extra)+len(missing) != 0 {
		t.Errorf("env differs from %s's server.Config: set but not read %v, read but not set %v", chartName, extra, missing)
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
`
	if _, err := decodeStrict([]byte(valid)); err != nil {
		t.Fatalf("valid Deployment rejected: %v", err)
	}
	cases := map[string]string{
		"misspelt field":      strings.Replace(valid, "imagePullPolicy:", "imagePullPolcy:", 1),
		"misplaced field":     strings.Replace(valid, "  selector:", "  replica: 2\n  selector:", 1),
		"wrong type":          strings.Replace(valid, "image: x:1", "image: [x]", 1),
		"duplicate key":       strings.Replace(valid, "  name: x\n", "  name: x\n  name: y\n", 1),
		"unknown kind":        strings.Replace(valid, "kind: Deployment", "kind: Deploymnet", 1),
		"unknown api version": strings.Replace(valid, "apps/v1", "apps/v1beta9", 1),
		"no kind":             strings.Replace(valid, "kind: Deployment\n", "", 1),
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
			checkGatewayNodePortMapped(t, cluster)
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
			if _, ok := r.obj.(*corev1.Namespace); ok {
				continue
			}
			if m.GetNamespace() != namespace {
				t.Errorf("%s: %s %s is in namespace %q, want %q", f, kind, m.GetName(), m.GetNamespace(), namespace)
			}
		}
	}
	t.Logf("kinds: %v", kinds)
}

// checkGatewayNodePortMapped proves the kind port mapping reaches the
// gateway's dev NodePort, so the two files cannot drift apart.
func checkGatewayNodePortMapped(t *testing.T, cluster kindv1alpha4.Cluster) {
	t.Helper()
	mapped := map[int32]bool{}
	for _, n := range cluster.Nodes {
		for _, m := range n.ExtraPortMappings {
			mapped[m.ContainerPort] = true
		}
	}
	for _, r := range renderObjects(t, "gateway", "values-dev.yaml") {
		svc, ok := r.obj.(*corev1.Service)
		if !ok {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.NodePort == 0 || !mapped[p.NodePort] {
				t.Errorf("gateway dev Service port %s: nodePort %d is not mapped by kind-config.yaml", p.Name, p.NodePort)
			}
		}
		return
	}
	t.Error("the gateway chart renders no Service")
}
