package control_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/devcerts"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

// operator is the operator's ES2+ endpoint: mutual TLS with certificates
// of certs' CA, recording each request and answering with answer.
type operator struct {
	mu       sync.Mutex
	requests []received
	answer   func(w http.ResponseWriter)
	url      string
}

type received struct {
	path, protocol, contentType string
	clientCN                    string
	body                        map[string]any
}

func startOperator(t *testing.T, certs devcerts.Files) *operator {
	t.Helper()
	op := &operator{answer: func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := received{path: r.URL.Path, protocol: r.Header.Get("X-Admin-Protocol"), contentType: r.Header.Get("Content-Type"), clientCN: r.TLS.PeerCertificates[0].Subject.CommonName}
		_ = json.Unmarshal(raw, &rec.body)
		op.mu.Lock()
		op.requests = append(op.requests, rec)
		answer := op.answer
		op.mu.Unlock()
		answer(w)
	}))
	cfg, err := certs.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	ts.TLS = cfg
	ts.StartTLS()
	t.Cleanup(ts.Close)
	op.url = ts.URL
	return op
}

func (o *operator) received() []received {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]received(nil), o.requests...)
}

// releasedProfile orders a profile through ES2+ as ordering does.
func releasedProfile(t *testing.T, sim *smdpsimtest.Sim) string {
	t.Helper()
	c := es2Client(t, sim.Certs)
	iccid := es2Call(t, c, sim, "downloadOrder", map[string]any{"profileType": "esim-travel"})["iccid"].(string)
	es2Call(t, c, sim, "confirmOrder", map[string]any{"iccid": iccid, "releaseFlag": true})
	return iccid
}

func es2Client(t *testing.T, certs devcerts.Files) *http.Client {
	t.Helper()
	cfg, err := certs.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
}

var es2Seq int

