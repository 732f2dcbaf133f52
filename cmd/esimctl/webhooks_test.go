package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/kafka/kafkatest"
	"github.com/esimplatform/esim/services/webhook"
	"github.com/esimplatform/esim/services/webhook/webhooktest"
)

// startWebhook runs the real webhook service on its own database and
// Kafka, delivering over real HTTP.
func startWebhook(t *testing.T) string {
	t.Helper()
	return webhooktest.Start(t, webhooktest.Config(t, kafkatest.New(t)))
}

// endpoint is a webhook endpoint as esimctl prints it with --json.
type endpoint struct {
	AccountID               string  `json:"account_id"`
	Environment             string  `json:"environment"`
	URL                     string  `json:"url"`
	Secret                  string  `json:"secret"`
	SecretCreatedAt         *string `json:"secret_created_at"`
	PreviousSecretExpiresAt *string `json:"previous_secret_expires_at"`
	UpdatedAt               *string `json:"updated_at"`
}

// receiver is a partner's webhook endpoint answering every delivery with
// status and body; it checks signatures with the public Standard Webhooks
// library, against the secrets it is told to Trust.
func receiver(t *testing.T, status int, body string) *webhooktest.Receiver {
	t.Helper()
	return webhooktest.NewReceiver(t, webhooktest.Answer{Status: status, Body: body})
}

// deliveriesOf returns the deliveries of one event, in the order they
// came.
func deliveriesOf(rc *webhooktest.Receiver, eventID string) []webhooktest.Delivery {
	var out []webhooktest.Delivery
	for _, d := range rc.Deliveries() {
		if d.ID() == eventID {
			out = append(out, d)
		}
	}
	return out
}

// eventually polls cond until it holds, failing the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// line matches one whole line of a command's text output.
func line(t *testing.T, text, pattern string) {
	t.Helper()
	if !regexp.MustCompile(`(?m)^` + pattern + `$`).MatchString(text) {
		t.Errorf("no line matching %s in:\n%s", pattern, text)
	}
}

const secretNoticeFragment = "keep it secret; receivers verify with it"

