package es2plus_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/devcerts"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

func client(t *testing.T, certs devcerts.Files) *http.Client {
	t.Helper()
	cfg, err := certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (a answer) status2() (status, subject, reason string) {
	h, _ := a.body["header"].(map[string]any)
	fes, _ := h["functionExecutionStatus"].(map[string]any)
	status, _ = fes["status"].(string)
	if d, ok := fes["statusCodeData"].(map[string]any); ok {
		subject, _ = d["subjectCode"].(string)
		reason, _ = d["reasonCode"].(string)
	}
	return status, subject, reason
}

func call(t *testing.T, c *http.Client, sim *smdpsimtest.Sim, function string, body any, mutate ...func(*http.Request)) answer {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, sim.ES2PlusURL+"/gsma/rsp2/es2plus/"+function, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
	for _, m := range mutate {
		m(req)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

var hdr = map[string]string{"functionRequesterIdentifier": "esim-ordering", "functionCallIdentifier": "call-1"}

func wantFailed(t *testing.T, a answer, subject, reason string) {
	t.Helper()
	st, s, r := a.status2()
	if a.status != http.StatusOK || st != "Failed" || s != subject || r != reason {
		t.Fatalf("got %d %s, want Failed %s/%s", a.status, a.raw, subject, reason)
	}
}

func TestFunctions(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "travel:2", SMDPAddress: "smdp.test.example"})
	c := client(t, sim.Certs)

	a := call(t, c, sim, "downloadOrder", map[string]any{"header": hdr, "profileType": "travel"})
	if st, _, _ := a.status2(); a.status != 200 || st != "Executed-Success" ||
		a.header.Get("Content-Type") != "application/json;charset=UTF-8" || a.header.Get("X-Admin-Protocol") != "gsma/rsp/v2.5.0" {
		t.Fatalf("downloadOrder: %d %v %s", a.status, a.header, a.raw)
	}
	iccid, _ := a.body["iccid"].(string)
	if !smdpsim.ValidICCID(iccid) {
		t.Fatalf("iccid %q", iccid)
	}
	a = call(t, c, sim, "confirmOrder", map[string]any{"header": hdr, "iccid": iccid, "eid": "89049032000000000000000000000001", "releaseFlag": true})
	if st, _, _ := a.status2(); st != "Executed-Success" || a.body["smdpAddress"] != "smdp.test.example" || a.body["matchingId"] == "" || a.body["eid"] == nil {
		t.Fatalf("confirmOrder: %s", a.raw)
	}
	wantFailed(t, call(t, c, sim, "confirmOrder", map[string]any{"header": hdr, "iccid": iccid, "releaseFlag": true}), "8.2.1", "3.7")
	a = call(t, c, sim, "cancelOrder", map[string]any{"header": hdr, "iccid": iccid, "finalProfileStatusIndicator": "Available"})
	if st, _, _ := a.status2(); st != "Executed-Success" {
		t.Fatalf("cancelOrder: %s", a.raw)
	}
	if p, _ := sim.State(t).Profile(iccid); p.State != smdpsim.StateAvailable {
		t.Fatalf("profile %+v", p)
	}

	// Misuse.
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr, "profileType": "nope"}), "8.2.5", "3.9")
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr}), "1.2", "2.2")
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr, "iccid": "8900000000000000000"}), "8.2.1", "3.9")
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": map[string]string{"functionCallIdentifier": "x"}, "profileType": "travel"}), "1.2", "2.2")
	wantFailed(t, call(t, c, sim, "confirmOrder", map[string]any{"header": hdr, "releaseFlag": true}), "1.2", "2.2")
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr, "iccid": iccid, "finalProfileStatusIndicator": "Available"}), "8.2.1", "3.7")
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr, "iccid": iccid, "finalProfileStatusIndicator": "Deleted"}), "1.2", "2.1")
	call(t, c, sim, "downloadOrder", map[string]any{"header": hdr, "profileType": "travel"})
	call(t, c, sim, "downloadOrder", map[string]any{"header": hdr, "profileType": "travel"})
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr, "profileType": "travel"}), "8.2.5", "3.7")

	// Not ES2+ calls at all.
	if a := call(t, c, sim, "downloadOrder", map[string]any{"header": hdr}, func(r *http.Request) { r.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.2.0") }); a.status != 400 {
		t.Fatalf("wrong protocol: %d %s", a.status, a.raw)
	} else if st, _, _ := a.status2(); st != "Failed" {
		t.Fatalf("wrong protocol body: %s", a.raw)
	}
	if a := call(t, c, sim, "downloadOrder", nil, func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }); a.status != 415 {
		t.Fatalf("text/plain: %d", a.status)
	}
	if a := call(t, c, sim, "downloadOrder", nil, func(r *http.Request) { r.Method = http.MethodPut }); a.status != 405 {
		t.Fatalf("PUT: %d", a.status)
	}
	if a := call(t, c, sim, "downloadOrder", nil, func(r *http.Request) { r.Header.Set("Content-Type", "application/json; charset=utf-8") }); a.status != 200 {
		t.Fatalf("charset: %d", a.status)
	}
	big := map[string]any{"header": hdr, "eid": strings.Repeat("9", 70<<10)}
	if a := call(t, c, sim, "downloadOrder", big); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("70 KiB: %d", a.status)
	}
	if a := call(t, c, sim, "releaseProfile", map[string]any{"header": hdr}); a.status != 404 {
		t.Fatalf("unknown function: %d", a.status)
	}
}

