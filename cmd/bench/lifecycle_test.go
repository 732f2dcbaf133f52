package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The receiver notes which event each first delivery was, and keeps the
// first of each type as the control's model.
func TestReceiverKeepsTheFirstDeliveryOfEachType(t *testing.T) {
	rcv, err := startReceiver()
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.close()
	if err := rcv.verifyWith(testSecret); err != nil {
		t.Fatal(err)
	}
	event := func(typ, id string) []byte {
		return fmt.Appendf(nil, `{"id":"evt","event":%q,"created_at":"2026-01-02T03:04:05Z","environment":"sandbox","data":{"id":%q}}`, typ, id)
	}
	for i, b := range [][]byte{event("order.completed", "o1"), event(eventInstalled, "e1"), event(eventInstalled, "e2")} {
		if got := post(t, rcv.url, testSecret, fmt.Sprintf("evt_%d", i), b); got != http.StatusNoContent {
			t.Fatalf("%s: %d", b, got)
		}
	}
	got := rcv.snapshot()
	if got.arrivals["o1"].event != "order.completed" || got.arrivals["e1"].event != eventInstalled || got.arrivals["e2"].event != eventInstalled {
		t.Errorf("arrivals %+v", got.arrivals)
	}
	if d, ok := rcv.sampleOf(eventInstalled); !ok || !bytes.Equal(d.body, event(eventInstalled, "e1")) {
		t.Errorf("sample of %s: %s", eventInstalled, d.body)
	}
	// A type that never came: the first delivery of all.
	if d, ok := rcv.sampleOf("esim.expired"); !ok || !bytes.Equal(d.body, event("order.completed", "o1")) {
		t.Errorf("sample of esim.expired: %s", d.body)
	}
}

// An install's latency runs from its 200 to its esim.installed webhook,
// clamped at 0; another event about the eSIM is no install's webhook;
// only measured installs count.
func TestInstallTally(t *testing.T) {
	start := time.Now()
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	calls := []installCall{
		{id: "warm", due: at(-10), read: at(0)},
		{id: "a", due: at(0), read: at(4), measured: true},
		{id: "b", due: at(10), read: at(12), measured: true},
		{id: "c", due: at(20), read: at(30), measured: true},
		{id: "d", due: at(30), read: at(31), measured: true},
		{id: "e", due: at(40), read: at(41), measured: true},
		{id: "f", due: at(50), read: at(51), measured: true, err: errors.New("HTTP 404")},
	}
	got := receiverState{
		arrivals: map[string]arrival{
			"warm": {at: at(1), event: eventInstalled},
			"a":    {at: at(14), event: eventInstalled},
			"b":    {at: at(11), event: eventInstalled}, // before its 200
			"c":    {at: at(130), event: eventInstalled},
			"d":    {at: at(40), event: "esim.activated"},
		},
		unverified: 1, firstUnverified: "bad",
	}
	res := installResults{rate: 50}
	res.tally(calls, got)
	if res.installed != 5 || res.errors != 1 || res.firstErr != "HTTP 404" || res.missing != 2 || res.early != 1 || res.earliest != -time.Millisecond || res.unverified != 1 {
		t.Fatalf("%+v", res)
	}
	if l := res.latency; l.Requests != 3 || l.P50 != 10*time.Millisecond || l.Max != 100*time.Millisecond || l.Rate != 50 {
		t.Errorf("latency %+v: want 0, 10 and 100 ms", l)
	}
	if c := res.calls; c.Requests != 5 || c.Errors != 1 || c.Max != 10*time.Millisecond {
		t.Errorf("calls %+v", c)
	}
	if res.met() {
		t.Error("goal met with installs missing")
	}
	res = installResults{latency: result{Requests: 3, P99: 100 * time.Millisecond}}
	if !res.met() {
		t.Error("p99 of 100 ms misses a goal of within 100 ms")
	}
	res.latency.P99++
	if res.met() {
		t.Error("p99 over 100 ms meets the goal")
	}
}

