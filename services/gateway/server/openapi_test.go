package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/esimplatform/esim/proto/limits"
	webhookv1 "github.com/esimplatform/esim/proto/webhook/v1"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// npmTools is where `make npm-tools` installs the pinned linters: the
// tools cache, under the first 16 hex digits of the lockfile's SHA-256,
// as the Makefile names it.
func npmTools(t *testing.T) string {
	t.Helper()
	lock, err := os.ReadFile("../../../tools/npm/package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv("ESIM_TOOLS_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				t.Fatal(err)
			}
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "esim-tools")
	}
	sum := sha256.Sum256(lock)
	dir := filepath.Join(cache, "npm-"+hex.EncodeToString(sum[:])[:16])
	if _, err := os.Stat(filepath.Join(dir, ".stamp")); err != nil {
		t.Fatalf("Spectral and Redocly are not installed in %s: run `make npm-tools` (make test does)", dir)
	}
	return filepath.Join(dir, "node_modules", ".bin")
}

// TestTheDocumentDescribesWhatIsSent holds the served document to what the
// platform sends, on one platform: the linters, the replays, the webhooks
// and the document's own parts (each check below says what it proves).
func TestTheDocumentDescribesWhatIsSent(t *testing.T) {
	bin := npmTools(t)
	p := start(t, options{})
	lintDocument(t, p, bin)
	replaysAreDocumentedAsSent(t, p)
	webhookDeliveriesMatchTheDocument(t, p)
	documentNamesItsOwnerAndGroups(t, p)
}

// lintDocument lints the document the gateway serves with two linters
// partners' toolchains use: Spectral's OpenAPI ruleset and Redocly's
// recommended one, each pinned (tools/npm). Any error or warning fails;
// so does a linter that is not installed (npmTools).
func lintDocument(t *testing.T, p *platform, bin string) {
	t.Helper()
	dir := t.TempDir()
	doc := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(doc, p.spec, 0o644); err != nil {
		t.Fatal(err)
	}
	rules, err := filepath.Abs("../../../tools/npm")
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
		cmd.Dir = dir
		// No telemetry, no update check: a test talks to nobody.
		cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return out
	}

	// Spectral writes its findings to a file: its stdout mixes JSON with
	// a summary line.
	findings := filepath.Join(dir, "spectral.json")
	out := run("spectral", "lint", "--ruleset", filepath.Join(rules, "spectral.yaml"), "--format", "json", "--output", findings, "--fail-severity", "hint", doc)
	var spectral []struct {
		Code     string   `json:"code"`
		Message  string   `json:"message"`
		Path     []string `json:"path"`
		Severity int      `json:"severity"` // 0 error, 1 warning, 2 info, 3 hint
	}
	raw, err := os.ReadFile(findings)
	if err != nil {
		t.Fatalf("spectral wrote no findings: %v\n%s", err, out)
	}
	if err := json.Unmarshal(raw, &spectral); err != nil {
		t.Fatalf("spectral's findings %s: %v\n%s", raw, err, out)
	}
	for _, f := range spectral {
		if f.Severity <= 1 {
			t.Errorf("spectral: %s at %s: %s", f.Code, strings.Join(f.Path, "."), f.Message)
		} else {
			t.Logf("spectral (info): %s at %s: %s", f.Code, strings.Join(f.Path, "."), f.Message)
		}
	}

	out = run("redocly", "lint", "--config", filepath.Join(rules, "redocly.yaml"), "--format", "json", doc)
	var redocly struct {
		Totals struct {
			Errors   int `json:"errors"`
			Warnings int `json:"warnings"`
		} `json:"totals"`
		Problems []struct {
			RuleID   string `json:"ruleId"`
			Severity string `json:"severity"`
			Message  string `json:"message"`
			Location []struct {
				Pointer string `json:"pointer"`
			} `json:"location"`
		} `json:"problems"`
	}
	// Node prints a deprecation banner on stderr, around the JSON.
	start, end := strings.Index(string(out), "{\n"), strings.LastIndex(string(out), "}")
	if start < 0 || end < start || json.Unmarshal(out[start:end+1], &redocly) != nil {
		t.Fatalf("redocly answered no findings:\n%s", out)
	}
	for _, f := range redocly.Problems {
		where := ""
		if len(f.Location) > 0 {
			where = f.Location[0].Pointer
		}
		t.Errorf("redocly %s: %s at %s: %s", f.Severity, f.RuleID, where, f.Message)
	}
	if redocly.Totals.Errors+redocly.Totals.Warnings > 0 {
		t.Errorf("redocly: %d errors, %d warnings", redocly.Totals.Errors, redocly.Totals.Warnings)
	}
}

