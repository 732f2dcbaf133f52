package control_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/libs/httpserver/httpservertest"
	"github.com/esimplatform/esim/libs/telemetry"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/server"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return httpservertest.Do(t, req)
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
		status, got := post(t, sim.ControlURL+"/control/faults", body)
		if status != http.StatusBadRequest || !strings.Contains(got, `"error"`) || !strings.Contains(got, field) {
			t.Errorf("%s: %d %s, want a 400 naming %s", body, status, got, field)
		}
	}
	status, got := post(t, sim.ControlURL+"/control/faults", `{"function":"confirmOrder","mode":"hang","hang":"2s","count":1}`)
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
	if status, _ := post(t, ts.URL+"/control/reset", ""); status != http.StatusNotFound {
		t.Fatalf("POST /control/reset with the control API off: %d", status)
	}
	if status, _ := httpservertest.Get(t, ts.URL+"/readyz"); status != http.StatusOK {
		t.Fatalf("readyz: %d", status)
	}
}
