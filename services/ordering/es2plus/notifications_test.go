package es2plus_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/libs/internalauth"
	"github.com/esimplatform/esim/libs/internalauth/internalauthtest"
	"github.com/esimplatform/esim/libs/postgres/pgtest"
	accountsv1 "github.com/esimplatform/esim/proto/accounts/v1"
	"github.com/esimplatform/esim/services/catalogue"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	"github.com/esimplatform/esim/services/ordering/network"
	"github.com/esimplatform/esim/services/ordering/orderingtest"
	"github.com/esimplatform/esim/services/ordering/postgres"
	"github.com/esimplatform/esim/services/ordering/sandbox"
	"github.com/esimplatform/esim/services/ordering/twirpclient"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

var japan5GB = catalogue.SeedPlanID("jp-5gb-30d").String()

// liveRig is ordering's live side as the server assembles it: the real
// store, the catalogue and the wallet, the ES2+ provider and the network
// client on the simulator, and the notification handler on a mutual TLS
// listener the simulator reports to.
type liveRig struct {
	t       *testing.T
	sim     *smdpsimtest.Sim
	deps    *orderingtest.Deps
	pool    *pgxpool.Pool
	svc     *ordering.Service
	account uuid.UUID
	// notifyURL is the listener's base URL.
	notifyURL string
}

func newLiveRig(t *testing.T) *liveRig {
	t.Helper()
	return newLiveRigVia(t, func(sim *smdpsimtest.Sim) string { return sim.NetworkURL })
}