// openAPIDoc is the served document, loaded as kin-openapi reads it.
func (p *platform) openAPIDoc() *openapi3.T {
	p.t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(p.spec)
	if err != nil {
		p.t.Fatal(err)
	}
	return doc
}

// checkDocumentedHeaders fails for each header of the contract an answer
// carries that the document does not list for its status, and for each
// required one it lacks.
func checkDocumentedHeaders(t *testing.T, what string, resp *openapi3.ResponseRef, r response) {
	t.Helper()
	for _, h := range []string{"Request-Id", "Location", "Idempotent-Replay", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "WWW-Authenticate"} {
		documented := resp.Value.Headers[h]
		if r.header.Get(h) != "" && documented == nil {
			t.Errorf("%s carries %s, which the document does not list for it", what, h)
		}
		if r.header.Get(h) == "" && documented != nil && documented.Value.Required {
			t.Errorf("%s lacks %s, which the document requires", what, h)
		}
	}
}

// replaysAreDocumentedAsSent: a replay's 200 is the order with
// Location and Idempotent-Replay: true, as the document says (a generated
// client decodes it as it decodes the 201); a first 201 carries no
// Idempotent-Replay and the document promises none; a replayed 502 carries
// it, documented.
func replaysAreDocumentedAsSent(t *testing.T, p *platform) {
	t.Helper()
	pt := p.partner("USD", sandbox, 100_00)
	fixed, _, _ := p.planOf(pt.key, "fixed")
	create := p.openAPIDoc().Paths.Find("/orders").Post

	first := pt.order("replayed", orderBody(fixed, ""))
	replay := pt.order("replayed", orderBody(fixed, ""))
	if first.status != http.StatusCreated || replay.status != http.StatusOK || replay.header.Get("Idempotent-Replay") != "true" || first.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("order then replay: %d (Idempotent-Replay %q), %d (%q); want 201 without, 200 with true",
			first.status, first.header.Get("Idempotent-Replay"), replay.status, replay.header.Get("Idempotent-Replay"))
	}
	created, replayed := create.Responses.Status(201), create.Responses.Status(200)
	checkDocumentedHeaders(t, "201", created, first)
	checkDocumentedHeaders(t, "200 replay", replayed, replay)
	if h := replayed.Value.Headers["Idempotent-Replay"]; h == nil || !h.Value.Required {
		t.Error("the 200 replay does not require Idempotent-Replay")
	}
	// The replay's body is the order, by the schema a client decodes with
	// (p.send validated it against that schema already).
	schema := replayed.Value.Content.Get("application/json")
	if schema == nil || schema.Schema.Ref != created.Value.Content.Get("application/json").Schema.Ref {
		t.Fatalf("the 200 replay's body is documented as %+v, not as the 201's order", schema)
	}
	var a, b struct{ Data orderJSON }
	first.json(t, &a)
	replay.json(t, &b)
	if !equalJSON(t, a, b) {
		t.Errorf("the replay's order %+v differs from the first %+v", b, a)
	}

	failing := orderBody(fixed, `"customer":{"reference":"sandbox:provider_error"}`)
	failedFirst, failedReplay := pt.order("failing", failing), pt.order("failing", failing)
	if failedFirst.status != http.StatusBadGateway || failedReplay.status != http.StatusBadGateway || failedReplay.header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("failing order then replay: %d, %d (Idempotent-Replay %q)", failedFirst.status, failedReplay.status, failedReplay.header.Get("Idempotent-Replay"))
	}
	checkDocumentedHeaders(t, "502", create.Responses.Status(502), failedFirst)
	checkDocumentedHeaders(t, "502 replay", create.Responses.Status(502), failedReplay)
}

