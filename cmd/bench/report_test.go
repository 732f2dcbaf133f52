package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// A report of every section has one Goals table after Machine, with
// every section's goals in the sections' order, and every section starts
// with one line of method linking to a heading of docs/benchmarks.md; the
// method itself and the per-section target tables are gone.
func TestReportGoalsAndMethodLines(t *testing.T) {
	r := report{
		cfg: config{duration: time.Second, warmup: time.Second, workers: []int{8}, trials: 1, usageDatabase: "esim_bench_usage"}, cpus: 2, goVersion: "go1.26",
		rows:     []measurement{{name: gatewayTarget}, {name: bareTarget}},
		orders:   &orderResults{},
		webhooks: &webhookResults{control: result{Requests: 1}, stages: []stage{{"order completed → attempt", result{Requests: 1}}}, cpu: []cpuShare{{totalShare, time.Millisecond}}},
		installs: &installResults{control: result{Requests: 1}},
		usage:    &usageResults{},
		lists:    &listResults{rows: []listRow{{endpoint: "orders"}}},
		pipeline: &pipelineResults{halfErr: "no rate measured"},
	}
	md := r.markdown()
	for _, unwanted := range []string{"## Method", "Targets", "## Results"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("report has %q:\n%s", unwanted, md)
		}
	}

	headings := regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(md, -1)
	var names []string
	for _, h := range headings {
		names = append(names, h[1])
	}
	if len(names) < 2 || names[0] != "Machine" || names[1] != "Goals" {
		t.Fatalf("headings %q: want Machine, then Goals", names)
	}

	// The Goals table: every goal once, with its status, its sections in
	// the report's order and named as their headings.
	goalsPart := md[strings.Index(md, "## Goals"):]
	goalsPart = goalsPart[:strings.Index(goalsPart[1:], "\n## ")+1]
	gs := r.goals()
	if want := 4 + 3 + 3 + 2 + 1 + 1 + 2; len(gs) != want {
		t.Errorf("%d goals, want %d", len(gs), want)
	}
	var sections []string
	for _, g := range gs {
		row := "| " + g.section + " | " + g.name + ": " + g.want + " | " + g.measured + " | " + g.status() + " |"
		if strings.Count(goalsPart, row) != 1 {
			t.Errorf("the Goals table has not once %q:\n%s", row, goalsPart)
		}
		if s := g.status(); !slices.Contains([]string{"met", "not met"}, strings.TrimSuffix(s, " (not a target)")) || g.control != strings.HasSuffix(s, " (not a target)") {
			t.Errorf("goal %q: status %q", g.name, s)
		}
		if len(sections) == 0 || sections[len(sections)-1] != g.section {
			sections = append(sections, g.section)
		}
	}
	want := []string{plansSection, ordersSection, webhooksSection, installsSection, usageSection, listsSection, pipelineSection}
	if !slices.Equal(sections, want) {
		t.Errorf("the Goals table's sections %q, want %q", sections, want)
	}
	for _, s := range want {
		if !slices.Contains(names, s) {
			t.Errorf("no heading %q for the goals of its section: %q", s, names)
		}
	}

	// Each section's first line is its method, linking to docs.
	anchors := docAnchors(t)
	sectionStart := regexp.MustCompile(`(?m)^##+ (.+)\n\n(.+)$`)
	link := regexp.MustCompile(`\(\[method\]\(docs/benchmarks\.md#([a-z0-9-]+)\)\)\.$`)
	linked := 0
	for _, m := range sectionStart.FindAllStringSubmatch(md, -1) {
		heading, first := m[1], m[2]
		if heading == "Goals" || strings.HasPrefix(heading, "Peak memory") {
			continue
		}
		l := link.FindStringSubmatch(first)
		if heading != "Machine" && l == nil {
			t.Errorf("section %q starts with %q, not one line of method with its link", heading, first)
			continue
		}
		if l != nil {
			linked++
			if !anchors[l[1]] {
				t.Errorf("section %q links to #%s, which docs/benchmarks.md has no heading for", heading, l[1])
			}
		}
	}
	// Machine's link too, on its last line.
	for _, l := range regexp.MustCompile(`\(\[method\]\(docs/benchmarks\.md#([^)]*)\)\)`).FindAllStringSubmatch(md, -1) {
		if !anchors[l[1]] {
			t.Errorf("the report links to #%s, which docs/benchmarks.md has no heading for", l[1])
		}
	}
	if linked < len(want) {
		t.Errorf("%d sections with a method line, want at least %d:\n%s", linked, len(want), md)
	}
}

// docAnchors are the anchors GitHub makes of docs/benchmarks.md's
// headings.
func docAnchors(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	for _, h := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h[1]), ""), " ", "-")] = true
	}
	return anchors
}