// The sustainable rate is the slower of the installs and their webhooks,
// counting only the webhooks of installs answered 200.
func TestSustainableRate(t *testing.T) {
	start := time.Now()
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	calls := []installCall{
		{id: "a", due: at(0), read: at(10)},
		{id: "b", due: at(0), read: at(10)},
		{id: "c", due: at(10), read: at(20)},
		{id: "d", due: at(10), read: at(20), err: errors.New("HTTP 500")},
	}
	got := receiverState{arrivals: map[string]arrival{
		"a": {at: at(500), event: eventInstalled},
		"b": {at: at(1500), event: eventInstalled},
		"d": {at: at(3000), event: eventInstalled},
		"c": {at: at(2500), event: "esim.activated"},
	}}
	n, span := webhooksSince(calls, got, start)
	if n != 2 || span != 1500*time.Millisecond {
		t.Fatalf("webhooksSince: %d in %s, want 2 in 1.5s", n, span)
	}
	probe := spreadOfCalls(calls, 20*time.Millisecond)
	if probe.Requests != 4 || probe.Errors != 1 || probe.RPS() != 150 {
		t.Fatalf("probe %+v, %.0f/s", probe, probe.RPS())
	}
	// The webhooks are slower: 2 in 1.5 s.
	if r := sustainableRate(probe, n, span); r < 1.33 || r > 1.34 {
		t.Errorf("sustainable %.3f/s, want 1.333", r)
	}
	// The calls are slower.
	if r := sustainableRate(result{Requests: 3, Elapsed: 3 * time.Second}, 100, time.Second); r != 1 {
		t.Errorf("sustainable %.3f/s, want 1", r)
	}
	if r := sustainableRate(probe, 0, 0); r != 0 {
		t.Errorf("no webhook: %.3f/s", r)
	}
	if ids := answered(calls); strings.Join(ids, ",") != "a,b,c" {
		t.Errorf("answered %v", ids)
	}
}

// An order's 201 names each of its eSIMs; one with fewer is an error.
func TestEsimIDs(t *testing.T) {
	answer := []byte(`{"data":{"id":"o1","status":"completed","esims":[{"id":"e1"},{"id":"e2"}]}}`)
	ids, err := esimIDs(answer, 2)
	if err != nil || strings.Join(ids, ",") != "e1,e2" {
		t.Errorf("esimIDs: %v, %v", ids, err)
	}
	if _, err := esimIDs(answer, 3); err == nil || !strings.Contains(err.Error(), "2 eSIM ids, want 3") {
		t.Errorf("short order: %v", err)
	}
	if _, err := esimIDs([]byte(`{"data":{"status":"failed","esims":[]}}`), 1); err == nil || !strings.Contains(err.Error(), "order failed") {
		t.Errorf("failed order: %v", err)
	}
	if _, err := esimIDs([]byte(`<html>`), 1); err == nil {
		t.Error("not JSON: no error")
	}
}

func TestOnlyLifecycleAndUsageSelectTheirPhases(t *testing.T) {
	var stderr bytes.Buffer
	err := run(context.Background(), []string{"-help"}, func(string) string { return "" }, io.Discard, &stderr)
	for _, want := range []string{"lifecycle (a sandbox eSIM's simulated install", "or usage (usage readings applied by ordering"} {
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), want) {
			t.Errorf("-help lacks %q (%v):\n%s", want, err, stderr.String())
		}
	}
	for _, only := range []string{onlyLifecycle, onlyUsage} {
		c := config{only: only}
		if !c.runs(only) || c.runs(onlyPlans) || c.runs(onlyOrders) || c.runs(onlyWebhooks) || !(config{}).runs(only) {
			t.Errorf("-only %s selects the wrong phases", only)
		}
	}
	if c := (config{only: onlyLifecycle}); c.runs(onlyUsage) {
		t.Error("-only lifecycle runs the usage rows")
	}
}