func es2Call(t *testing.T, c *http.Client, sim *smdpsimtest.Sim, function string, body map[string]any) map[string]any {
	t.Helper()
	es2Seq++
	body["header"] = map[string]string{"functionRequesterIdentifier": "test", "functionCallIdentifier": fmt.Sprintf("call-%d", es2Seq)}
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, sim.ES2PlusURL+"/gsma/rsp2/es2plus/"+function, strings.NewReader(string(data)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if st := out["header"].(map[string]any)["functionExecutionStatus"].(map[string]any)["status"]; st != "Executed-Success" {
		t.Fatalf("%s: %v", function, out)
	}
	return out
}

// The control API installs a released profile, and the simulator tells
// the operator over mutual TLS with its client certificate: BPP download
// (3) then BPP installation (4), Executed-Success, with SGP.22's fields;
// attach and use follow. An operator's refusal is reported and changes
// nothing on the device.
func TestInstallAttachUse(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	op := startOperator(t, sim.Certs)
	sim.NotifyOperator(t, op.url)
	ctx := context.Background()
	iccid := releasedProfile(t, sim)

	res, err := sim.Control.Install(ctx, iccid, "89049032000000000000000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Notifications) != 2 || res.Notifications[0] != (smdpsim.NotificationResult{Point: 3, Sent: true}) ||
		res.Notifications[1] != (smdpsim.NotificationResult{Point: 4, Sent: true}) || res.Device.InstalledAt.IsZero() {
		t.Fatalf("install = %+v", res)
	}
	got := op.received()
	if len(got) != 2 {
		t.Fatalf("the operator received %+v", got)
	}
	for i, point := range []float64{3, 4} {
		r := got[i]
		h, _ := r.body["header"].(map[string]any)
		status, _ := r.body["notificationPointStatus"].(map[string]any)
		ts, _ := r.body["timestamp"].(string)
		at, err := time.Parse(time.RFC3339, ts)
		if r.path != "/gsma/rsp2/es2plus/handleDownloadProgressInfo" || r.protocol != "gsma/rsp/v2.5.0" || !strings.HasPrefix(r.contentType, "application/json") ||
			r.clientCN != devcerts.ClientCommonName || h["functionRequesterIdentifier"] != "smdp-sim-test" || h["functionCallIdentifier"] == "" ||
			r.body["iccid"] != iccid || r.body["eid"] != "89049032000000000000000000000001" || r.body["profileType"] != "esim-travel" ||
			r.body["notificationPointId"] != point || status["status"] != "Executed-Success" || err != nil || !at.Equal(res.Device.InstalledAt.Truncate(time.Second)) {
			t.Errorf("notification %d: %+v", i, r)
		}
	}
	if got[0].body["header"].(map[string]any)["functionCallIdentifier"] == got[1].body["header"].(map[string]any)["functionCallIdentifier"] {
		t.Error("two notifications under one functionCallIdentifier")
	}

	// The operator refuses: reported, and the device keeps its profile.
	op.mu.Lock()
	op.answer = func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"header":{"functionExecutionStatus":{"status":"Failed","statusCodeData":{"subjectCode":"8.2.1","reasonCode":"3.9","message":"unknown ICCID"}}}}`)
	}
	op.mu.Unlock()
	again, err := sim.Control.Install(ctx, iccid, "")
	if err != nil || len(again.Notifications) != 2 || !strings.Contains(again.Notifications[1].Error, "Failed 8.2.1/3.9") || !again.Device.InstalledAt.Equal(res.Device.InstalledAt) {
		t.Fatalf("install again = %+v, %v", again, err)
	}

	d, err := sim.Control.Attach(ctx, iccid)
	if err != nil || d.AttachedAt.IsZero() {
		t.Fatalf("attach = %+v, %v", d, err)
	}
	if u, err := sim.Control.Use(ctx, iccid, 1500); err != nil || u.UsedBytes != 1500 || !u.AttachedAt.Equal(d.AttachedAt) {
		t.Fatalf("use = %+v, %v", u, err)
	}
	if st := sim.State(t); len(st.Devices) != 1 || st.Devices[0].UsedBytes != 1500 {
		t.Errorf("devices %+v", st.Devices)
	}
}

// Device steps out of order, on unknown ICCIDs or with bad bodies are
// refused with the status that says why, and change nothing.
func TestDeviceRefusals(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	iccid := releasedProfile(t, sim)
	before, _ := json.Marshal(sim.State(t))
	for _, c := range []struct {
		path, body string
		status     int
		says       string
	}{
		{"/control/profiles/8988000000000000000/install", "", http.StatusNotFound, "unknown ICCID"},
		{"/control/profiles/" + iccid + "/attach", "", http.StatusConflict, "not Installed"},
		{"/control/profiles/" + iccid + "/use", `{"bytes":10}`, http.StatusConflict, "not Installed"},
		{"/control/profiles/" + iccid + "/use", `{"bytes":"ten"}`, http.StatusBadRequest, "bytes"},
		{"/control/profiles/" + iccid + "/use", `{"byte":10}`, http.StatusBadRequest, "byte"},
		{"/control/profiles/" + iccid + "/install", `{"eid":`, http.StatusBadRequest, "body"},
	} {
		status, got := post(t, sim, c.path, c.body)
		if status != c.status || !strings.Contains(got, `"error"`) || !strings.Contains(got, c.says) {
			t.Errorf("POST %s %s: %d %s, want %d saying %q", c.path, c.body, status, got, c.status, c.says)
		}
	}
	if after, _ := json.Marshal(sim.State(t)); string(after) != string(before) {
		t.Errorf("refused calls changed the simulator:\n%s\n%s", before, after)
	}
	// Without an operator the install still happens, and says nothing was sent.
	status, got := post(t, sim, "/control/profiles/"+iccid+"/install", "")
	if status != http.StatusOK || !strings.Contains(got, `"sent":false`) {
		t.Fatalf("install without an operator: %d %s", status, got)
	}
	if _, err := sim.Control.Use(context.Background(), iccid, 0); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("use 0 bytes: %v", err)
	}
}
