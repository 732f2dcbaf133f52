package control_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/telemetry"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/control"
	"github.com/esimplatform/esim/services/smdp-sim/server"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

// call sends a control request with the Authorization header auth ("":
// none).
func call(t *testing.T, method, url, auth, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// post sends a control request with sim's token.
func post(t *testing.T, sim *smdpsimtest.Sim, path, body string) (int, string) {
	t.Helper()
	status, _, got := call(t, http.MethodPost, sim.ControlURL+path, "Bearer "+sim.ControlToken, body)
	return status, got
}

// Every control call without the token, or with another, is a 401 in the
// API's error shape and changes nothing; with it, the same calls work.
func TestControlRequiresTheToken(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "a:2"})
	ctx := context.Background()
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "downloadOrder", Mode: "fail", Count: 3}); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(sim.State(t))
	calls := []struct{ method, path, body string }{
		{http.MethodGet, "/control/state", ""},
		{http.MethodPost, "/control/faults", `{"function":"confirmOrder","mode":"fail"}`},
		{http.MethodDelete, "/control/faults", ""},
		{http.MethodPost, "/control/drain", `{"profileType":"a"}`},
		{http.MethodPut, "/control/vendor", `{"profileType":"a","paddedICCIDs":true}`},
		{http.MethodPost, "/control/reset", ""},
		{http.MethodGet, "/control/nothing", ""},
	}
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong-token", "Bearer " + sim.ControlToken + "x", "bearer " + sim.ControlToken,
		"Basic " + sim.ControlToken, "Bearer " + sim.ControlToken[:len(sim.ControlToken)-1]} {
		for _, c := range calls {
			status, header, body := call(t, c.method, sim.ControlURL+c.path, auth, c.body)
			if status != http.StatusUnauthorized || !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") ||
				header.Get("Content-Type") != "application/json" || !strings.Contains(body, `"error":"authorization: `) {
				t.Errorf("%s %s with Authorization %q: %d %v %s, want a 401 in the error shape", c.method, c.path, auth, status, header, body)
			}
		}
	}
	if after, _ := json.Marshal(sim.State(t)); string(after) != string(before) {
		t.Errorf("refused calls changed the simulator:\n%s\n%s", before, after)
	}
	for _, c := range calls[:6] {
		if status, _, body := call(t, c.method, sim.ControlURL+c.path, "Bearer "+sim.ControlToken, c.body); status >= 300 {
			t.Errorf("%s %s with the token: %d %s", c.method, c.path, status, body)
		}
	}
	if st := sim.State(t); len(st.Faults) != 0 || len(st.Vendors) != 0 {
		t.Errorf("after reset with the token: %+v", st)
	}
	// A client with another token is refused, saying so.
	wrong := &control.Client{BaseURL: sim.ControlURL, Token: "wrong"}
	if err := wrong.Reset(ctx); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("Reset with a wrong token: %v", err)
	}
}

// An empty token admits no one, whatever a caller sends.
func TestEmptyTokenAdmitsNoOne(t *testing.T) {
	sim, err := smdpsim.New(smdpsim.Config{SMDPAddress: "smdp.example", Pools: []smdpsim.Pool{{ProfileType: "a", Count: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	ts := httptest.NewServer(control.Handler(sim, nil))
	defer ts.Close()
	for _, auth := range []string{"", "Bearer ", "Bearer"} {
		if status, _, _ := call(t, http.MethodPost, ts.URL+"/control/reset", auth, ""); status != http.StatusUnauthorized {
			t.Errorf("reset with Authorization %q and no token configured: %d", auth, status)
		}
	}
}

func TestFaultValidationNamesTheField(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	for field, body := range map[string]string{
		"function":    `{"function":"nope","mode":"fail"}`,
		"mode":        `{"function":"downloadOrder","mode":"explode"}`,
		"profileType": `{"function":"downloadOrder","mode":"fail","profileType":"nope"}`,
		"count":       `{"function":"downloadOrder","mode":"fail","count":-1}`,
		"skip":        `{"function":"downloadOrder","mode":"fail","skip":"two"}`,
		"reasonCode":  `{"function":"downloadOrder","mode":"fail","reasonCode":"x.y"}`,
		"hang":        `{"function":"downloadOrder","mode":"hang","hang":"forever"}`,
		"countt":      `{"function":"downloadOrder","mode":"fail","countt":1}`,
	} {
		status, got := post(t, sim, "/control/faults", body)
		if status != http.StatusBadRequest || !strings.Contains(got, `"error"`) || !strings.Contains(got, field) {
			t.Errorf("%s: %d %s, want a 400 naming %s", body, status, got, field)
		}
	}
	status, got := post(t, sim, "/control/faults", `{"function":"confirmOrder","mode":"hang","hang":"2s","count":1}`)
	if status != http.StatusCreated || !strings.Contains(got, `"id":"`) || !strings.Contains(got, `"hang":"2s"`) {
		t.Fatalf("valid fault: %d %s", status, got)
	}
}

func TestClient(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "a:1,b:2", SMDPAddress: "smdp.example"})
	ctx := context.Background()
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "cancelOrder", ProfileType: "b", Mode: "hang", Hang: time.Minute, Count: 2, SkipCount: 1}); err != nil {
		t.Fatal(err)
	}
	st := sim.State(t)
	if st.SMDPAddress != "smdp.example" || len(st.Faults) != 1 || st.Faults[0].Hang != time.Minute || st.Faults[0].Remaining != 2 || st.Faults[0].SkipCount != 1 {
		t.Fatalf("state %+v", st)
	}
	if err := sim.Control.Drain(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := sim.Control.Drain(ctx, "nope"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("drain of an unknown type: %v", err)
	}
	if p, _ := sim.State(t).Pool("a"); p.Available != 0 || p.Unavailable != 1 {
		t.Fatalf("pool %+v", p)
	}
	if err := sim.Control.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sim.Control.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if st := sim.State(t); len(st.Faults) != 0 || st.Pools[0].Available != 1 {
		t.Fatalf("after reset %+v", st)
	}
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "x", Mode: "fail"}); err == nil || !strings.Contains(err.Error(), "function") {
		t.Fatalf("bad fault: %v", err)
	}
}

