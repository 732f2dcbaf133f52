package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/services/webhook"
)

// event is a webhook event as esimctl prints it with --json; Payload and
// ResponseBody only events get and send-test --wait print.
type event struct {
	ID          string          `json:"id"`
	Event       string          `json:"event"`
	AccountID   string          `json:"account_id"`
	Environment string          `json:"environment"`
	OrderID     *string         `json:"order_id"`
	Status      string          `json:"status"`
	URL         *string         `json:"url"`
	CreatedAt   *string         `json:"created_at"`
	Payload     json.RawMessage `json:"payload"`
	Attempts    []struct {
		Number       int32   `json:"number"`
		StartedAt    *string `json:"started_at"`
		DurationMS   int64   `json:"duration_ms"`
		StatusCode   *int32  `json:"status_code"`
		Error        *string `json:"error"`
		ResponseBody *string `json:"response_body"`
	} `json:"attempts"`
}

func eventIDs(events []event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

var sentPing = regexp.MustCompile(`^sent ping (evt_[0-9a-f]{32}) for account (\S+) in (\S+); its delivery to (\S+) follows\n` +
	"watch it with `esimctl events get --event (evt_[0-9a-f]{32})` or `esimctl events list --account (\\S+) --env (\\S+) --type ping`\n$")

func TestSendTestAndEvents(t *testing.T) {
	env := map[string]string{"ESIM_WEBHOOK_URL": startWebhook(t)}
	answering := receiver(t, http.StatusOK, "thanks\n\tfor the ping")
	broken := receiver(t, http.StatusInternalServerError, `{"error":"database down"}`)
	accts := newAccounts(t, env, 2)
	acct, other := accts[0], accts[1]
	esimctl(t, env, "webhooks", "set", "--account", acct, "--env", "sandbox", "--url", answering.URL).ok(t)
	esimctl(t, env, "webhooks", "set", "--account", other, "--env", "sandbox", "--url", broken.URL).ok(t)
	listOf := func(flags ...string) ([]event, pagination) {
		t.Helper()
		var events []event
		args := append([]string{"events", "list", "--json"}, flags...)
		p := paginationOf(t, esimctl(t, env, args...).ok(t).data(t, &events))
		return events, p
	}

	if text := esimctl(t, env, "events", "list", "--account", acct, "--env", "sandbox").ok(t).stdout; text != "account "+acct+" has no sandbox webhook events\n" {
		t.Errorf("events list of a scope without events: %q", text)
	}

	// send-test: the ping's id, and how to watch its delivery.
	out := esimctl(t, env, "webhooks", "send-test", "--account", acct, "--env", "sandbox").ok(t).stdout
	m := sentPing.FindStringSubmatch(out)
	if m == nil || m[2] != acct || m[3] != "sandbox" || m[4] != answering.URL || m[5] != m[1] || m[6] != acct || m[7] != "sandbox" {
		t.Fatalf("webhooks send-test:\n%s", out)
	}
	ping := m[1]

	// The command it suggests shows the delivery once it is made.
	var listed []event
	eventually(t, 15*time.Second, "the ping is not listed as delivered", func() bool {
		listed, _ = listOf("--account", acct, "--env", "sandbox", "--type", "ping")
		return len(listed) == 1 && listed[0].Status == "delivered"
	})
	e := listed[0]
	if e.ID != ping || e.Event != "ping" || e.AccountID != acct || e.Environment != "sandbox" || e.OrderID != nil ||
		e.URL == nil || *e.URL != answering.URL || e.CreatedAt == nil || e.Payload != nil || len(e.Attempts) != 1 {
		t.Fatalf("listed ping = %+v", e)
	}
	if a := e.Attempts[0]; a.Number != 1 || a.StatusCode == nil || *a.StatusCode != 200 || a.Error != nil || a.StartedAt == nil || a.DurationMS < 0 || a.ResponseBody != nil {
		t.Errorf("the ping's attempt = %+v", a)
	}
	if got := deliveriesOf(answering, ping); len(got) != 1 {
		t.Errorf("the receiver got the ping %d times, want once", len(got))
	}

	table := esimctl(t, env, "events", "list", "--account", acct, "--env", "sandbox").ok(t).stdout
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^ID\s+TYPE\s+STATUS\s+ORDER\s+ATTEMPTS\s+LAST ANSWER\s+CREATED$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^`+ping+`\s+ping\s+delivered\s+-\s+1\s+200\s+`+*e.CreatedAt+`$`).MatchString(lines[1]) {
		t.Errorf("events list table:\n%s", table)
	}

	// get: the event with its payload and every attempt's answer.
	var got event
	esimctl(t, env, "events", "get", "--event", ping, "--json").ok(t).data(t, &got)
	var payload struct {
		ID          string `json:"id"`
		Event       string `json:"event"`
		Environment string `json:"environment"`
		Data        struct {
			Message string `json:"message"`
		} `json:"data"`
	}
	if err := json.Unmarshal(got.Payload, &payload); err != nil {
		t.Fatalf("events get --json payload is not the JSON sent: %v\n%s", err, got.Payload)
	}
	if got.ID != ping || got.Status != "delivered" || payload.ID != ping || payload.Event != "ping" || payload.Environment != "sandbox" || payload.Data.Message == "" ||
		len(got.Attempts) != 1 || got.Attempts[0].ResponseBody == nil || *got.Attempts[0].ResponseBody != "thanks\n\tfor the ping" {
		t.Errorf("events get --json = %+v, payload %+v", got, payload)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, got.Payload); err != nil {
		t.Fatal(err)
	}
	if d := deliveriesOf(answering, ping); len(d) == 1 && compact.String() != string(d[0].Body) {
		t.Errorf("events get payload %s, the receiver got %s", compact.String(), d[0].Body)
	}
	text := esimctl(t, env, "events", "get", strings.ToUpper(ping[:4])+ping[4:]).ok(t).stdout
	line(t, text, `id:\s+`+ping)
	line(t, text, `event:\s+ping`)
	line(t, text, `account:\s+`+acct)
	line(t, text, `order:\s+-`)
	line(t, text, `status:\s+delivered`)
	line(t, text, `url:\s+`+regexp.QuoteMeta(answering.URL))
	line(t, text, `attempts:\s+1`)
	line(t, text, `#\s+STARTED\s+DURATION\s+STATUS\s+ERROR\s+RESPONSE`)
	// The answer on one line, whatever its whitespace.
	line(t, text, `1\s+\S+\s+\d+ ms\s+200\s+-\s+thanks for the ping`)
	line(t, text, `payload:`)
	line(t, text, `  "event": "ping",`)

	// --wait follows the delivery: a receiver that answers 500 fails all
	// three attempts, and the command with it.
	r := esimctl(t, env, "webhooks", "send-test", "--account", other, "--env", "sandbox", "--wait")
	r.wantError(t, 1, " was not delivered: failed (3 attempts, the last: 500)", "`esimctl events get --event evt_")
	failed := regexp.MustCompile(`ping (evt_[0-9a-f]{32}) was not delivered`).FindStringSubmatch(r.stderr)[1]
	if n := len(deliveriesOf(broken, failed)); n != webhook.MaxAttempts {
		t.Errorf("the failing receiver got the ping %d times, want %d", n, webhook.MaxAttempts)
	}
	var failedEvent event
	esimctl(t, env, "events", "get", failed, "--json").ok(t).data(t, &failedEvent)
	if len(failedEvent.Attempts) != webhook.MaxAttempts || failedEvent.Status != "failed" {
		t.Fatalf("the failed ping = %+v", failedEvent)
	}
	for i, a := range failedEvent.Attempts {
		if a.Number != int32(i+1) || a.StatusCode == nil || *a.StatusCode != 500 || a.ResponseBody == nil || *a.ResponseBody != `{"error":"database down"}` {
			t.Errorf("attempt %d of the failed ping = %+v", i+1, a)
		}
	}
	failedTable := esimctl(t, env, "events", "list", "--status", "failed").ok(t).stdout
	if !regexp.MustCompile(`(?m)^` + failed + `\s+ping\s+failed\s+-\s+3\s+500`).MatchString(failedTable) {
		t.Errorf("events list --status failed:\n%s", failedTable)
	}

	// --wait on a receiver that answers: exit 0 and the event with its
	// attempts, as events get prints them.
	var waited event
	esimctl(t, env, "webhooks", "send-test", "--account", acct, "--env", "sandbox", "--wait", "--json").ok(t).data(t, &waited)
	if waited.Status != "delivered" || waited.Event != "ping" || len(waited.Attempts) != 1 || *waited.Attempts[0].StatusCode != 200 || waited.Payload == nil {
		t.Errorf("send-test --wait --json = %+v", waited)
	}

	// Filters: an account's events, every account's, by status, type,
	// order; newest first throughout.
	mine, p := listOf("--account", acct, "--env", "sandbox")
	if strings.Join(eventIDs(mine), " ") != waited.ID+" "+ping || p != (pagination{Page: 1, Limit: webhook.DefaultPageLimit, Total: 2}) {
		t.Errorf("events of the account: %v, %+v; want %s %s", eventIDs(mine), p, waited.ID, ping)
	}
	all, _ := listOf()
	if strings.Join(eventIDs(all), " ") != waited.ID+" "+failed+" "+ping {
		t.Errorf("every account's events: %v; want %s %s %s", eventIDs(all), waited.ID, failed, ping)
	}
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{[]string{"--status", "failed"}, []string{failed}},
		{[]string{"--status", "delivered"}, []string{waited.ID, ping}},
		{[]string{"--status", "pending"}, []string{}},
		{[]string{"--status", "no_endpoint"}, []string{}},
		{[]string{"--account", other, "--env", "sandbox", "--status", "delivered"}, []string{}},
		{[]string{"--account", strings.ToUpper(other), "--env", "sandbox"}, []string{failed}},
		{[]string{"--account", acct, "--env", "live"}, []string{}},
		{[]string{"--type", "ping"}, []string{waited.ID, failed, ping}},
		{[]string{"--type", "order.completed"}, []string{}},
		{[]string{"--type", "esim.usage"}, []string{}},
		{[]string{"--type", "TOPUP.completed"}, []string{}},
		// What --type was called before.
		{[]string{"--event", "ping"}, []string{waited.ID, failed, ping}},
		{[]string{"--order", uuid.NewString()}, []string{}},
	} {
		got, p := listOf(tc.flags...)
		if !slices.Equal(eventIDs(got), tc.want) || p.Total != int32(len(tc.want)) {
			t.Errorf("events list %s: %v (total %d), want %v", strings.Join(tc.flags, " "), eventIDs(got), p.Total, tc.want)
		}
	}
	if text := esimctl(t, env, "events", "list", "--type", "order.failed").ok(t).stdout; text != "no events on page 1 (0 in total)\n" {
		t.Errorf("events list with a filter nothing matches: %q", text)
	}

	// Paging walks every event once, in order.
	var walked []string
	for _, page := range []string{"1", "2"} {
		got, p := listOf("--limit", "2", "--page", page)
		walked = append(walked, eventIDs(got)...)
		if p.Total != 3 || p.HasMore != (page == "1") {
			t.Errorf("events list --page %s: pagination %+v", page, p)
		}
	}
	if !slices.Equal(walked, eventIDs(all)) {
		t.Errorf("pages of 2 walk %v, want %v", walked, eventIDs(all))
	}
	if text := esimctl(t, env, "events", "list", "--limit", "2").ok(t).stdout; !strings.HasSuffix(text, "page 1 of 2 (3 events; --page 2 for the next)\n") {
		t.Errorf("events list --limit 2:\n%s", text)
	}

	// An unknown event.
	unknown := "evt_" + strings.Repeat("0", 32)
	esimctl(t, env, "events", "get", unknown).wantError(t, 1, "esimctl: get event "+unknown+": not found; `esimctl events list` shows the events there are")
	esimctl(t, env, "events", "get", unknown, "--json").wantError(t, 1, "esimctl: get event "+unknown+": not found")
}