func TestReportInstalls(t *testing.T) {
	ms := time.Millisecond
	installs := &installResults{
		planID: "plan-1", probe: result{Requests: 2000, Elapsed: 5 * time.Second, P50: 30 * ms, P99: 100 * ms},
		probeWebhooks: 2000, probeSpan: 10 * time.Second, sustainable: 200, rate: 100, duration: 20 * time.Second, warmup: 2 * time.Second,
		latency:   result{Requests: 2000, Rate: 100, P50: 5 * ms, P90: 8 * ms, P99: 18 * ms, Max: 44 * ms},
		calls:     result{Requests: 2000, Rate: 100, P50: 6 * ms, P90: 7 * ms, P99: 17 * ms, Max: 90 * ms},
		installed: 2000, deliveryBytes: 1977,
		control: result{Requests: 2000, Rate: 100, P50: ms / 4, P90: ms / 2, P99: ms, Max: 4 * ms},
	}
	r := report{cfg: config{duration: 10 * time.Second, warmup: 2 * time.Second, workers: []int{16}, only: onlyLifecycle, webhookDuration: 20 * time.Second, installProbe: 2000},
		cpus: 2, goVersion: "go1.26", installs: installs}
	md := r.markdown()
	for _, want := range []string{
		"-webhook-duration 20s -only lifecycle`",
		"## Install to webhook\n\nSandbox eSIMs of plan plan-1 installed with `POST /v1/sandbox/esims/{id}/simulate`",
		"at half the sustainable rate for 20s after 2s of warm-up", "(1977-byte body) ([method](docs/benchmarks.md#install-to-webhook)).",
		"installed 2000 eSIMs at 400/s (p50 30.00 ms, p99 100.00 ms a call, 0 errors); 2000 of their webhooks came within 10s of its start (200/s): **200 installs/s**, so the open loop ran at 100/s.",
		"| " + installTarget + " | 100 | 2000 | 5.00 ms | 8.00 ms | 18.00 ms | 44.00 ms | 0 |",
		"| " + installControlTarget + " | 100 | 2000 | 0.25 ms | 0.50 ms | 1.00 ms | 4.00 ms | 0 |",
		"| " + installCallsRow + " | 100 | 2000 | 6.00 ms | 7.00 ms | 17.00 ms | 90.00 ms | 0 |",
		"2000 of the 2000 installs answered 200 had their webhook, verified; 0 missing",
		"Install webhook / control: p50 **20×** (5.00 ms / 0.25 ms), p99 **18×** (18.00 ms / 1.00 ms)",
		"| Install to webhook | esim.installed webhook p99 after the install's 200, at half the sustainable rate (100/s): <= 100.00 ms | 18.00 ms | met |",
		"| Install to webhook | control: the receiver's round trip, p99: <= 100.00 ms | 1.00 ms | met (not a target) |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, unwanted := range []string{"## Results", "## Orders", "## Webhooks", "## Usage"} {
		if strings.Contains(md, unwanted) {
			t.Errorf("a lifecycle-only report has %q", unwanted)
		}
	}
	installs.missing = 1
	if md := r.markdown(); !strings.Contains(md, "(100/s): <= 100.00 ms | 18.00 ms | not met |") || !strings.Contains(md, "1 missing") {
		t.Errorf("a missing webhook misses the goal:\n%s", md)
	}
}

// checkInstalls holds the install rows of a short run on a real platform
// (TestWebhookPhaseAgainstThePlatform) to every install answered and its
// webhook come, verified, once.
func checkInstalls(t *testing.T, res installResults) {
	t.Helper()
	if p := res.probe; p.Requests < 1 || p.Errors != 0 || res.probeWebhooks != p.Requests || res.sustainable <= 0 || res.rate != res.sustainable/2 {
		t.Errorf("probe: %d installs, %d errors (%s), %d webhooks in %s: sustainable %.1f/s, open loop at %.1f/s",
			p.Requests, p.Errors, p.FirstErr, res.probeWebhooks, res.probeSpan, res.sustainable, res.rate)
	}
	l := res.latency
	if res.installed < 1 || res.errors != 0 || res.missing != 0 || res.unverified != 0 || res.duplicates != 0 || l.Requests != res.installed {
		t.Errorf("%d installs, %d errors (%s), %d webhooks of which %d missing, %d unverified (%s), %d duplicates: want every install's webhook once",
			res.installed, res.errors, res.firstErr, l.Requests, res.missing, res.unverified, res.firstUnverified, res.duplicates)
	}
	if l.P50 > l.P99 || l.P99 > l.Max || l.Max > deliveryGrace {
		t.Errorf("latency p50 %s, p99 %s, max %s", l.P50, l.P99, l.Max)
	}
	if c := res.control; c.Requests < 1 || c.Errors != 0 || res.deliveryBytes < 100 {
		t.Errorf("control: %d requests, %d errors (%s), of a %d-byte delivery", c.Requests, c.Errors, c.FirstErr, res.deliveryBytes)
	}
}
