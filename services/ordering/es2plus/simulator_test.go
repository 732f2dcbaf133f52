package es2plus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

func clientOf(t *testing.T, sim *smdpsimtest.Sim, certs, ca devcerts.Files) *es2plus.Client {
	t.Helper()
	c, err := es2plus.New(es2plus.Config{
		URL: sim.ES2PlusURL, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, CAFile: ca.CACert,
		Timeout: 5 * time.Second, RequesterID: "esim-platform-test",
	})
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