func TestFaultsOverHTTP(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	c := client(t, sim.Certs)
	ctx := context.Background()
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "downloadOrder", Mode: "garbage", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if a := call(t, c, sim, "downloadOrder", map[string]any{"header": hdr, "profileType": "esim-travel"}); a.status != 200 || a.raw != "<html>garbage</html>" {
		t.Fatalf("garbage: %d %q", a.status, a.raw)
	}
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "downloadOrder", Mode: "hang", Hang: 100 * time.Millisecond, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if a := call(t, c, sim, "downloadOrder", map[string]any{"header": hdr, "profileType": "esim-travel"}); a.status != 503 || a.raw != "" {
		t.Fatalf("hang: %d %q", a.status, a.raw)
	}
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "downloadOrder", Mode: "fail", SubjectCode: "8.2.5", ReasonCode: "3.7", Count: 1}); err != nil {
		t.Fatal(err)
	}
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr, "profileType": "esim-travel"}), "8.2.5", "3.7")
	// A hang the client gives up on.
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "downloadOrder", Mode: "hang"}); err != nil {
		t.Fatal(err)
	}
	impatient := client(t, sim.Certs)
	impatient.Timeout = 200 * time.Millisecond
	data, _ := json.Marshal(map[string]any{"header": hdr, "profileType": "esim-travel"})
	req, _ := http.NewRequest(http.MethodPost, sim.ES2PlusURL+"/gsma/rsp2/es2plus/downloadOrder", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
	if _, err := impatient.Do(req); err == nil {
		t.Fatal("a hang answered")
	}
	st := sim.State(t)
	if p, _ := st.Pool("esim-travel"); p.Allocated != 0 {
		t.Fatalf("faulted calls allocated: %+v", p)
	}
	if st.Calls["downloadOrder"]["fault-hang"] != 2 || st.Calls["downloadOrder"]["fault-garbage"] != 1 {
		t.Fatalf("calls %+v", st.Calls)
	}
}

func TestMutualTLSIsRequired(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	good, err := sim.Certs.ClientTLS()
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
	foreign.RootCAs = good.RootCAs
	noCert := good.Clone()
	noCert.Certificates = nil
	for name, cfg := range map[string]*tls.Config{"no certificate": noCert, "another CA's certificate": foreign} {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		data, _ := json.Marshal(map[string]any{"header": hdr, "profileType": "esim-travel"})
		req, _ := http.NewRequest(http.MethodPost, sim.ES2PlusURL+"/gsma/rsp2/es2plus/downloadOrder", bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d", name, resp.StatusCode)
		}
	}
	if p, _ := sim.State(t).Pool("esim-travel"); p.Allocated != 0 {
		t.Fatalf("a refused client allocated: %+v", p)
	}
}
