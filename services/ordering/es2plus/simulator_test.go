package es2plus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

func clientOf(t *testing.T, sim *smdpsimtest.Sim, certs, ca devcerts.Files, opts ...es2plus.Option) *es2plus.Client {
	t.Helper()
	c, err := es2plus.New(es2plus.Config{
		URL: sim.ES2PlusURL, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, CAFile: ca.CACert,
		Timeout: 5 * time.Second, RequesterID: "esim-platform-test",
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestClientAgainstTheSimulator: the client and the SM-DP+ simulator,
// written apart, agree on ES2+: a profile reserved, released, and a
// misuse refused with SGP.22's codes.
func TestClientAgainstTheSimulator(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "esim-travel:5"})
	c := clientOf(t, sim, sim.Certs, sim.Certs)
	ctx := context.Background()

	iccid, err := c.DownloadOrder(ctx, es2plus.DownloadOrderRequest{ProfileType: "esim-travel"})
	if err != nil || !validICCID(iccid) {
		t.Fatalf("downloadOrder = %q, %v", iccid, err)
	}
	res, err := c.ConfirmOrder(ctx, es2plus.ConfirmOrderRequest{ICCID: iccid, ReleaseFlag: true})
	if err != nil || res.SMDPAddress != sim.SMDPAddress || res.MatchingID == "" {
		t.Fatalf("confirmOrder = %+v, %v", res, err)
	}
	if p, _ := sim.State(t).Profile(iccid); p.MatchingID != res.MatchingID || string(p.State) != "Released" {
		t.Errorf("the simulator has %+v", p)
	}
	// No double release, as a real SM-DP+ refuses it.
	_, err = c.ConfirmOrder(ctx, es2plus.ConfirmOrderRequest{ICCID: iccid, ReleaseFlag: true})
	var fe *es2plus.FunctionError
	if !errors.As(err, &fe) || fe.SubjectCode != "8.2.1" || fe.ReasonCode != "3.7" || !es2plus.IsDefinitive(err) {
		t.Errorf("second confirmOrder: %v, want Failed 8.2.1/3.7", err)
	}
	if err := c.CancelOrder(ctx, es2plus.CancelOrderRequest{ICCID: iccid, FinalProfileStatusIndicator: es2plus.FinalProfileStatusAvailable}); err != nil {
		t.Errorf("cancelOrder of a released profile: %v", err)
	}
	_, err = c.DownloadOrder(ctx, es2plus.DownloadOrderRequest{ProfileType: "no-such-type"})
	if !errors.As(err, &fe) || fe.SubjectCode != "8.2.5" || fe.ReasonCode != "3.9" {
		t.Errorf("downloadOrder of an unknown type: %v, want Failed 8.2.5/3.9", err)
	}
}

// TestClientAgainstVendors: the client reads the answers of each vendor
// style the simulator plays: F-padded ICCIDs come back normalised (and
// are what the simulator holds), Executed-WithWarning is a success whose
// codes are logged, and a confirmOrder without smdpAddress gives an empty
// SMDPAddress.
func TestClientAgainstVendors(t *testing.T) {
	for name, v := range map[string]smdpsim.Vendor{
		"standard":              {},
		"padded ICCIDs":         {PaddedICCIDs: true},
		"executed with warning": {ExecutedWithWarning: true},
		"no smdpAddress":        {OmitSMDPAddress: true},
		"all three":             {PaddedICCIDs: true, ExecutedWithWarning: true, OmitSMDPAddress: true},
	} {
		t.Run(name, func(t *testing.T) {
			v.ProfileType = "esim-travel"
			opts := smdpsimtest.Options{ProfileTypes: "esim-travel:5"}
			if v != (smdpsim.Vendor{ProfileType: v.ProfileType}) {
				opts.Vendors = []smdpsim.Vendor{v}
			}
			sim := smdpsimtest.Start(t, opts)
			if got := sim.State(t).Vendors; len(got) != len(opts.Vendors) {
				t.Fatalf("the simulator plays %+v", got)
			}
			// The simulator answers as the vendor would: the premise of
			// what the client is held to below.
			if raw := rawDownloadOrder(t, sim, "esim-travel"); (len(raw) == 20 && raw[19] == 'F') != v.PaddedICCIDs {
				t.Fatalf("the simulator answered the ICCID %q", raw)
			}
			logs := &syncBuffer{}
			c := clientOf(t, sim, sim.Certs, sim.Certs, es2plus.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
			ctx := context.Background()

			iccid, err := c.DownloadOrder(ctx, es2plus.DownloadOrderRequest{ProfileType: "esim-travel"})
			if err != nil || !validICCID(iccid) || len(iccid) != 19 {
				t.Fatalf("downloadOrder = %q, %v; want a normalised 19-digit ICCID", iccid, err)
			}
			if p, ok := sim.State(t).Profile(iccid); !ok || string(p.State) != "Allocated" {
				t.Fatalf("the simulator has %+v (found %v) for %s", p, ok, iccid)
			}
			res, err := c.ConfirmOrder(ctx, es2plus.ConfirmOrderRequest{ICCID: iccid, ReleaseFlag: true})
			wantAddress := sim.SMDPAddress
			if v.OmitSMDPAddress {
				wantAddress = ""
			}
			if err != nil || res.MatchingID == "" || res.SMDPAddress != wantAddress {
				t.Fatalf("confirmOrder = %+v, %v; want SMDPAddress %q", res, err, wantAddress)
			}
			if p, _ := sim.State(t).Profile(iccid); string(p.State) != "Released" || p.MatchingID != res.MatchingID {
				t.Fatalf("the simulator has %+v", p)
			}
			if err := c.CancelOrder(ctx, es2plus.CancelOrderRequest{ICCID: iccid, FinalProfileStatusIndicator: es2plus.FinalProfileStatusAvailable}); err != nil {
				t.Fatalf("cancelOrder: %v", err)
			}
			if p, _ := sim.State(t).Pool("esim-travel"); p.Available != 4 || p.Allocated != 1 || p.Cancelled != 1 {
				t.Fatalf("pool %+v, want the client's profile given back and the probe's held", p)
			}

			// Each warning is logged with its codes; no warning, no line.
			var warned []map[string]any
			for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
				var l map[string]any
				if line != "" && json.Unmarshal([]byte(line), &l) == nil && l["level"] == "WARN" {
					warned = append(warned, l)
				}
			}
			if !v.ExecutedWithWarning {
				if len(warned) != 0 {
					t.Fatalf("warnings logged: %v", warned)
				}
				return
			}
			if len(warned) != 3 {
				t.Fatalf("%d warnings logged, want one per call: %s", len(warned), logs.String())
			}
			for i, fn := range []string{"downloadOrder", "confirmOrder", "cancelOrder"} {
				if w := warned[i]; w["function"] != fn || w["subject_code"] != smdpsim.WarningSubjectCode || w["reason_code"] != smdpsim.WarningReasonCode {
					t.Errorf("warning %d: %v, want %s's codes", i, w, fn)
				}
			}
		})
	}
}

// rawDownloadOrder reserves a profile of profileType without the client
// and returns the ICCID as the simulator wrote it.
func rawDownloadOrder(t *testing.T, sim *smdpsimtest.Sim, profileType string) string {
	t.Helper()
	cfg, err := sim.Certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
	defer hc.CloseIdleConnections()
	body, _ := json.Marshal(map[string]any{
		"header":      map[string]string{"functionRequesterIdentifier": "probe", "functionCallIdentifier": uuid.NewString()},
		"profileType": profileType,
	})
	req, _ := http.NewRequest(http.MethodPost, sim.ES2PlusURL+es2plus.PathPrefix+es2plus.FunctionDownloadOrder, bytes.NewReader(body))
	req.Header.Set("Content-Type", es2plus.ContentType)
	req.Header.Set("X-Admin-Protocol", es2plus.DefaultProtocolVersion)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct{ ICCID string }
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.ICCID == "" {
		t.Fatalf("downloadOrder: %d %v", resp.StatusCode, err)
	}
	return answer.ICCID
}

// syncBuffer is a log destination the test reads while the client may
// write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLostDownloadOrderIsLearntUnderItsIdentifier: a downloadOrder the
// simulator executes and whose answer it loses is an unknown outcome to
// the client; sent again under the same functionCallIdentifier
// (DownloadOrderAs), it answers the ICCID reserved the first time, and
// the pool holds that one profile allocated, not two.
func TestLostDownloadOrderIsLearntUnderItsIdentifier(t *testing.T) {
	for name, vendors := range map[string][]smdpsim.Vendor{
		"standard":      nil,
		"padded ICCIDs": {{ProfileType: "esim-travel", PaddedICCIDs: true}},
	} {
		t.Run(name, func(t *testing.T) {
			sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "esim-travel:5", Vendors: vendors})
			c := clientOf(t, sim, sim.Certs, sim.Certs)
			ctx := context.Background()
			if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "downloadOrder", Mode: smdpsim.ModeLose, Count: 1}); err != nil {
				t.Fatal(err)
			}
			callID := uuid.NewString()
			req := es2plus.DownloadOrderRequest{ProfileType: "esim-travel"}
			if iccid, err := c.DownloadOrderAs(ctx, callID, req); err == nil || es2plus.IsDefinitive(err) || !errors.Is(err, es2plus.ErrTransport) {
				t.Fatalf("a lost downloadOrder = %q, %v; want a transport error, an unknown outcome", iccid, err)
			}
			st := sim.State(t)
			if p, _ := st.Pool("esim-travel"); p.Allocated != 1 || len(st.Profiles) != 1 || st.Calls["downloadOrder"]["fault-lose"] != 1 {
				t.Fatalf("after the lost call: pool %+v calls %v", p, st.Calls)
			}
			reserved := st.Profiles[0].ICCID

			iccid, err := c.DownloadOrderAs(ctx, callID, req)
			if err != nil || iccid != reserved {
				t.Fatalf("sent again under its identifier: %q, %v; want %s", iccid, err, reserved)
			}
			st = sim.State(t)
			if p, _ := st.Pool("esim-travel"); p.Allocated != 1 || p.Available != 4 || len(st.Profiles) != 1 || st.Calls["downloadOrder"]["replayed"] != 1 {
				t.Fatalf("after the call sent again: pool %+v calls %v, want the one profile allocated", p, st.Calls)
			}
			// Given back, nothing stays reserved.
			if err := c.CancelOrder(ctx, es2plus.CancelOrderRequest{ICCID: iccid, FinalProfileStatusIndicator: es2plus.FinalProfileStatusAvailable}); err != nil {
				t.Fatal(err)
			}
			if p, _ := sim.State(t).Pool("esim-travel"); p.Allocated != 0 || p.Available != 5 {
				t.Fatalf("pool %+v", p)
			}
		})
	}
}