// TestTopUpReplaysAreDocumentedAsSent: a top-up's 201 and its replay's
// 200 carry the headers the document lists for them, Idempotent-Replay
// required on the replay. A platform of its own: the top-up's event is
// not the webhook deliveries' business above.
func TestTopUpReplaysAreDocumentedAsSent(t *testing.T) {
	p := start(t, options{})
	pt := p.partner("USD", sandbox, 100_00)
	fixed, _, _ := p.planOf(pt.key, "fixed")
	esimID := pt.orderEsim(fixed)
	topUp := p.openAPIDoc().Paths.Find("/esims/{id}/topups").Post
	body := orderBody(fixed, "")
	first, replay := pt.topUpEsim(esimID, "top-up", body), pt.topUpEsim(esimID, "top-up", body)
	if first.status != http.StatusCreated || replay.status != http.StatusOK || replay.header.Get("Idempotent-Replay") != "true" || first.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("top-up then replay: %d (Idempotent-Replay %q), %d (%q)", first.status, first.header.Get("Idempotent-Replay"), replay.status, replay.header.Get("Idempotent-Replay"))
	}
	checkDocumentedHeaders(t, "201", topUp.Responses.Status(201), first)
	checkDocumentedHeaders(t, "200 replay", topUp.Responses.Status(200), replay)
	if h := topUp.Responses.Status(200).Value.Headers["Idempotent-Replay"]; h == nil || !h.Value.Required {
		t.Error("the 200 replay does not require Idempotent-Replay")
	}
}

// checkWebhook holds a delivery to the document's webhooks section: its
// body to its event's schema, its signing headers to theirs.
func checkWebhook(t *testing.T, doc *openapi3.T, d webhooktest.Delivery) {
	t.Helper()
	var body struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(d.Body, &body); err != nil {
		t.Fatalf("delivery %s: %v", d.Body, err)
	}
	item := doc.Webhooks[body.Event]
	if item == nil || item.Post == nil {
		t.Fatalf("the document has no webhook %q", body.Event)
	}
	var value any
	_ = json.Unmarshal(d.Body, &value)
	schema := item.Post.RequestBody.Value.Content.Get("application/json").Schema.Value
	if err := schema.VisitJSON(value); err != nil {
		t.Errorf("the %s delivery does not match the document: %v\nbody: %s", body.Event, err, d.Body)
	}
	for _, param := range item.Post.Parameters {
		p := param.Value
		v := d.Header.Get(p.Name)
		if v == "" {
			if p.Required {
				t.Errorf("the %s delivery lacks %s", body.Event, p.Name)
			}
			continue
		}
		if err := p.Schema.Value.VisitJSON(v); err != nil {
			t.Errorf("the %s delivery's %s %q does not match the document: %v", body.Event, p.Name, v, err)
		}
	}
}