func TestWebhooksSetShowRotate(t *testing.T) {
	env := map[string]string{"ESIM_WEBHOOK_URL": startWebhook(t)}
	recv := receiver(t, http.StatusOK, `{"ok":true}`)
	acct := newAccounts(t, env, 1)[0]
	sandbox := func(args ...string) []string {
		return append(append([]string{}, args...), "--account", acct, "--env", "sandbox")
	}
	live := func(args ...string) []string {
		return append(append([]string{}, args...), "--account", acct, "--env", "live")
	}
	howToSet := "; set one with `esimctl webhooks set --account " + acct + " --env sandbox --url URL`"

	// Nothing set: show, rotate-secret and send-test say so, and how to set one.
	esimctl(t, env, sandbox("webhooks", "show")...).wantError(t, 1, "esimctl: no webhook URL set for account "+acct+" in sandbox"+howToSet)
	esimctl(t, env, sandbox("webhooks", "show", "--json")...).wantError(t, 1, "esimctl: no webhook URL set for account "+acct+" in sandbox"+howToSet)
	esimctl(t, env, sandbox("webhooks", "rotate-secret")...).
		wantError(t, 1, "esimctl: no webhook URL set for account "+acct+" in sandbox, so no secret to rotate"+howToSet)
	esimctl(t, env, sandbox("webhooks", "send-test")...).
		wantError(t, 1, "esimctl: no webhook URL set for account "+acct+" in sandbox to send a test event to"+howToSet)

	// set: the URL and a fresh whsec_ secret, the notice on stderr only.
	r := esimctl(t, env, sandbox("webhooks", "set", "--url", recv.URL, "--json")...).ok(t)
	var set endpoint
	r.data(t, &set)
	if set.AccountID != acct || set.Environment != "sandbox" || set.URL != recv.URL || !strings.HasPrefix(set.Secret, webhook.SecretPrefix) ||
		len(set.Secret) < len(webhook.SecretPrefix)+40 || set.SecretCreatedAt == nil || set.PreviousSecretExpiresAt != nil || set.UpdatedAt == nil {
		t.Fatalf("webhooks set --json = %+v", set)
	}
	if !strings.Contains(r.stderr, secretNoticeFragment) {
		t.Errorf("webhooks set gives no notice to keep the secret; stderr %q", r.stderr)
	}

	// show: the same endpoint, secret included.
	var shown endpoint
	esimctl(t, env, sandbox("webhooks", "show", "--json")...).ok(t).data(t, &shown)
	if !reflect.DeepEqual(shown, set) {
		t.Errorf("webhooks show --json = %+v, want what set printed: %+v", shown, set)
	}
	text := esimctl(t, env, sandbox("webhooks", "show")...).ok(t).stdout
	line(t, text, `account:\s+`+acct)
	line(t, text, `environment:\s+sandbox`)
	line(t, text, `url:\s+`+regexp.QuoteMeta(recv.URL))
	line(t, text, `secret:\s+`+regexp.QuoteMeta(set.Secret))
	line(t, text, `secret created:\s+`+*set.SecretCreatedAt)
	line(t, text, `previous secret:\s+none`)

	// Another URL replaces the first and keeps the secret.
	moved := recv.URL + "/v2"
	r = esimctl(t, env, sandbox("webhooks", "set", "--url", moved)...).ok(t)
	if first, _, _ := strings.Cut(r.stdout, "\n"); first != "the sandbox events of account "+acct+" are delivered to "+moved {
		t.Errorf("webhooks set text starts %q", first)
	}
	line(t, r.stdout, `secret:\s+`+regexp.QuoteMeta(set.Secret))
	if !strings.Contains(r.stderr, secretNoticeFragment) {
		t.Errorf("webhooks set (text) gives no notice to keep the secret; stderr %q", r.stderr)
	}

	// rotate-secret: a new secret; the old one signs for 24 hours more.
	before := time.Now()
	r = esimctl(t, env, sandbox("webhooks", "rotate-secret", "--json")...).ok(t)
	var rotated endpoint
	r.data(t, &rotated)
	if rotated.Secret == set.Secret || !strings.HasPrefix(rotated.Secret, webhook.SecretPrefix) || rotated.URL != moved || rotated.PreviousSecretExpiresAt == nil {
		t.Fatalf("webhooks rotate-secret --json = %+v, after %+v", rotated, set)
	}
	expires, err := time.Parse(time.RFC3339, *rotated.PreviousSecretExpiresAt)
	if err != nil {
		t.Fatal(err)
	}
	if want := before.Add(webhook.SecretOverlap); expires.Before(want.Add(-time.Minute)) || expires.After(want.Add(time.Minute)) {
		t.Errorf("the previous secret signs until %s, want about %s", expires, want)
	}
	if !strings.Contains(r.stderr, secretNoticeFragment) {
		t.Errorf("webhooks rotate-secret gives no notice to keep the secret; stderr %q", r.stderr)
	}
	text = esimctl(t, env, sandbox("webhooks", "show")...).ok(t).stdout
	line(t, text, `secret:\s+`+regexp.QuoteMeta(rotated.Secret))
	line(t, text, `previous secret:\s+still signs until `+*rotated.PreviousSecretExpiresAt)

	// Deliveries are signed with both: receivers on either verify them.
	recv.Trust(rotated.Secret, set.Secret)
	r = esimctl(t, env, sandbox("webhooks", "send-test", "--wait")...).ok(t)
	m := regexp.MustCompile(`^delivered ping (evt_[0-9a-f]{32}) to ` + regexp.QuoteMeta(moved) + `\n`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("webhooks send-test --wait:\n%s", r.stdout)
	}
	got := deliveriesOf(recv, m[1])
	if len(got) != 1 || !got[0].VerifiedBy(rotated.Secret) || !got[0].VerifiedBy(set.Secret) {
		t.Errorf("ping %s reached the receiver as %+v; want once, signed with the new and the previous secret", m[1], got)
	}

	// A live URL must be https: refused in the service's words, exit 1,
	// and nothing is stored.
	esimctl(t, env, live("webhooks", "set", "--url", "http://partner.example/hooks")...).
		wantError(t, 1, "esimctl: set the live webhook URL of account "+acct+": the webhook service refused http://partner.example/hooks: must be https in live; nothing was stored")
	// So must one that leads inside, checked when it is set.
	esimctl(t, env, live("webhooks", "set", "--url", "https://localhost:8087/hooks")...).
		wantError(t, 1, "the webhook service refused https://localhost:8087/hooks: must not resolve to a loopback, private or link-local address in live: localhost resolves to ", "; nothing was stored")
	esimctl(t, env, live("webhooks", "show")...).wantError(t, 1, "esimctl: no webhook URL set for account "+acct+" in live; set one with")
	esimctl(t, env, live("webhooks", "rotate-secret", "--json")...).wantError(t, 1, "esimctl: no webhook URL set for account "+acct+" in live, so no secret to rotate")

	// An https one is taken; live has its own secret, and its rotation
	// says until when the previous one signs.
	var liveSet endpoint
	esimctl(t, env, live("webhooks", "set", "--url", "https://partner.example/hooks", "--json")...).ok(t).data(t, &liveSet)
	if liveSet.Environment != "live" || liveSet.URL != "https://partner.example/hooks" || liveSet.Secret == rotated.Secret || liveSet.Secret == set.Secret {
		t.Errorf("live endpoint = %+v", liveSet)
	}
	text = esimctl(t, env, live("webhooks", "rotate-secret")...).ok(t).stdout
	if first, _, _ := strings.Cut(text, "\n"); first != "rotated the live webhook secret of account "+acct {
		t.Errorf("webhooks rotate-secret text starts %q", first)
	}
	line(t, text, `previous secret:\s+still signs until \S+`)
	line(t, text, `the previous secret keeps signing beside the new one until \S+: switch receivers to the new one before then`)
	if strings.Contains(text, liveSet.Secret) {
		t.Errorf("rotate-secret printed the rotated-out secret:\n%s", text)
	}
	var shownLive endpoint
	esimctl(t, env, live("webhooks", "show", "--json")...).ok(t).data(t, &shownLive)
	if shownLive.Secret == liveSet.Secret || shownLive.PreviousSecretExpiresAt == nil {
		t.Errorf("live endpoint after a rotation = %+v", shownLive)
	}
	// The sandbox endpoint is another: untouched.
	esimctl(t, env, sandbox("webhooks", "show", "--json")...).ok(t).data(t, &shown)
	if shown.Secret != rotated.Secret || shown.URL != moved {
		t.Errorf("sandbox endpoint after live changes = %+v", shown)
	}

	// A rotation that got no answer may have been made: the error says
	// to look before rotating again, and show tells.
	viaLost := map[string]string{"ESIM_WEBHOOK_URL": carriedOutNeverAnswered(t, env["ESIM_WEBHOOK_URL"]), "ESIM_ACCOUNTS_URL": env["ESIM_ACCOUNTS_URL"]}
	esimctl(t, viaLost, "--timeout", "1s", "webhooks", "rotate-secret", "--account", acct, "--env", "sandbox").
		wantError(t, 1, "esimctl: rotate the sandbox webhook secret of account "+acct+": no answer from the webhook service",
			"the secret may have been rotated: check when it was made with `esimctl webhooks show` before running it again")
	esimctl(t, env, sandbox("webhooks", "show", "--json")...).ok(t).data(t, &shown)
	if shown.Secret == rotated.Secret || *shown.SecretCreatedAt < *rotated.SecretCreatedAt {
		t.Errorf("after a rotation that got no answer, show = %+v; want a newer secret than %+v", shown, rotated)
	}
	r = esimctl(t, viaLost, "--timeout", "1s", "webhooks", "set", "--account", acct, "--env", "sandbox", "--url", moved)
	r.wantError(t, 1, "no answer from the webhook service", "it may have taken effect: running it again is safe")
}