// TestMutualTLSWithTheSimulator: the simulator refuses a client whose
// certificate another CA signed, and a client that does not trust the
// simulator's certificate refuses to send: neither call reaches ES2+.
func TestMutualTLSWithTheSimulator(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	other, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*es2plus.Client{
		"a client certificate of another CA":             clientOf(t, sim, other, sim.Certs),
		"a client that trusts another CA than the sim's": clientOf(t, sim, sim.Certs, other),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.DownloadOrder(context.Background(), es2plus.DownloadOrderRequest{ProfileType: "esim-travel"})
			if !errors.Is(err, es2plus.ErrTransport) {
				t.Errorf("downloadOrder = %v, want a transport error", err)
			}
		})
	}
	if calls := sim.State(t).Calls; len(calls) != 0 {
		t.Errorf("calls reached ES2+: %v", calls)
	}
	// And the provider's check says why.
	p := es2plus.NewProvider(clientOf(t, sim, sim.Certs, other), nil, es2plus.ProfileTypes{}, nil, es2plus.Settings{RetryBackoff: time.Second})
	if detail, err := p.Check(context.Background()); err == nil || !errors.Is(err, es2plus.ErrTransport) {
		t.Errorf("Check with an untrusted SM-DP+ = %q, %v; want a transport error", detail, err)
	}
	p = es2plus.NewProvider(clientOf(t, sim, sim.Certs, sim.Certs), nil, es2plus.ProfileTypes{}, nil, es2plus.Settings{RetryBackoff: time.Second})
	if detail, err := p.Check(context.Background()); err != nil {
		t.Errorf("Check = %q, %v; want the SM-DP+'s answer", detail, err)
	} else {
		t.Log(detail)
	}
}

