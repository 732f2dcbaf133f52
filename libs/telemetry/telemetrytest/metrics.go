package telemetrytest

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
)

// Scrape is what a GET of metrics, a /metrics handler, answers.
func Scrape(metrics http.Handler) string {
	rec := httptest.NewRecorder()
	metrics.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Body.String()
}

var promLabel = regexp.MustCompile(`(\w+)="([^"]*)"`)

// Sample is the value of the first series called name whose labels
// include labels, in a Prometheus exposition, or "" when there is none.
// Other labels (the exporter adds otel_scope_*) do not matter.
func Sample(exposition, name string, labels map[string]string) string {
	for l := range strings.Lines(exposition) {
		series, value, ok := strings.Cut(strings.TrimSpace(l), " ")
		if !ok || !strings.HasPrefix(series, name+"{") {
			continue
		}
		have := map[string]string{}
		for _, m := range promLabel.FindAllStringSubmatch(series, -1) {
			have[m[1]] = m[2]
		}
		matches := true
		for k, v := range labels {
			matches = matches && have[k] == v
		}
		if matches {
			return value
		}
	}
	return ""
}