// webhookDeliveriesMatchTheDocument: every event the platform sends
// is in the document's webhooks section, and a real delivery of each
// (order.completed, order.failed, and ping, signed by a current and a
// rotated-out secret at once) matches its schema and signing headers.
func webhookDeliveriesMatchTheDocument(t *testing.T, p *platform) {
	t.Helper()
	doc := p.openAPIDoc()
	var documented, sent []string
	for name := range doc.Webhooks {
		documented = append(documented, name)
	}
	// The contract's list: proto/limits names every event the platform
	// sends, the eSIM's included.
	sent = slices.Clone(limits.EventTypes)
	slices.Sort(documented)
	slices.Sort(sent)
	if !slices.Equal(documented, sent) {
		t.Fatalf("the document's webhooks are %v; the platform sends %v", documented, sent)
	}

	pt := p.partner("EUR", sandbox, 100_00)
	fixed, _, _ := p.planOf(pt.key, "fixed")
	hooks := webhooktest.NewReceiver(t)
	hooks.Trust(pt.setWebhook(hooks.URL))
	scope := &webhookv1.Scope{AccountId: pt.accountID, Environment: pt.env}
	rotated, err := p.webhooks.RotateSecret(t.Context(), &webhookv1.RotateSecretRequest{Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	hooks.Trust(rotated.GetSecret())
	if r := pt.order("", orderBody(fixed, "")); r.status != http.StatusCreated {
		t.Fatalf("order: %d %s", r.status, r.body)
	}
	if r := pt.order("", orderBody(fixed, `"customer":{"reference":"sandbox:provider_error"}`)); r.status != http.StatusBadGateway {
		t.Fatalf("failing order: %d %s", r.status, r.body)
	}
	if _, err := p.webhooks.SendTestEvent(t.Context(), &webhookv1.SendTestEventRequest{Scope: scope}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, d := range hooks.Wait(t, 3, 20*time.Second) {
		if !strings.Contains(d.Header.Get("webhook-signature"), " ") {
			t.Errorf("signature %q: want two, the rotated-out secret's too", d.Header.Get("webhook-signature"))
		}
		checkWebhook(t, doc, d)
		var b hookBody
		_ = json.Unmarshal(d.Body, &b)
		seen[b.Event] = true
	}
	if len(seen) != 3 {
		t.Errorf("events delivered: %v; want each of %v", seen, sent)
	}
}

// documentNamesItsOwnerAndGroups: the document's info has a contact
// and a license; every operation (webhooks included) has a tag the
// document defines, a summary and a description; every path id and
// order_id is documented as a UUID.
func documentNamesItsOwnerAndGroups(t *testing.T, p *platform) {
	t.Helper()
	doc := p.openAPIDoc()
	if doc.Info.Contact == nil || doc.Info.Contact.Name == "" || doc.Info.License == nil || doc.Info.License.Name == "" {
		t.Errorf("info: contact %+v, license %+v", doc.Info.Contact, doc.Info.License)
	}
	defined := map[string]bool{}
	for _, tag := range doc.Tags {
		defined[tag.Name] = tag.Description != ""
	}
	used := map[string]bool{}
	check := func(where string, op *openapi3.Operation) {
		if len(op.Tags) != 1 || !defined[op.Tags[0]] {
			t.Errorf("%s: tags %v, want one the document defines and describes", where, op.Tags)
		}
		for _, tag := range op.Tags {
			used[tag] = true
		}
		if op.Summary == "" || op.Description == "" || op.OperationID == "" {
			t.Errorf("%s: summary %q, description %q, operationId %q", where, op.Summary, op.Description, op.OperationID)
		}
		for _, param := range op.Parameters {
			if p := param.Value; (p.In == "path" || strings.HasSuffix(p.Name, "_id")) && p.Schema.Value.Format != "uuid" {
				t.Errorf("%s: parameter %s is not documented as a UUID", where, p.Name)
			}
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			check(method+" "+path, op)
		}
	}
	for name, item := range doc.Webhooks {
		check("webhook "+name, item.Post)
	}
	for tag := range defined {
		if !used[tag] {
			t.Errorf("tag %s is defined but no operation has it", tag)
		}
	}
	// A malformed id is still not_found, as an unknown one is: the format
	// is said in the document, not enforced as a 400.
	_, _, key := p.account("USD", sandbox)
	p.expectError(p.get("/v1/orders/not-a-uuid", bearer(key)), http.StatusNotFound, "not_found")
}
