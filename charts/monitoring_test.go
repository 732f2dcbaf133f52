package charts

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1) the charts write, decoded strictly: a field
// the charts misspell or misplace is an error here, as the CRD's schema
// makes it one at the API server.
type serviceMonitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		JobLabel          string               `json:"jobLabel"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// TestServiceMonitor: off by default; on, every chart's ServiceMonitor
// scrapes the metrics container port by a Service port of that name, on
// metrics.path, through a Service that selects the pods and that the
// ServiceMonitor selects, and no other (the API's Service never carries
// /metrics).
func TestServiceMonitor(t *testing.T) {
	for _, c := range applicationCharts(t) {
		t.Run(c, func(t *testing.T) {
			out, err := renderChart(c, map[string]any{})
			if err != nil {
				t.Fatal(err)
			}
			for f, doc := range out {
				if strings.Contains(doc, "kind: ServiceMonitor") || strings.Contains(doc, "app.kubernetes.io/component: metrics") {
					t.Errorf("%s: a ServiceMonitor or metrics Service by default", f)
				}
			}

			vals := map[string]any{"metrics": map[string]any{
				"port": 9100, "path": "/metrics",
				"serviceMonitor": map[string]any{"enabled": true, "interval": "15s", "labels": map[string]any{"release": "prom"}},
			}}
			out, err = renderChart(c, vals)
			if err != nil {
				t.Fatal(err)
			}
			var monitors []serviceMonitor
			var others []rendered
			for f, doc := range out {
				if strings.HasSuffix(f, "NOTES.txt") {
					continue
				}
				docs, err := splitDocuments([]byte(doc))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				for _, d := range docs {
					if !bytes.Contains(d, []byte("kind: ServiceMonitor")) {
						others = append(others, decodeAll(t, f, d)...)
						continue
					}
					var sm serviceMonitor
					if err := yaml.UnmarshalStrict(d, &sm); err != nil {
						t.Fatalf("%s: %v", f, err)
					}
					monitors = append(monitors, sm)
				}
			}
			if len(monitors) != 1 {
				t.Fatalf("want one ServiceMonitor, got %d", len(monitors))
			}
			sm := monitors[0]
			if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Metadata.Namespace != namespace || sm.Metadata.Labels["release"] != "prom" {
				t.Errorf("ServiceMonitor %s %s in %q, labels %v: want monitoring.coreos.com/v1 in %s with the labels of values", sm.APIVersion, sm.Metadata.Name, sm.Metadata.Namespace, sm.Metadata.Labels, namespace)
			}
			checkLabels(t, "ServiceMonitor", sm.Metadata.Labels)
			if got := sm.Spec.NamespaceSelector.MatchNames; len(got) != 1 || got[0] != namespace {
				t.Errorf("ServiceMonitor looks in namespaces %v, want the release's", got)
			}
			if len(sm.Spec.Endpoints) != 1 {
				t.Fatalf("ServiceMonitor endpoints %+v, want one", sm.Spec.Endpoints)
			}
			ep := sm.Spec.Endpoints[0]
			if ep.Path != "/metrics" || ep.Interval != "15s" {
				t.Errorf("ServiceMonitor scrapes %s every %q, want /metrics every 15s", ep.Path, ep.Interval)
			}
			sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
			if err != nil || sel.Empty() {
				t.Fatalf("ServiceMonitor selector %v: %v", sm.Spec.Selector, err)
			}

			var d *appsv1.Deployment
			var selected []*corev1.Service
			services := 0
			for _, r := range others {
				switch o := r.obj.(type) {
				case *appsv1.Deployment:
					d = o
				case *corev1.Service:
					services++
					if sel.Matches(labels.Set(o.Labels)) {
						selected = append(selected, o)
					}
				}
			}
			if d == nil || services != 2 {
				t.Fatalf("want a Deployment and two Services (the API's and the metrics'), got %v and %d", d != nil, services)
			}
			if len(selected) != 1 {
				t.Fatalf("ServiceMonitor selects %d Services, want the metrics one alone", len(selected))
			}
			svc := selected[0]
			if svc.Namespace != namespace || svc.Spec.ClusterIP != corev1.ClusterIPNone {
				t.Errorf("metrics Service %s in %q, clusterIP %q: want a headless Service in %s", svc.Name, svc.Namespace, svc.Spec.ClusterIP, namespace)
			}
			checkLabels(t, "metrics Service", svc.Labels)
			if job := svc.Labels[sm.Spec.JobLabel]; job != d.Labels["app.kubernetes.io/name"] {
				t.Errorf("ServiceMonitor jobLabel %q gives job %q, want the service's name %q", sm.Spec.JobLabel, job, d.Labels["app.kubernetes.io/name"])
			}
			if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
				t.Errorf("metrics Service selector %v does not match the pods %v", svc.Spec.Selector, d.Spec.Template.Labels)
			}
			ports := containerPorts(d.Spec.Template.Spec.Containers[0])
			if ports["metrics"] != 9100 {
				t.Fatalf("container port metrics %d, want metrics.port 9100", ports["metrics"])
			}
			found := false
			for _, p := range svc.Spec.Ports {
				if p.Name != ep.Port {
					continue
				}
				found = true
				if target := p.TargetPort.String(); target != "metrics" && target != strconv.Itoa(int(ports["metrics"])) {
					t.Errorf("metrics Service port %s targets %s, want the container's metrics port", p.Name, target)
				}
			}
			if !found {
				t.Errorf("ServiceMonitor scrapes port %q, which the metrics Service %v lacks", ep.Port, svc.Spec.Ports)
			}
		})
	}
}

// TestServiceMonitorNeedsMetrics: with metrics disabled the NetworkPolicy
// admits nobody to the metrics port, so a ServiceMonitor would scrape
// nothing, quietly; the chart refuses instead.
func TestServiceMonitorNeedsMetrics(t *testing.T) {
	_, err := renderChart("accounts", map[string]any{"metrics": map[string]any{
		"enabled": false, "serviceMonitor": map[string]any{"enabled": true},
	}})
	if err == nil || !strings.Contains(err.Error(), "metrics.serviceMonitor.enabled needs metrics.enabled") {
		t.Fatalf("want the chart to refuse a ServiceMonitor without metrics, got %v", err)
	}
}

// promtool runs tools/promtool/run.sh: the pinned promtool (or
// metricnames), built once per machine by `make promtool`, or here.
func promtool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("../tools/promtool/run.sh", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tools/promtool/run.sh %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

const rulesFile = "esim/files/prometheus-rules.yaml"

// TestPrometheusRules checks the alerts as Prometheus would load them
// and runs their unit tests (prometheus-rules.test.yaml: each alert
// firing, with its labels and annotations, and not firing).
func TestPrometheusRules(t *testing.T) {
	out := promtool(t, "promtool", "check", "rules", "--lint=all", "--lint-fatal", rulesFile)
	t.Log(out)
	out = promtool(t, "promtool", "test", "rules", "esim/files/prometheus-rules.test.yaml")
	t.Log(out)
	// Every alert has a case of its own: a new one without a test fails.
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	readYAML(t, rulesFile, &rules)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	readYAML(t, "esim/files/prometheus-rules.test.yaml", &tests)
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, c := range tests.Tests {
		for _, a := range c.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			n++
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("alert %s: a test where it fires %v, one where it does not %v; want both", r.Alert, fires[r.Alert], silent[r.Alert])
			}
		}
	}
	if n == 0 {
		t.Fatalf("no alerts in %s", rulesFile)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// esimChart is the umbrella chart charts/esim.
func esimChart(t *testing.T) *chart.Chart {
	t.Helper()
	chrt, err := loader.Load(umbrella)
	if err != nil {
		t.Fatal(err)
	}
	return chrt
}

// monitoringValues are the umbrella's values.
func monitoringValues(t *testing.T) map[string]any {
	t.Helper()
	vals, err := chartutil.ReadValuesFile(filepath.Join(umbrella, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return vals.AsMap()
}

// TestUmbrellaMonitoring: the PrometheusRule and the dashboard's
// ConfigMap are off by default and, on, carry the files unchanged.
func TestUmbrellaMonitoring(t *testing.T) {
	const ruleTemplate, dashboardTemplate = "esim/templates/prometheusrule.yaml", "esim/templates/grafana-dashboard.yaml"
	render := func(monitoring map[string]any) map[string]string {
		t.Helper()
		vals := monitoringValues(t)
		if monitoring != nil {
			vals = chartutil.CoalesceTables(map[string]any{"monitoring": monitoring}, vals)
		}
		out, err := renderLoaded(esimChart(t), vals)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	out := render(nil)
	for _, f := range []string{ruleTemplate, dashboardTemplate} {
		if strings.TrimSpace(out[f]) != "" {
			t.Errorf("%s renders by default:\n%s", f, out[f])
		}
	}

	out = render(map[string]any{
		"prometheusRule":   map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
		"grafanaDashboard": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "eSIM"}},
	})
	var rule struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Spec       struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict([]byte(out[ruleTemplate]), &rule); err != nil {
		t.Fatalf("%s: %v\n%s", ruleTemplate, err, out[ruleTemplate])
	}
	if rule.APIVersion != "monitoring.coreos.com/v1" || rule.Kind != "PrometheusRule" || rule.Metadata.Namespace != namespace || rule.Metadata.Labels["release"] != "prom" {
		t.Errorf("%s: %s %s in %q, labels %v", ruleTemplate, rule.APIVersion, rule.Kind, rule.Metadata.Namespace, rule.Metadata.Labels)
	}
	var file struct {
		Groups []any `json:"groups"`
	}
	readYAML(t, rulesFile, &file)
	if len(file.Groups) == 0 || !reflect.DeepEqual(rule.Spec.Groups, file.Groups) {
		t.Errorf("the PrometheusRule's groups differ from %s's", rulesFile)
	}

	objs := decodeAll(t, dashboardTemplate, []byte(out[dashboardTemplate]))
	if len(objs) != 1 {
		t.Fatalf("%s: %d objects, want a ConfigMap", dashboardTemplate, len(objs))
	}
	cm, ok := objs[0].obj.(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("%s: %T, want a ConfigMap", dashboardTemplate, objs[0].obj)
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "eSIM" || cm.Namespace != namespace {
		t.Errorf("dashboard ConfigMap in %q, labels %v, annotations %v: want grafana_dashboard \"1\" and the annotations of values", cm.Namespace, cm.Labels, cm.Annotations)
	}
	want, err := os.ReadFile("esim/files/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var got, wantJSON any
	if len(cm.Data) != 1 {
		t.Fatalf("dashboard ConfigMap holds %d files, want one", len(cm.Data))
	}
	for name, data := range cm.Data {
		if err := json.Unmarshal([]byte(data), &got); err != nil {
			t.Fatalf("dashboard %s: %v", name, err)
		}
	}
	if err := json.Unmarshal(want, &wantJSON); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, wantJSON) {
		t.Error("the dashboard in the ConfigMap differs from files/grafana-dashboard.json")
	}
}