func TestParseProfileTypes(t *testing.T) {
	plan := "0190a3c5-0000-7000-8000-000000000001"
	good, err := es2plus.ParseProfileTypes("*=esim-travel, " + plan + "=esim-eu")
	if err != nil {
		t.Fatal(err)
	}
	if typ, ok := good.For(uuidOf(t, plan)); !ok || typ != "esim-eu" {
		t.Errorf("plan's type %q %v", typ, ok)
	}
	if typ, ok := good.For(uuidOf(t, "0190a3c5-0000-7000-8000-000000000002")); !ok || typ != "esim-travel" {
		t.Errorf("default type %q %v", typ, ok)
	}
	only, _ := es2plus.ParseProfileTypes(plan + "=esim-eu")
	if _, ok := only.For(uuidOf(t, "0190a3c5-0000-7000-8000-000000000002")); ok {
		t.Error("a plan without a type and no default has one")
	}
	for _, bad := range []string{"", "*", "*=", "*=a b", "*=a,*=b", "x=a", plan + "=a," + plan + "=b", "*=" + string(make([]byte, 65))} {
		if _, err := es2plus.ParseProfileTypes(bad); err == nil {
			t.Errorf("ParseProfileTypes(%q) accepted", bad)
		}
	}
}

func uuidOf(t *testing.T, s string) uuid.UUID {
	t.Helper()
	id, err := uuid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func validICCID(s string) bool {
	n, ok := es2plus.NormalizeICCID(s)
	return ok && n == s
}
