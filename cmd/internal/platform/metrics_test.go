package platform

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/cmd/internal/platform/redistest"
	"github.com/esimplatform/esim/cmd/internal/services"
	"github.com/esimplatform/esim/cmd/internal/services/servicestest"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
)

// externalMetrics are what the rules and the dashboard may query that no
// service of ours exports: kube-state-metrics' series.
var externalMetrics = []string{
	"kube_pod_container_status_restarts_total",
}

// monitoringFiles are the alerts and the dashboard an operator installs
// (charts/esim).
var monitoringFiles = []string{
	"charts/esim/files/prometheus-rules.yaml",
	"charts/esim/files/grafana-dashboard.json",
}

// TestDashboardAndRulesUseExportedMetrics: every metric the alerts and
// the dashboard query is one a service really exports. The whole platform
// runs (make run's), a partner orders in sandbox and live (the SM-DP+
// simulator answers over ES2+) with a webhook endpoint set, and once the
// order's webhook is delivered each service's /metrics is read: a name
// that none of them exports, once histograms' _bucket, _sum and _count
// are set aside, fails the test by name.
func TestDashboardAndRulesUseExportedMetrics(t *testing.T) {
	declaration, err := services.Find(".")
	if err != nil {
		t.Fatal(err)
	}
	queried := queriedMetrics(t, filepath.Dir(declaration))

	// The partner's webhook receiver, on loopback, which the webhook
	// service may reach in sandbox once told of its address.
	delivered := make(chan string, 16)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var e struct {
			Event string `json:"event"`
		}
		_ = json.Unmarshal(b, &e)
		select {
		case delivered <- e.Event:
		default:
		}
	}))
	defer receiver.Close()

	bin := t.TempDir()
	declared := servicestest.Build(t, bin)
	opts := Options{
		PGURL: pgtest.AdminURL(), RedisURL: redistest.URL(),
		Addrs:  servicestest.FreeAddrs(t, declared),
		BinDir: bin, RunDir: t.TempDir(), KeyName: "platform metrics test",
		DatabasePrefix: pgtest.DatabasePrefix(t, servicestest.Databases(declared)...),
		Env:            map[string][]string{"webhook": {"SANDBOX_PRIVATE_ENDPOINTS=" + receiver.Listener.Addr().String()}},
	}
	ctx := context.Background()
	p, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := p.RevokeKeys(ctx); err != nil {
			t.Error(err)
		}
		if err := p.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})

	hooks := webhookv1.NewWebhookProtobufClient(p.URL("webhook"), internalauth.Client(http.DefaultClient, p.OperatorToken))
	if _, err := hooks.SetEndpoint(ctx, &webhookv1.SetEndpointRequest{
		Scope: &webhookv1.Scope{AccountId: p.DemoAccountID, Environment: accountsv1.Environment_ENVIRONMENT_SANDBOX},
		Url:   receiver.URL + "/hooks",
	}); err != nil {
		t.Fatalf("set the sandbox webhook endpoint: %v", err)
	}
	order(t, p, p.SandboxKey)
	liveOrder(t, p)
	// The sandbox order's event goes through ordering's outbox, Kafka and
	// the webhook service's queue to the receiver.
	timeout := time.After(time.Minute)
	for got := ""; got != "order.completed"; {
		select {
		case got = <-delivered:
		case <-timeout:
			t.Fatal("no order.completed webhook delivered within a minute")
		}
	}

	// Counters appear once counted, and the webhook's attempt is counted
	// after its answer: read until every name is there, or for a minute.
	var missing []string
	deadline := time.Now().Add(time.Minute)
	for {
		missing = missingMetrics(queried, exportedMetrics(t, p))
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, name := range missing {
		t.Errorf("%s (%s): no service exports it", name, queried[name])
	}
}

// TestMissingMetricsNamesWhatIsNotExported holds the comparison to what it
// must catch, so that the test above can fail.
func TestMissingMetricsNamesWhatIsNotExported(t *testing.T) {
	exported := map[string]bool{"http_server_request_duration_seconds_bucket": true, "webhook_attempts_total": true}
	queried := map[string]string{
		"http_server_request_duration_seconds_count": "", "http_server_request_duration_seconds": "",
		"webhook_attempts_total": "", "webhook_attempts": "", "kube_pod_container_status_restarts_total": "",
		"ordering_orders_finished_total": "",
	}
	got := missingMetrics(queried, exported)
	if want := []string{"ordering_orders_finished_total", "webhook_attempts"}; !slices.Equal(got, want) {
		t.Errorf("missing %v, want %v", got, want)
	}
}

// queriedMetrics are the metric names the monitoring files query, each
// with where, as PromQL's parser reads them (tools/promtool's
// metricnames, built once per machine with promtool).
func queriedMetrics(t *testing.T, root string) map[string]string {
	t.Helper()
	args := []string{"metricnames"}
	for _, f := range monitoringFiles {
		args = append(args, filepath.Join(root, f))
	}
	cmd := exec.Command(filepath.Join(root, "tools/promtool/run.sh"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tools/promtool/run.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	names := map[string]string{}
	for line := range strings.Lines(string(out)) {
		name, where, _ := strings.Cut(strings.TrimSpace(line), "\t")
		names[name] = where
	}
	if len(names) < 5 {
		t.Fatalf("metricnames found only %v in %v", names, monitoringFiles)
	}
	return names
}

// exportedMetrics are the names of every sample on every service's
// /metrics.
func exportedMetrics(t *testing.T, p *Platform) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, s := range p.Services() {
		resp, err := http.Get(s.URL + "/metrics")
		if err != nil {
			t.Fatalf("%s /metrics: %v", s.Name, err)
		}
		lines := bufio.NewScanner(resp.Body)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			line := lines.Text()
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if i := strings.IndexAny(line, "{ "); i > 0 {
				names[line[:i]] = true
			}
		}
		resp.Body.Close()
		if err := lines.Err(); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s /metrics: %d %v", s.Name, resp.StatusCode, err)
		}
	}
	return names
}

// missingMetrics are the queried names that are neither exported nor
// external, sorted; a histogram's _bucket, _sum and _count count as its
// name, on either side.
func missingMetrics(queried map[string]string, exported map[string]bool) []string {
	base := func(name string) string {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok {
				return b
			}
		}
		return name
	}
	have := map[string]bool{}
	for name := range exported {
		have[base(name)] = true
	}
	var missing []string
	for name := range queried {
		if !have[base(name)] && !slices.Contains(externalMetrics, name) {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return missing
}

// order buys one eSIM of a fixed plan with key, for a 201.
func order(t *testing.T, p *Platform, key string) {
	t.Helper()
	var plans struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	getJSON(t, p.APIBaseURL+"/plans?limit=1&type=fixed", key, &plans)
	if len(plans.Data) != 1 {
		t.Fatalf("no plan: %+v", plans)
	}
	req, _ := http.NewRequest(http.MethodPost, p.APIBaseURL+"/orders", strings.NewReader(`{"plan_id":"`+plans.Data[0].ID+`"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("order: %d %s", resp.StatusCode, b)
	}
}