// PUT /control/vendor sets a profile type's vendor style, shown in the
// state; a bad body is a 400 naming the field and changes nothing; every
// setting off, or a reset, clears it.
func TestVendor(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "a:1,b:2"})
	put := func(body string) (int, string) {
		t.Helper()
		status, _, got := call(t, http.MethodPut, sim.ControlURL+"/control/vendor", "Bearer "+sim.ControlToken, body)
		return status, got
	}
	status, got := put(`{"profileType":"b","paddedICCIDs":true,"executedWithWarning":true,"omitSMDPAddress":true}`)
	if status != http.StatusOK || got != `{"profileType":"b","paddedICCIDs":true,"executedWithWarning":true,"omitSMDPAddress":true}`+"\n" {
		t.Fatalf("PUT /control/vendor: %d %s", status, got)
	}
	want := []smdpsim.Vendor{{ProfileType: "b", PaddedICCIDs: true, ExecutedWithWarning: true, OmitSMDPAddress: true}}
	if vs := sim.State(t).Vendors; !slices.Equal(vs, want) {
		t.Fatalf("state's vendors %+v", vs)
	}
	for field, body := range map[string]string{
		"profileType":  `{"paddedICCIDs":true}`,
		"profileType ": `{"profileType":"nope","paddedICCIDs":true}`,
		"paddedICCIDs": `{"profileType":"a","paddedICCIDs":"yes"}`,
		"paddedICCID":  `{"profileType":"a","paddedICCID":true}`,
		"body":         `{"profileType":`,
	} {
		if status, got := put(body); status != http.StatusBadRequest || !strings.Contains(got, `"error"`) || !strings.Contains(got, strings.TrimSpace(field)) {
			t.Errorf("%s: %d %s, want a 400 naming %s", body, status, got, field)
		}
	}
	if status, _ := post(t, sim, "/control/vendor", `{"profileType":"a","paddedICCIDs":true}`); status != http.StatusMethodNotAllowed {
		t.Errorf("POST /control/vendor: %d", status)
	}
	if vs := sim.State(t).Vendors; !slices.Equal(vs, want) {
		t.Fatalf("refused calls changed the vendors: %+v", vs)
	}
	// The client, and every setting off.
	if err := sim.Control.SetVendor(context.Background(), smdpsim.Vendor{ProfileType: "a", OmitSMDPAddress: true}); err != nil {
		t.Fatal(err)
	}
	if err := sim.Control.SetVendor(context.Background(), smdpsim.Vendor{ProfileType: "b"}); err != nil {
		t.Fatal(err)
	}
	if vs := sim.State(t).Vendors; !slices.Equal(vs, []smdpsim.Vendor{{ProfileType: "a", OmitSMDPAddress: true}}) {
		t.Fatalf("vendors %+v", vs)
	}
	if err := sim.Control.SetVendor(context.Background(), smdpsim.Vendor{ProfileType: "nope"}); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("SetVendor of an unknown type: %v", err)
	}
	if err := sim.Control.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if vs := sim.State(t).Vendors; len(vs) != 0 {
		t.Fatalf("vendors after reset %+v", vs)
	}
}

func TestControlAPIOffIsNotFound(t *testing.T) {
	certs, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), server.Config{
		TLSCertFile: certs.ServerCert, TLSKeyFile: certs.ServerKey, ClientCAFile: certs.CACert,
		SMDPAddress: "smdp.example", ProfileTypes: "a:1", ControlAPI: false,
	}, &telemetry.Telemetry{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	if status, _ := httpservertest.Get(t, ts.URL+"/control/state"); status != http.StatusNotFound {
		t.Fatalf("GET /control/state with the control API off: %d", status)
	}
	if status, _, _ := call(t, http.MethodPost, ts.URL+"/control/reset", "", ""); status != http.StatusNotFound {
		t.Fatalf("POST /control/reset with the control API off: %d", status)
	}
	if status, _ := httpservertest.Get(t, ts.URL+"/readyz"); status != http.StatusOK {
		t.Fatalf("readyz: %d", status)
	}
}