// carriedOutNeverAnswered is a proxy to a service that passes every call
// on but never answers: a change made whose answer was lost.
func carriedOutNeverAnswered(t *testing.T, serviceURL string) string {
	t.Helper()
	upstream, err := url.Parse(serviceURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	lost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxy.ServeHTTP(httptest.NewRecorder(), r)
		<-r.Context().Done()
	}))
	t.Cleanup(lost.Close)
	return lost.URL
}

// Every wrong flag or argument of the webhooks and events commands is a
// usage error (exit 2) found before the webhook service is called.
func TestWebhooksAndEventsUsageErrors(t *testing.T) {
	direct := startWebhook(t)
	countedURL, calls := counted(t, direct)
	env := map[string]string{"ESIM_WEBHOOK_URL": countedURL}
	acct := newAccounts(t, env, 1)[0]
	set := func(url string) []string {
		return []string{"webhooks", "set", "--account", acct, "--env", "sandbox", "--url", url}
	}
	list := func(flags ...string) []string { return append([]string{"events", "list"}, flags...) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"webhooks", "set", "--env", "sandbox", "--url", "https://x.example"}, `esimctl: required flag(s) "account" not set`},
		{[]string{"webhooks", "set", "--account", acct, "--url", "https://x.example"}, `esimctl: required flag(s) "env" not set`},
		{[]string{"webhooks", "set", "--account", acct, "--env", "sandbox"}, `esimctl: required flag(s) "url" not set`},
		{[]string{"webhooks", "set", "--account", acct, "--env", "staging", "--url", "https://x.example"}, `esimctl: invalid --env "staging": want sandbox or live`},
		{[]string{"webhooks", "set", "--account", "acme", "--env", "live", "--url", "https://x.example"}, `esimctl: invalid --account "acme": not a UUID`},
		{set("partner.example/hooks"), `esimctl: invalid --url "partner.example/hooks": want an absolute http:// or https:// URL`},
		{set("ftp://partner.example/hooks"), `esimctl: invalid --url "ftp://partner.example/hooks": want an absolute http:// or https:// URL`},
		{set("https://"), `esimctl: invalid --url "https://": want an absolute http:// or https:// URL`},
		{set("https:///hooks"), `esimctl: invalid --url "https:///hooks": want an absolute http:// or https:// URL`},
		{set("mailto:ops@partner.example"), `esimctl: invalid --url "mailto:ops@partner.example": want an absolute`},
		{set(""), `esimctl: invalid --url "": want an absolute http:// or https:// URL`},
		{set("http://[::1"), `esimctl: invalid --url "http://[::1": want an absolute`},
		{[]string{"webhooks", "show", "--account", acct}, `esimctl: required flag(s) "env" not set`},
		{[]string{"webhooks", "show", "--account", acct, "--env", "prod", "--json"}, `esimctl: invalid --env "prod": want sandbox or live`},
		{[]string{"webhooks", "rotate-secret", "--env", "live"}, `esimctl: required flag(s) "account" not set`},
		{[]string{"webhooks", "send-test", "--account", acct + "0", "--env", "sandbox", "--wait"}, `esimctl: invalid --account "` + acct + `0": not a UUID`},
		{[]string{"webhooks", "send-test", "--account", acct, "--env", "sandbox", "now"}, `esimctl: webhooks send-test takes no arguments, got ["now"]`},
		{[]string{"webhooks", "frobnicate"}, `esimctl: unknown command "frobnicate" for "esimctl webhooks"`},
		{list("--account", acct), "esimctl: --account needs --env (sandbox or live)"},
		{list("--env", "sandbox", "--json"), "esimctl: --env needs --account"},
		{list("--account", acct, "--env", "test"), `esimctl: invalid --env "test": want sandbox or live`},
		{list("--account", "x", "--env", "live"), `esimctl: invalid --account "x": not a UUID`},
		{list("--type", "order.created"), `esimctl: invalid --type "order.created": want order.completed, order.failed, esim.installed, esim.activated, esim.usage, esim.expiring, esim.expired, topup.completed, topup.failed or ping`},
		{list("--type", ""), `esimctl: invalid --type "": want`},
		{list("--type", "ping", "--event", "ping"), `esimctl: --event is the former name of --type: give --type alone`},
		{list("--event", "order.created"), `esimctl: invalid --event "order.created": want order.completed, order.failed, esim.installed, esim.activated, esim.usage, esim.expiring, esim.expired, topup.completed, topup.failed or ping`},
		{list("--event", ""), `esimctl: invalid --event "": want order.completed, order.failed, esim.installed, esim.activated, esim.usage, esim.expiring, esim.expired, topup.completed, topup.failed or ping`},
		{list("--status", "sent"), `esimctl: invalid --status "sent": want pending, delivered, failed or no_endpoint`},
		{list("--status", ""), `esimctl: invalid --status "": want pending, delivered, failed or no_endpoint`},
		{list("--order", "42"), `esimctl: invalid --order "42": not a UUID`},
		{list("--order", ""), `esimctl: invalid --order "": not a UUID`},
		{list("--limit", "101"), "esimctl: invalid --limit 101: want 1 to 100"},
		{list("--page", "0"), "esimctl: invalid --page 0: want 1 to 10000"},
		{list("x"), `esimctl: events list takes no arguments, got ["x"]`},
		{[]string{"events", "get"}, "esimctl: events get: missing --event ID (or the id alone, as EVENT_ID)"},
		{[]string{"events", "get", "evt_1", "evt_2"}, "esimctl: events get takes at most 1 argument: EVENT_ID (got 2)"},
		{[]string{"events", "get", "evt_123"}, `esimctl: invalid EVENT_ID "evt_123": want evt_ and 32 hex digits`},
		{[]string{"events", "get", "--event", "evt_123"}, `esimctl: invalid --event "evt_123": want evt_ and 32 hex digits`},
		{[]string{"events", "get", "--event", "ping"}, `esimctl: invalid --event "ping": want evt_ and 32 hex digits`},
		{[]string{"events", "get", acct, "--json"}, `esimctl: invalid EVENT_ID "` + acct + `": want evt_ and 32 hex digits`},
		{[]string{"events", "get", "evt_" + strings.Repeat("g", 32)}, `esimctl: invalid EVENT_ID "evt_ggg`},
		{[]string{"events"}, "esimctl: events: missing subcommand: get or list"},
		{[]string{"webhooks"}, "esimctl: webhooks: missing subcommand: listen, rotate-secret, send-test, set or show"},
	} {
		r := esimctl(t, env, tc.args...)
		r.wantError(t, 2)
		if first, _, _ := strings.Cut(r.stderr, "\n"); !strings.HasPrefix(first, tc.want) {
			t.Errorf("esimctl %s: error line %q, want %q", strings.Join(tc.args, " "), first, tc.want)
		}
		if !strings.Contains(r.stderr, "--help' for usage.") {
			t.Errorf("esimctl %s: no pointer to --help:\n%s", strings.Join(tc.args, " "), r.stderr)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("usage errors reached the webhook service: %d calls, want none", n)
	}

	// The service's address: its own flag and variable; no other
	// service's is checked.
	esimctl(t, map[string]string{"ESIM_WEBHOOK_URL": "127.0.0.1:8085"}, "events", "list").
		wantError(t, 2, `esimctl: invalid --webhook-url: "127.0.0.1:8085" is not an http:// or https:// base URL`, "(set by --webhook-url or ESIM_WEBHOOK_URL)")
	esimctl(t, map[string]string{"ESIM_ACCOUNTS_URL": env["ESIM_ACCOUNTS_URL"]}, "--webhook-url", "http://127.0.0.1:1", "webhooks", "show", "--account", acct, "--env", "sandbox").
		wantError(t, 1, "esimctl: get the sandbox webhook URL of account "+acct+": cannot reach the webhook service at http://127.0.0.1:1", "--webhook-url / ESIM_WEBHOOK_URL")
	esimctl(t, map[string]string{"ESIM_WEBHOOK_URL": direct + "/", "ESIM_ACCOUNTS_URL": "notaurl", "ESIM_ORDERING_URL": "notaurl"}, "events", "list").ok(t)
}