// newLiveRigVia is newLiveRig with ordering reaching the network at the
// URL networkURL gives for the simulator (a proxy in front of it).
func newLiveRigVia(t *testing.T, networkURL func(*smdpsimtest.Sim) string) *liveRig {
	t.Helper()
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "esim-travel:20"})
	deps := orderingtest.StartDeps(t, nil)
	// Sized as the server sizes it: a connection per order in flight and
	// room for everything else.
	pool, err := postgres.Open(context.Background(), pgtest.WithMaxConns(t, pgtest.NewDatabase(t), postgres.DefaultMaxConns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := postgres.NewStore(pool, postgres.DefaultMaxHolders)
	client := clientOf(t, sim, sim.Certs, sim.Certs)
	live := es2plus.NewProvider(client, func(tx ordering.Locked) es2plus.Store { return store.Records(tx) },
		es2plus.ProfileTypes{Default: "esim-travel"}, nil, es2plus.Settings{RetryBackoff: time.Hour})
	net, err := network.New(network.Config{URL: networkURL(sim), CertFile: sim.Certs.ClientCert, KeyFile: sim.Certs.ClientKey, CAFile: sim.Certs.CACert, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(net.Close)
	hc := internalauthtest.Client(internalauth.Ordering)
	svc := ordering.NewService(ordering.Deps{
		Store:     store,
		Catalogue: twirpclient.NewCatalogue(deps.CatalogueURL, hc),
		Wallet:    twirpclient.NewWallet(deps.WalletURL, hc),
		Providers: map[ordering.Environment]ordering.Provider{
			ordering.Live:    live,
			ordering.Sandbox: sandbox.New(func(tx ordering.Locked) sandbox.Store { return store.Records(tx) }, "smdp.sandbox.esim.invalid"),
		},
		Networks:  map[ordering.Environment]ordering.Network{ordering.Live: net},
		QRBaseURL: "http://127.0.0.1:8080/qr",
	})
	ts := httptest.NewUnstartedServer(es2plus.NotificationHandler(svc, slog.New(slog.DiscardHandler)))
	tlsConfig, err := es2plus.ServerTLS(sim.Certs.ServerCert, sim.Certs.ServerKey, sim.Certs.CACert)
	if err != nil {
		t.Fatal(err)
	}
	ts.TLS = tlsConfig
	ts.StartTLS()
	t.Cleanup(ts.Close)
	sim.NotifyOperator(t, ts.URL)
	r := &liveRig{t: t, sim: sim, deps: deps, pool: pool, svc: svc, account: uuid.New(), notifyURL: ts.URL}
	for _, env := range []accountsv1.Environment{accountsv1.Environment_ENVIRONMENT_LIVE, accountsv1.Environment_ENVIRONMENT_SANDBOX} {
		deps.TopUp(t, r.account.String(), env, "USD", 1000_00, "funds-"+env.String())
	}
	return r
}

// order buys one eSIM of the Japan 5 GB plan in env.
func (r *liveRig) order(env ordering.Environment) ordering.Esim {
	r.t.Helper()
	created, err := r.svc.CreateOrder(context.Background(), ordering.NewOrder{
		Scope: ordering.Scope{AccountID: r.account, Environment: env}, Currency: ordering.USD, PlanID: japan5GB,
		Customer: ordering.Customer{Reference: "traveller"},
	})
	if err != nil {
		r.t.Fatal(err)
	}
	if o := created.Order; o.Status != ordering.StatusCompleted || len(o.Esims) != 1 {
		r.t.Fatalf("order %+v", o)
	}
	return created.Order.Esims[0]
}

func (r *liveRig) esim(e ordering.Esim) ordering.Esim {
	r.t.Helper()
	got, err := r.svc.GetEsim(context.Background(), &e.Scope, e.ID)
	if err != nil {
		r.t.Fatal(err)
	}
	return got
}

// client is the SM-DP+'s side of mutual TLS: the simulator's client
// certificate.
func (r *liveRig) client() *http.Client {
	r.t.Helper()
	cfg, err := r.sim.Certs.ClientTLS()
	if err != nil {
		r.t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
}

type notified struct {
	status int
	header http.Header
	raw    string
	// execution is header.functionExecutionStatus.
	execution struct {
		Status         string
		StatusCodeData struct{ SubjectCode, ReasonCode, SubjectIdentifier, Message string }
	}
}

// notify sends body to path of the listener as the SM-DP+ would; mutate
// changes the request first.
func (r *liveRig) notify(c *http.Client, path, body string, mutate ...func(*http.Request)) notified {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.notifyURL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.2.0")
	for _, m := range mutate {
		m(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	n := notified{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	var a struct {
		Header struct {
			FunctionExecutionStatus json.RawMessage `json:"functionExecutionStatus"`
		} `json:"header"`
	}
	if json.Unmarshal(raw, &a) == nil && a.Header.FunctionExecutionStatus != nil {
		_ = json.Unmarshal(a.Header.FunctionExecutionStatus, &n.execution)
	}
	return n
}

// notification is a handleDownloadProgressInfo body.
func notification(iccid string, point int, status string, at time.Time) string {
	b, _ := json.Marshal(map[string]any{
		"header":                  map[string]string{"functionRequesterIdentifier": "smdp.example", "functionCallIdentifier": uuid.NewString()},
		"eid":                     "89049032000000000000000000000001",
		"iccid":                   iccid,
		"profileType":             "esim-travel",
		"timestamp":               at.UTC().Format(time.RFC3339),
		"notificationPointId":     point,
		"notificationPointStatus": map[string]string{"status": status},
		"resultData":              "vzc=",
	})
	return string(b)
}

func wantExecuted(t *testing.T, n notified) {
	t.Helper()
	if n.status != http.StatusNoContent || n.raw != "" || n.header.Get("X-Admin-Protocol") != "gsma/rsp/v2.2.0" {
		t.Fatalf("got %d %v %s, want 204 No Content in the caller's protocol", n.status, n.header, n.raw)
	}
}

func wantFailed(t *testing.T, n notified, status int, subject, reason string) {
	t.Helper()
	if n.status != status || n.execution.Status != "Failed" || n.execution.StatusCodeData.SubjectCode != subject || n.execution.StatusCodeData.ReasonCode != reason ||
		!strings.HasPrefix(n.header.Get("Content-Type"), "application/json") || n.header.Get("X-Admin-Protocol") == "" {
		t.Fatalf("got %d %v %s, want %d Failed %s/%s", n.status, n.header, n.raw, status, subject, reason)
	}
}

// The simulator installs a live eSIM's profile and reports it over
// mutual TLS: the eSIM is INSTALLED at the time the SM-DP+ gives. The
// report sent again, and a download report after it, are executed and
// change nothing, nor does a failed installation.
func TestInstallNoticeMovesTheLiveEsim(t *testing.T) {
	r := newLiveRig(t)
	e := r.order(ordering.Live)
	if e.Status != ordering.EsimAllocated {
		t.Fatalf("a new eSIM is %s", e.Status)
	}
	other := r.order(ordering.Live)
	res, err := r.sim.Control.Install(context.Background(), e.ICCID, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range res.Notifications {
		if !n.Sent || n.Error != "" {
			t.Fatalf("notifications %+v", res.Notifications)
		}
	}
	installed := r.esim(e)
	if installed.Status != ordering.EsimInstalled || !installed.InstalledAt.Equal(res.Device.InstalledAt.Truncate(time.Second)) {
		t.Fatalf("after the install: %s installed at %v, want INSTALLED at %v", installed.Status, installed.InstalledAt, res.Device.InstalledAt)
	}
	if got := r.esim(other); got.Status != ordering.EsimAllocated {
		t.Errorf("the other eSIM is %s", got.Status)
	}

	// Replayed, by the simulator and by hand; a download report after
	// the installation; a later installation time.
	again, err := r.sim.Control.Install(context.Background(), e.ICCID, "")
	if err != nil || again.Notifications[0].Error != "" || again.Notifications[1].Error != "" {
		t.Fatalf("install again = %+v, %v", again, err)
	}
	c := r.client()
	wantExecuted(t, r.notify(c, es2plus.NotificationPath, notification(e.ICCID, 3, "Executed-Success", time.Now())))
	wantExecuted(t, r.notify(c, es2plus.NotificationPath, notification(e.ICCID+"F", 4, "Executed-Success", time.Now())))
	if got := r.esim(e); got.Status != ordering.EsimInstalled || !got.InstalledAt.Equal(installed.InstalledAt) {
		t.Errorf("replays changed the eSIM: %s at %v", got.Status, got.InstalledAt)
	}

	// A failed installation, and the steps before one, move nothing.
	for _, body := range []string{
		notification(other.ICCID, 4, "Failed", time.Now()),
		notification(other.ICCID, 3, "Executed-Success", time.Now()),
		notification(other.ICCID, 1, "Executed-Success", time.Now()),
	} {
		wantExecuted(t, r.notify(c, es2plus.NotificationPath, body))
	}
	if got := r.esim(other); got.Status != ordering.EsimAllocated || !got.InstalledAt.IsZero() {
		t.Errorf("the other eSIM is %s at %v", got.Status, got.InstalledAt)
	}
}

// An ICCID no live eSIM has (a profile the SM-DP+ issued to someone else,
// a sandbox eSIM's) is answered Failed 8.2.1/3.9 in an HTTP 200: final
// for the SM-DP+, and nothing changes.
func TestUnknownICCIDIsFailed(t *testing.T) {
	r := newLiveRig(t)
	sb := r.order(ordering.Sandbox)
	c := r.client()
	wantFailed(t, r.notify(c, es2plus.NotificationPath, notification(sb.ICCID, 4, "Executed-Success", time.Now())), http.StatusOK, "8.2.1", "3.9")
	if got := r.esim(sb); got.Status != ordering.EsimAllocated {
		t.Errorf("the sandbox eSIM is %s", got.Status)
	}

	// A profile the simulator released to no order of ordering's.
	es2 := clientOf(t, r.sim, r.sim.Certs, r.sim.Certs)
	ctx := context.Background()
	iccid, err := es2.DownloadOrder(ctx, es2plus.DownloadOrderRequest{ProfileType: "esim-travel"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := es2.ConfirmOrder(ctx, es2plus.ConfirmOrderRequest{ICCID: iccid, ReleaseFlag: true}); err != nil {
		t.Fatal(err)
	}
	res, err := r.sim.Control.Install(ctx, iccid, "")
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Notifications[1]; !strings.Contains(n.Error, "Failed 8.2.1/3.9") {
		t.Errorf("the installation's notification: %+v", n)
	}
	if n := res.Notifications[0]; n.Error != "" {
		t.Errorf("a download report of an unknown ICCID moves nothing and is no refusal: %+v", n)
	}
}

// What is not a well-formed notification is refused with the ES2+ status
// that says why, and changes nothing: a body the platform cannot read is
// Failed in an HTTP 200 (sending it again would not help); a request
// that is not a notification at all gets the HTTP status that fits.
func TestMalformedNotifications(t *testing.T) {
	r := newLiveRig(t)
	e := r.order(ordering.Live)
	c := r.client()
	valid := notification(e.ICCID, 4, "Executed-Success", time.Now())
	without := func(field string) string {
		var m map[string]any
		_ = json.Unmarshal([]byte(valid), &m)
		if h, sub, ok := strings.Cut(field, "."); ok {
			delete(m[h].(map[string]any), sub)
		} else {
			delete(m, field)
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	for name, c2 := range map[string]struct {
		body            string
		status          int
		subject, reason string
		mutate          func(*http.Request)
		path            string
	}{
		"not JSON":                  {body: "<xml/>", status: 200, subject: "1.2", reason: "2.1"},
		"an array":                  {body: "[]", status: 200, subject: "1.2", reason: "2.1"},
		"no header":                 {body: without("header"), status: 200, subject: "1.2", reason: "2.2"},
		"no requester":              {body: without("header.functionRequesterIdentifier"), status: 200, subject: "1.2", reason: "2.2"},
		"no call identifier":        {body: without("header.functionCallIdentifier"), status: 200, subject: "1.2", reason: "2.2"},
		"no iccid":                  {body: without("iccid"), status: 200, subject: "1.2", reason: "2.2"},
		"no notificationPointId":    {body: without("notificationPointId"), status: 200, subject: "1.2", reason: "2.2"},
		"no status":                 {body: without("notificationPointStatus"), status: 200, subject: "1.2", reason: "2.2"},
		"no timestamp":              {body: without("timestamp"), status: 200, subject: "1.2", reason: "2.2"},
		"a bad timestamp":           {body: strings.Replace(valid, `"timestamp":"`, `"timestamp":"yesterday`, 1), status: 200, subject: "1.2", reason: "2.1"},
		"a bad ICCID":               {body: strings.Replace(valid, e.ICCID, e.ICCID[:18]+"x", 1), status: 200, subject: "8.2.1", reason: "2.1"},
		"a wrong Luhn digit":        {body: strings.Replace(valid, e.ICCID, e.ICCID[:18]+string('0'+(e.ICCID[18]-'0'+1)%10), 1), status: 200, subject: "8.2.1", reason: "2.1"},
		"a point of the wrong type": {body: strings.Replace(valid, `"notificationPointId":4`, `"notificationPointId":"4"`, 1), status: 200, subject: "1.2", reason: "2.1"},
		"another path":              {body: valid, status: 404, subject: "1.2", reason: "3.9", path: "/gsma/rsp2/es2plus/downloadOrder"},
		"GET":                       {body: "", status: 405, subject: "1.2", reason: "2.1", mutate: func(q *http.Request) { q.Method = http.MethodGet }},
		"no X-Admin-Protocol":       {body: valid, status: 400, subject: "1.2", reason: "2.1", mutate: func(q *http.Request) { q.Header.Del("X-Admin-Protocol") }},
		"SGP.22 v3":                 {body: valid, status: 400, subject: "1.2", reason: "2.1", mutate: func(q *http.Request) { q.Header.Set("X-Admin-Protocol", "gsma/rsp/v3.0.0") }},
		"text/plain":                {body: valid, status: 415, subject: "1.2", reason: "2.1", mutate: func(q *http.Request) { q.Header.Set("Content-Type", "text/plain") }},
		"too large":                 {body: strings.Replace(valid, `"resultData":"vzc="`, `"resultData":"`+strings.Repeat("A", 70<<10)+`"`, 1), status: 413, subject: "1.2", reason: "2.1"},
	} {
		path := c2.path
		if path == "" {
			path = es2plus.NotificationPath
		}
		mutate := c2.mutate
		if mutate == nil {
			mutate = func(*http.Request) {}
		}
		n := r.notify(c, path, c2.body, mutate)
		if n.status != c2.status || n.execution.Status != "Failed" || n.execution.StatusCodeData.SubjectCode != c2.subject || n.execution.StatusCodeData.ReasonCode != c2.reason {
			t.Errorf("%s: %d %s, want %d Failed %s/%s", name, n.status, n.raw, c2.status, c2.subject, c2.reason)
		}
	}
	if got := r.esim(e); got.Status != ordering.EsimAllocated {
		t.Errorf("refused notifications moved the eSIM to %s", got.Status)
	}
	// The same eSIM, a well-formed notification: it was the malformation
	// that was refused.
	wantExecuted(t, r.notify(c, es2plus.NotificationPath, valid))
	if got := r.esim(e); got.Status != ordering.EsimInstalled {
		t.Errorf("a valid notification left the eSIM %s", got.Status)
	}
}

// Only the SM-DP+ reaches the listener: a client without a certificate,
// or with one of another CA, is refused at the handshake, and nothing
// changes.
func TestNotificationsNeedTheSMDPCertificate(t *testing.T) {
	r := newLiveRig(t)
	e := r.order(ordering.Live)
	ours, err := r.sim.Certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	other, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	foreign.RootCAs = ours.RootCAs
	for name, cfg := range map[string]*tls.Config{
		"no certificate":      {RootCAs: ours.RootCAs, MinVersion: tls.VersionTLS12},
		"another CA's client": foreign,
	} {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		resp, err := c.Post(r.notifyURL+es2plus.NotificationPath, "application/json", strings.NewReader(notification(e.ICCID, 4, "Executed-Success", time.Now())))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d, want a refused handshake", name, resp.StatusCode)
		}
	}
	if got := r.esim(e); got.Status != ordering.EsimAllocated {
		t.Errorf("refused connections moved the eSIM to %s", got.Status)
	}
}

// When the platform cannot apply a notification (its database is gone),
// it answers 500 with a Failed status: the SM-DP+ may send it again
// later, and nothing was applied.
func TestNotificationTheStoreCannotApply(t *testing.T) {
	r := newLiveRig(t)
	e := r.order(ordering.Live)
	connString := r.pool.Config().ConnString()
	r.pool.Close()
	wantFailed(t, r.notify(r.client(), es2plus.NotificationPath, notification(e.ICCID, 4, "Executed-Success", time.Now())), http.StatusInternalServerError, "1.2", "4.2")

	pool, err := pgxpool.New(context.Background(), connString)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	got, err := ordering.NewService(ordering.Deps{Store: postgres.NewStore(pool, 0)}).GetEsim(context.Background(), &e.Scope, e.ID)
	if err != nil || got.Status != ordering.EsimAllocated {
		t.Errorf("after the failure the eSIM is %s (%v)", got.Status, err)
	}
}
