// Command metricnames prints the metric names that Prometheus rule files
// and Grafana dashboards query, one "name<TAB>file: where" line each, as
// PromQL's own parser reads the queries, so that a test can hold them to
// what the services export. Names that a rule file records itself are
// left out. It exits non-zero on a query or file it cannot read.
//
// usage: metricnames FILE...   (*.json: Grafana dashboards; else rule files)
package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: metricnames FILE...")
		os.Exit(2)
	}
	p := parser.NewParser(parser.Options{})
	found := map[string][]string{}
	recorded := map[string]bool{}
	var failed bool
	for _, file := range os.Args[1:] {
		var queries []query
		var err error
		if filepath.Ext(file) == ".json" {
			queries, err = dashboardQueries(file)
		} else {
			queries, err = ruleQueries(file, p, recorded)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			failed = true
			continue
		}
		for _, q := range queries {
			names, err := metricNames(p, q.expr)
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s: %s: %v\n", file, q.where, err)
				failed = true
				continue
			}
			for _, n := range names {
				found[n] = append(found[n], file+": "+q.where)
			}
		}
	}
	names := make([]string, 0, len(found))
	for n := range found {
		if !recorded[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Printf("%s\t%s\n", n, found[n][0])
	}
	if failed {
		os.Exit(1)
	}
}

type query struct{ where, expr string }

// ruleQueries are the expressions of a Prometheus rule file, checked as
// promtool checks them; the names it records go into recorded.
func ruleQueries(file string, p parser.Parser, recorded map[string]bool) ([]query, error) {
	groups, errs := rulefmt.ParseFile(file, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s: %v", file, errs)
	}
	var out []query
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert
			if r.Record != "" {
				name = r.Record
				recorded[r.Record] = true
			}
			out = append(out, query{where: g.Name + "/" + name, expr: r.Expr})
		}
	}
	return out, nil
}

// grafanaVariables stand for what Grafana substitutes before a query
// reaches Prometheus: durations and, in label values, anything.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "5m", "${__rate_interval}", "5m",
	"$__interval", "1m", "${__interval}", "1m",
	"$__range", "1h", "${__range}", "1h",
)

// dashboardQueries are the "expr" of every target of a Grafana dashboard,
// nested panels and rows included.
func dashboardQueries(file string) ([]query, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	var out []query
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				where = title
			}
			if expr, ok := v["expr"].(string); ok {
				out = append(out, query{where: where, expr: grafanaVariables.Replace(expr)})
			}
			for _, child := range v {
				walk(child, where)
			}
		case []any:
			for _, child := range v {
				walk(child, where)
			}
		}
	}
	walk(doc, "dashboard")
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no queries (no \"expr\" in any target)", file)
	}
	return out, nil
}

// metricNames are the names of every series selector in expr, by name or
// by a __name__ equality matcher. A selector with neither names no metric.
func metricNames(p parser.Parser, expr string) ([]string, error) {
	e, err := p.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var unchecked error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		if vs.Name != "" {
			names = append(names, vs.Name)
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != labels.MetricName {
				continue
			}
			if m.Type != labels.MatchEqual {
				// A pattern of names cannot be held to what exists.
				unchecked = fmt.Errorf("%s: select metrics by their exact names", vs)
				continue
			}
			names = append(names, m.Value)
		}
		return nil
	})
	return names, unchecked
}