// Every new command documents itself and its flags; esimctl --help lists
// both groups and the webhook service's address settings.
func TestWebhooksAndEventsHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"webhooks", "events", "--webhook-url", "ESIM_WEBHOOK_URL"}},
		{[]string{"webhooks", "--help"}, []string{"set", "show", "rotate-secret", "send-test"}},
		{[]string{"webhooks", "set", "--help"}, []string{"--account", "--env", "--url", "keep it secret;\nreceivers verify with it", "must be https", "esimctl webhooks set --account"}},
		{[]string{"webhooks", "show", "--help"}, []string{"signing secret", "previous secret", "esimctl webhooks show --account"}},
		{[]string{"webhooks", "rotate-secret", "--help"}, []string{"24 hours", "esimctl webhooks rotate-secret --account"}},
		{[]string{"webhooks", "send-test", "--help"}, []string{"--wait", "ping", "15s", "esimctl webhooks send-test --account"}},
		{[]string{"events", "--help"}, []string{"list", "get"}},
		{[]string{"events", "list", "--help"}, []string{"--account", "--env", "--type", "--order", "--status", "pending, delivered, failed or no_endpoint",
			"order.completed, order.failed, esim.installed, esim.activated, esim.usage, esim.expiring, esim.expired, topup.completed, topup.failed or ping", "--page", "--limit", "go together", "esimctl events list --account"}},
		{[]string{"events", "get", "--help"}, []string{"--event", "EVENT_ID", "payload", "every attempt", "esimctl events get --event evt_"}},
	} {
		r := esimctl(t, nil, tc.args...).ok(t)
		for _, want := range append(tc.want, "Usage:", "--json") {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("esimctl %s lacks %q:\n%s", strings.Join(tc.args, " "), want, r.stdout)
			}
		}
	}
}
