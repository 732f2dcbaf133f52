package es2plus_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
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

var callSeq atomic.Int64

// hdr is the header of a new call: a functionCallIdentifier of its own,
// since the simulator answers a call sent again under one as it did.
func hdr() map[string]string {
	return map[string]string{"functionRequesterIdentifier": "esim-ordering", "functionCallIdentifier": fmt.Sprintf("call-%d", callSeq.Add(1))}
}

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

	a := call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": "travel"})
	if st, _, _ := a.status2(); a.status != 200 || st != "Executed-Success" ||
		a.header.Get("Content-Type") != "application/json;charset=UTF-8" || a.header.Get("X-Admin-Protocol") != "gsma/rsp/v2.5.0" {
		t.Fatalf("downloadOrder: %d %v %s", a.status, a.header, a.raw)
	}
	iccid, _ := a.body["iccid"].(string)
	if !smdpsim.ValidICCID(iccid) {
		t.Fatalf("iccid %q", iccid)
	}
	a = call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": iccid, "eid": "89049032000000000000000000000001", "releaseFlag": true})
	if st, _, _ := a.status2(); st != "Executed-Success" || a.body["smdpAddress"] != "smdp.test.example" || a.body["matchingId"] == "" || a.body["eid"] == nil {
		t.Fatalf("confirmOrder: %s", a.raw)
	}
	wantFailed(t, call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": iccid, "releaseFlag": true}), "8.2.1", "3.7")
	a = call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": iccid, "finalProfileStatusIndicator": "Available"})
	if st, _, _ := a.status2(); st != "Executed-Success" {
		t.Fatalf("cancelOrder: %s", a.raw)
	}
	if p, _ := sim.State(t).Profile(iccid); p.State != smdpsim.StateAvailable {
		t.Fatalf("profile %+v", p)
	}

	// Misuse.
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": "nope"}), "8.2.5", "3.9")
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr()}), "1.2", "2.2")
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "iccid": "8900000000000000000"}), "8.2.1", "3.9")
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": map[string]string{"functionCallIdentifier": "x"}, "profileType": "travel"}), "1.2", "2.2")
	wantFailed(t, call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "releaseFlag": true}), "1.2", "2.2")
	wantFailed(t, call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": iccid}), "1.2", "2.2")
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": iccid, "finalProfileStatusIndicator": "Available"}), "8.2.1", "3.7")
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": iccid, "finalProfileStatusIndicator": "Deleted"}), "1.2", "2.1")
	call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": "travel"})
	call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": "travel"})
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": "travel"}), "8.2.5", "3.7")

	// Not ES2+ calls at all.
	if a := call(t, c, sim, "downloadOrder", map[string]any{"header": hdr()}, func(r *http.Request) { r.Header.Set("X-Admin-Protocol", "gsma/rsp/v3.0.0") }); a.status != 400 {
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
	big := map[string]any{"header": hdr(), "eid": strings.Repeat("9", 70<<10)}
	if a := call(t, c, sim, "downloadOrder", big); a.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("70 KiB: %d", a.status)
	}
	if a := call(t, c, sim, "getProfileStatus", map[string]any{"header": hdr()}); a.status != 404 {
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
	if a := call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": "esim-travel"}); a.status != 200 || a.raw != "<html>garbage</html>" {
		t.Fatalf("garbage: %d %q", a.status, a.raw)
	}
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "downloadOrder", Mode: "hang", Hang: 100 * time.Millisecond, Count: 1}); err != nil {
		t.Fatal(err)
	}
	if a := call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": "esim-travel"}); a.status != 503 || a.raw != "" {
		t.Fatalf("hang: %d %q", a.status, a.raw)
	}
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "downloadOrder", Mode: "fail", SubjectCode: "8.2.5", ReasonCode: "3.7", Count: 1}); err != nil {
		t.Fatal(err)
	}
	wantFailed(t, call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": "esim-travel"}), "8.2.5", "3.7")
	// A hang the client gives up on.
	if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: "downloadOrder", Mode: "hang"}); err != nil {
		t.Fatal(err)
	}
	// The client gives up once the simulator holds the call, however long
	// a loaded machine takes to get it there.
	impatient, giveUp := context.WithCancel(ctx)
	defer giveUp()
	data, _ := json.Marshal(map[string]any{"header": hdr(), "profileType": "esim-travel"})
	req, _ := http.NewRequestWithContext(impatient, http.MethodPost, sim.ES2PlusURL+"/gsma/rsp2/es2plus/downloadOrder", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
	answered := make(chan error, 1)
	go func() {
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	for sim.State(t).Calls["downloadOrder"]["fault-hang"] < 2 {
		select {
		case err := <-answered:
			t.Fatalf("a hang answered before the simulator held it: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	giveUp()
	if err := <-answered; err == nil {
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
		data, _ := json.Marshal(map[string]any{"header": hdr(), "profileType": "esim-travel"})
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

// Any X-Admin-Protocol of SGP.22 v2 is spoken, and answered in the
// caller's version; another, or none, is refused in the ES2+ error shape
// and executes nothing. So is a Content-Type other than JSON in UTF-8.
func TestProtocolVersionAndContentType(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "travel:100"})
	c := client(t, sim.Certs)
	download := func(mutate func(*http.Request)) answer {
		return call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": "travel"}, mutate)
	}
	allocated := 0
	for _, v := range []string{"gsma/rsp/v2.5.0", "gsma/rsp/v2.2.0", "gsma/rsp/v2.1", "gsma/rsp/v2.10.2", "gsma/rsp/v2.0.0"} {
		a := download(func(r *http.Request) { r.Header.Set("X-Admin-Protocol", v) })
		if st, _, _ := a.status2(); a.status != 200 || st != "Executed-Success" || a.header.Get("X-Admin-Protocol") != v {
			t.Errorf("X-Admin-Protocol %s: %d %v %s", v, a.status, a.header, a.raw)
		}
		allocated++
	}
	for _, v := range []string{"", "gsma/rsp/v3.0.0", "gsma/rsp/v1.1.0", "gsma/rsp/v2", "gsma/rsp/v2.", "gsma/rsp/v2.x", "gsma/rsp/v2.5.0.1",
		"GSMA/RSP/v2.5.0", "gsma/rsp/v2.1234.0", "gsma/rsp/v2.5.0;x"} {
		a := download(func(r *http.Request) {
			if v == "" {
				r.Header.Del("X-Admin-Protocol")
			} else {
				r.Header.Set("X-Admin-Protocol", v)
			}
		})
		st, subject, reason := a.status2()
		d := statusCodeData(a)
		if a.status != 400 || st != "Failed" || subject != "1.2" || reason != "2.1" || d["subjectIdentifier"] != "X-Admin-Protocol" ||
			a.header.Get("Content-Type") != "application/json;charset=UTF-8" || a.header.Get("X-Admin-Protocol") != "gsma/rsp/v2.5.0" {
			t.Errorf("X-Admin-Protocol %q: %d %v %s, want a 400 Failed 1.2/2.1 naming X-Admin-Protocol", v, a.status, a.header, a.raw)
		}
	}
	for _, ct := range []string{"application/json", "application/json;charset=UTF-8", "application/json; charset=utf-8", "Application/JSON;Charset=\"UTF-8\""} {
		a := download(func(r *http.Request) { r.Header.Set("Content-Type", ct) })
		if st, _, _ := a.status2(); a.status != 200 || st != "Executed-Success" {
			t.Errorf("Content-Type %q: %d %s", ct, a.status, a.raw)
		}
		allocated++
	}
	for _, ct := range []string{"", "text/plain", "application/json;charset=ISO-8859-1", "application/json;charset=UTF-16", "application/jsonx", "application/json;;"} {
		a := download(func(r *http.Request) {
			if ct == "" {
				r.Header.Del("Content-Type")
			} else {
				r.Header.Set("Content-Type", ct)
			}
		})
		if st, subject, reason := a.status2(); a.status != 415 || st != "Failed" || subject != "1.2" || reason != "2.1" || statusCodeData(a)["subjectIdentifier"] != "Content-Type" {
			t.Errorf("Content-Type %q: %d %s, want a 415 Failed naming Content-Type", ct, a.status, a.raw)
		}
	}
	st := sim.State(t)
	if p, _ := st.Pool("travel"); p.Allocated != allocated || st.Calls["downloadOrder"]["success"] != allocated {
		t.Errorf("pool %+v calls %v, want %d allocated by the accepted calls only", p, st.Calls, allocated)
	}
}

func statusCodeData(a answer) map[string]any {
	h, _ := a.body["header"].(map[string]any)
	fes, _ := h["functionExecutionStatus"].(map[string]any)
	d, _ := fes["statusCodeData"].(map[string]any)
	return d
}

// Every path that is not an ES2+ function is answered 404 in the ES2+
// error shape, whatever the method.
func TestUnknownPathsAnswerInTheES2PlusShape(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	c := client(t, sim.Certs)
	for _, path := range []string{"/", "/nothing", "/gsma/rsp2/es2plus/", "/gsma/rsp2/es2plus/getProfileStatus", "/gsma/rsp2/es2plus/downloadOrder/x",
		"/gsma/rsp2/es2plus/DownloadOrder", "/gsma/rsp2/es9plus/downloadOrder", "/control/state"} {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			req, _ := http.NewRequest(method, sim.ES2PlusURL+path, strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
			_ = json.Unmarshal(raw, &a.body)
			st, subject, reason := a.status2()
			if a.status != 404 || st != "Failed" || subject != "1.2" || reason != "3.9" || statusCodeData(a)["subjectIdentifier"] == "" ||
				a.header.Get("Content-Type") != "application/json;charset=UTF-8" || a.header.Get("X-Admin-Protocol") != "gsma/rsp/v2.5.0" {
				t.Errorf("%s %s: %d %v %s, want a 404 Failed 1.2/3.9", method, path, a.status, a.header, a.raw)
			}
		}
	}
	if calls := sim.State(t).Calls; len(calls) != 0 {
		t.Errorf("calls counted: %v", calls)
	}
}

// confirmOrder without releaseFlag is refused naming it, and changes
// nothing; false confirms without releasing, and releaseProfile then
// releases.
func TestReleaseFlagAndReleaseProfile(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "travel:5"})
	c := client(t, sim.Certs)
	iccid := downloadOK(t, c, sim, "travel")

	a := call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": iccid})
	wantFailed(t, a, "1.2", "2.2")
	if d := statusCodeData(a); d["subjectIdentifier"] != "releaseFlag" {
		t.Errorf("missing releaseFlag: %s", a.raw)
	}
	wantFailed(t, call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": iccid, "releaseFlag": nil}), "1.2", "2.2")
	if p, _ := sim.State(t).Profile(iccid); p.State != smdpsim.StateAllocated || len(p.History) != 1 {
		t.Fatalf("after confirmOrders without releaseFlag: %+v", p)
	}
	// Not yet Confirmed: nothing to release.
	wantFailed(t, call(t, c, sim, "releaseProfile", map[string]any{"header": hdr(), "iccid": iccid}), "8.2.1", "3.7")

	a = call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": iccid, "releaseFlag": false})
	if st, _, _ := a.status2(); st != "Executed-Success" {
		t.Fatalf("confirmOrder releaseFlag false: %s", a.raw)
	}
	if p, _ := sim.State(t).Profile(iccid); p.State != smdpsim.StateConfirmed {
		t.Fatalf("after confirmOrder releaseFlag false: %+v", p)
	}
	a = call(t, c, sim, "releaseProfile", map[string]any{"header": hdr(), "iccid": iccid})
	if st, _, _ := a.status2(); a.status != 200 || st != "Executed-Success" || a.header.Get("X-Admin-Protocol") != "gsma/rsp/v2.5.0" {
		t.Fatalf("releaseProfile: %d %s", a.status, a.raw)
	}
	if p, _ := sim.State(t).Profile(iccid); p.State != smdpsim.StateReleased || strings.Join(p.History, ",") != "allocated,confirmed,released" {
		t.Fatalf("after releaseProfile: %+v", p)
	}
	// Released already, unknown, missing, not POST.
	wantFailed(t, call(t, c, sim, "releaseProfile", map[string]any{"header": hdr(), "iccid": iccid}), "8.2.1", "3.7")
	wantFailed(t, call(t, c, sim, "releaseProfile", map[string]any{"header": hdr(), "iccid": "8900000000000000000"}), "8.2.1", "3.9")
	wantFailed(t, call(t, c, sim, "releaseProfile", map[string]any{"header": hdr()}), "1.2", "2.2")
	if a := call(t, c, sim, "releaseProfile", nil, func(r *http.Request) { r.Method = http.MethodGet }); a.status != 405 {
		t.Errorf("GET releaseProfile: %d", a.status)
	}
	// A cancelled order's profile has nothing to release either.
	call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": iccid, "finalProfileStatusIndicator": "Available"})
	wantFailed(t, call(t, c, sim, "releaseProfile", map[string]any{"header": hdr(), "iccid": iccid}), "8.2.1", "3.7")
	st := sim.State(t)
	if p, _ := st.Pool("travel"); p.Released != 0 || p.Available != 5 || st.Calls["releaseProfile"]["success"] != 1 || st.Calls["releaseProfile"]["failed"] != 5 {
		t.Errorf("pool %+v calls %v", p, st.Calls)
	}
}

func downloadOK(t *testing.T, c *http.Client, sim *smdpsimtest.Sim, profileType string, more ...string) string {
	t.Helper()
	body := map[string]any{"header": hdr(), "profileType": profileType}
	for i := 0; i+1 < len(more); i += 2 {
		body[more[i]] = more[i+1]
	}
	a := call(t, c, sim, "downloadOrder", body)
	iccid, _ := a.body["iccid"].(string)
	if st, _, _ := a.status2(); st != "Executed-Success" || iccid == "" {
		t.Fatalf("downloadOrder: %s", a.raw)
	}
	return iccid
}

// An EID or matchingId other than the one a profile is bound to is
// refused with Invalid Association (3.10) and the field's subject code,
// and changes nothing.
func TestInvalidAssociation(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "travel:5"})
	c := client(t, sim.Certs)
	const eid, other = "89049032000000000000000000000001", "89049032000000000000000000000002"

	// Bound by downloadOrder: confirmOrder may repeat the EID, not change it.
	bound := downloadOK(t, c, sim, "travel", "eid", eid)
	wantFailed(t, call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": bound, "eid": other, "releaseFlag": true}), "8.1.1", "3.10")
	if p, _ := sim.State(t).Profile(bound); p.State != smdpsim.StateAllocated || p.EID != eid || p.MatchingID != "" {
		t.Fatalf("after a confirmOrder with another EID: %+v", p)
	}
	a := call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": bound, "eid": eid, "releaseFlag": true})
	mid, _ := a.body["matchingId"].(string)
	if st, _, _ := a.status2(); st != "Executed-Success" || a.body["eid"] != eid || mid == "" {
		t.Fatalf("confirmOrder with the bound EID: %s", a.raw)
	}

	// cancelOrder: another EID, another matchingId, an EID for a profile
	// bound to none.
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": bound, "eid": other, "finalProfileStatusIndicator": "Available"}), "8.1.1", "3.10")
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": bound, "matchingId": "OTHER-MATCHING-ID", "finalProfileStatusIndicator": "Available"}), "8.2.6", "3.10")
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": bound, "eid": eid, "matchingId": "OTHER", "finalProfileStatusIndicator": "Available"}), "8.2.6", "3.10")
	unbound := downloadOK(t, c, sim, "travel")
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": unbound, "eid": eid, "finalProfileStatusIndicator": "Available"}), "8.1.1", "3.10")
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": unbound, "matchingId": mid, "finalProfileStatusIndicator": "Available"}), "8.2.6", "3.10")
	st := sim.State(t)
	if p, _ := st.Profile(bound); p.State != smdpsim.StateReleased || p.EID != eid || p.MatchingID != mid {
		t.Fatalf("after refused cancelOrders: %+v", p)
	}
	if p, _ := st.Profile(unbound); p.State != smdpsim.StateAllocated {
		t.Fatalf("after refused cancelOrders: %+v", p)
	}

	// Bound by confirmOrder: the EID and matchingId it was given.
	confirmed := downloadOK(t, c, sim, "travel")
	call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": confirmed, "eid": other, "matchingId": "MINE-1", "releaseFlag": false})
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": confirmed, "eid": eid, "finalProfileStatusIndicator": "Available"}), "8.1.1", "3.10")
	wantFailed(t, call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": confirmed, "matchingId": mid, "finalProfileStatusIndicator": "Available"}), "8.2.6", "3.10")

	// The right ones, or none, cancel.
	for iccid, body := range map[string]map[string]any{
		bound:     {"eid": eid, "matchingId": mid},
		unbound:   {},
		confirmed: {"eid": other, "matchingId": "MINE-1"},
	} {
		body["header"], body["iccid"], body["finalProfileStatusIndicator"] = hdr(), iccid, "Available"
		if a := call(t, c, sim, "cancelOrder", body); a.body == nil || func() bool { st, _, _ := a.status2(); return st != "Executed-Success" }() {
			t.Errorf("cancelOrder %v: %s", body, a.raw)
		}
	}
	if p, _ := sim.State(t).Pool("travel"); p.Available != 5 || p.Cancelled != 3 {
		t.Errorf("pool %+v", p)
	}
}

// A call sent again under the header of one executed is answered as it
// was and executes nothing; faults that did not execute the function are
// not remembered; another request under a used header is refused; reset
// forgets.
func TestCallsAreDeduplicated(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "travel:10"})
	c := client(t, sim.Certs)
	ctx := context.Background()
	h := hdr()
	download := map[string]any{"header": h, "profileType": "travel"}
	first := call(t, c, sim, "downloadOrder", download)
	again := call(t, c, sim, "downloadOrder", download)
	if first.body["iccid"] == nil || again.raw != first.raw {
		t.Fatalf("downloadOrder sent again: %s, then %s", first.raw, again.raw)
	}
	st := sim.State(t)
	if p, _ := st.Pool("travel"); p.Allocated != 1 || st.Calls["downloadOrder"]["success"] != 1 || st.Calls["downloadOrder"]["replayed"] != 1 {
		t.Fatalf("pool %+v calls %v, want one allocated", p, st.Calls)
	}
	// The same identifier from another requester, or for another
	// function, is another call.
	other := map[string]any{"header": map[string]string{"functionRequesterIdentifier": "someone-else", "functionCallIdentifier": h["functionCallIdentifier"]}, "profileType": "travel"}
	if a := call(t, c, sim, "downloadOrder", other); a.body["iccid"] == first.body["iccid"] {
		t.Fatalf("another requester got the same answer: %s", a.raw)
	}
	a := call(t, c, sim, "confirmOrder", map[string]any{"header": h, "iccid": first.body["iccid"], "releaseFlag": true})
	if st, _, _ := a.status2(); st != "Executed-Success" {
		t.Fatalf("confirmOrder under downloadOrder's identifier: %s", a.raw)
	}
	// Another request under a used header.
	a = call(t, c, sim, "downloadOrder", map[string]any{"header": h, "profileType": "travel", "eid": "89049032000000000000000000000001"})
	wantFailed(t, a, "1.2", "3.3")
	if statusCodeData(a)["subjectIdentifier"] != "functionCallIdentifier" {
		t.Errorf("reused header: %s", a.raw)
	}

	// A refusal is answered again as it was.
	refused := map[string]any{"header": hdr(), "iccid": first.body["iccid"], "releaseFlag": true}
	r1 := call(t, c, sim, "confirmOrder", refused)
	wantFailed(t, r1, "8.2.1", "3.7")
	if r2 := call(t, c, sim, "confirmOrder", refused); r2.raw != r1.raw {
		t.Errorf("a refusal sent again: %s, then %s", r1.raw, r2.raw)
	}

	// Faults that replace the call are not remembered: sent again, the
	// call executes.
	for _, mode := range []string{smdpsim.ModeFail, smdpsim.ModeGarbage, smdpsim.ModeHang} {
		f := smdpsim.Fault{Function: "downloadOrder", Mode: mode, Count: 1}
		if mode == smdpsim.ModeHang {
			f.Hang = time.Millisecond
		}
		if err := sim.Control.AddFault(ctx, f); err != nil {
			t.Fatal(err)
		}
		body := map[string]any{"header": hdr(), "profileType": "travel"}
		if a := call(t, c, sim, "downloadOrder", body); a.body["iccid"] != nil {
			t.Fatalf("%s: %s", mode, a.raw)
		}
		if a := call(t, c, sim, "downloadOrder", body); a.body["iccid"] == nil {
			t.Errorf("%s, then sent again: %s", mode, a.raw)
		}
	}
	st = sim.State(t)
	if p, _ := st.Pool("travel"); p.Allocated != 4 || p.Released != 1 || st.Calls["downloadOrder"]["replayed"] != 1 || st.Calls["confirmOrder"]["replayed"] != 1 {
		t.Fatalf("pool %+v calls %v", p, st.Calls)
	}

	// Reset forgets: the first call executes again.
	if err := sim.Control.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if a := call(t, c, sim, "downloadOrder", download); a.body["iccid"] == nil || a.body["iccid"] == first.body["iccid"] {
		t.Errorf("after reset: %s", a.raw)
	}
	if st := sim.State(t); st.Calls["downloadOrder"]["success"] != 1 || len(st.Calls["downloadOrder"]) != 1 {
		t.Errorf("after reset: calls %v", st.Calls)
	}
}

// A lose fault executes the function and closes the connection
// unanswered; the call sent again under its header learns what it did.
func TestLoseFault(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "travel:10"})
	c := client(t, sim.Certs)
	ctx := context.Background()
	for _, function := range []string{"downloadOrder", "confirmOrder"} {
		if err := sim.Control.AddFault(ctx, smdpsim.Fault{Function: function, Mode: smdpsim.ModeLose, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	body := map[string]any{"header": hdr(), "profileType": "travel"}
	if raw, err := post(c, sim, "downloadOrder", body); err == nil {
		t.Fatalf("a lost downloadOrder answered %q", raw)
	}
	st := sim.State(t)
	if p, _ := st.Pool("travel"); p.Allocated != 1 || len(st.Profiles) != 1 || st.Calls["downloadOrder"]["fault-lose"] != 1 {
		t.Fatalf("after a lost downloadOrder: pool %+v calls %v", p, st.Calls)
	}
	iccid := st.Profiles[0].ICCID
	a := call(t, c, sim, "downloadOrder", body)
	if a.body["iccid"] != iccid {
		t.Fatalf("the lost downloadOrder sent again: %s, want %s", a.raw, iccid)
	}
	confirm := map[string]any{"header": hdr(), "iccid": iccid, "releaseFlag": true}
	if raw, err := post(c, sim, "confirmOrder", confirm); err == nil {
		t.Fatalf("a lost confirmOrder answered %q", raw)
	}
	p, _ := sim.State(t).Profile(iccid)
	if p.State != smdpsim.StateReleased || p.MatchingID == "" {
		t.Fatalf("after a lost confirmOrder: %+v", p)
	}
	if a := call(t, c, sim, "confirmOrder", confirm); a.body["matchingId"] != p.MatchingID {
		t.Fatalf("the lost confirmOrder sent again: %s, want matchingId %s", a.raw, p.MatchingID)
	}
	st = sim.State(t)
	if pool, _ := st.Pool("travel"); pool.Allocated != 0 || pool.Released != 1 || st.Calls["confirmOrder"]["fault-lose"] != 1 || st.Calls["confirmOrder"]["replayed"] != 1 {
		t.Fatalf("pool %+v calls %v", pool, st.Calls)
	}
}

// post sends one call and returns its body, or the error of a call with
// no answer.
func post(c *http.Client, sim *smdpsimtest.Sim, function string, body any) (string, error) {
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, sim.ES2PlusURL+"/gsma/rsp2/es2plus/"+function, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return string(raw), err
}

// A vendor setting changes the answers for its profile type only: ICCIDs
// F-padded (and taken padded or not), Executed-WithWarning with codes, no
// smdpAddress.
func TestVendorSettings(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{ProfileTypes: "padded:5,warning:5,omit:5,plain:5", SMDPAddress: "smdp.test.example", Vendors: []smdpsim.Vendor{
		{ProfileType: "padded", PaddedICCIDs: true},
		{ProfileType: "warning", ExecutedWithWarning: true},
		{ProfileType: "omit", OmitSMDPAddress: true},
	}})
	c := client(t, sim.Certs)
	if vs := sim.State(t).Vendors; len(vs) != 3 || vs[0].ProfileType != "omit" || !vs[0].OmitSMDPAddress || vs[1].ProfileType != "padded" || !vs[1].PaddedICCIDs {
		t.Fatalf("state's vendors %+v", vs)
	}
	for _, typ := range []string{"padded", "warning", "omit", "plain"} {
		t.Run(typ, func(t *testing.T) {
			d := call(t, c, sim, "downloadOrder", map[string]any{"header": hdr(), "profileType": typ})
			answered, _ := d.body["iccid"].(string)
			iccid := answered
			if typ == "padded" {
				if len(answered) != 20 || answered[19] != 'F' {
					t.Fatalf("padded: iccid %q", answered)
				}
				iccid = answered[:19]
			}
			if !smdpsim.ValidICCID(iccid) {
				t.Fatalf("iccid %q", answered)
			}
			if p, ok := sim.State(t).Profile(iccid); !ok || p.State != smdpsim.StateAllocated {
				t.Fatalf("state has %+v for %s", p, answered)
			}
			// Padded ICCIDs are taken in requests, padded or not, from any
			// vendor's caller.
			confirmICCID := iccid
			if typ == "padded" || typ == "plain" {
				confirmICCID = iccid + "F"
			}
			cf := call(t, c, sim, "confirmOrder", map[string]any{"header": hdr(), "iccid": confirmICCID, "releaseFlag": false})
			rel := call(t, c, sim, "releaseProfile", map[string]any{"header": hdr(), "iccid": iccid + "f"})
			cn := call(t, c, sim, "cancelOrder", map[string]any{"header": hdr(), "iccid": confirmICCID, "finalProfileStatusIndicator": "Available"})
			wantStatus := "Executed-Success"
			if typ == "warning" {
				wantStatus = "Executed-WithWarning"
			}
			for name, a := range map[string]answer{"downloadOrder": d, "confirmOrder": cf, "releaseProfile": rel, "cancelOrder": cn} {
				st, subject, reason := a.status2()
				if a.status != 200 || st != wantStatus {
					t.Errorf("%s: %d %s, want %s", name, a.status, a.raw, wantStatus)
				}
				if typ == "warning" && (subject != smdpsim.WarningSubjectCode || reason != smdpsim.WarningReasonCode || statusCodeData(a)["subjectIdentifier"] != "warning") {
					t.Errorf("%s: %s, want the warning's codes", name, a.raw)
				}
			}
			if _, has := cf.body["smdpAddress"]; has == (typ == "omit") || (typ != "omit" && cf.body["smdpAddress"] != "smdp.test.example") {
				t.Errorf("confirmOrder: %s", cf.raw)
			}
			if cf.body["matchingId"] == "" || cf.body["matchingId"] == nil {
				t.Errorf("confirmOrder: %s", cf.raw)
			}
			if p, _ := sim.State(t).Profile(iccid); strings.Join(p.History, ",") != "allocated,confirmed,released,cancelled" || p.State != smdpsim.StateAvailable {
				t.Errorf("profile %+v", p)
			}
		})
	}
	// Reset clears them.
	if err := sim.Control.Reset(context.Background()); err != nil {
		t.Fatal(err)
	}
	if vs := sim.State(t).Vendors; len(vs) != 0 {
		t.Errorf("vendors after reset: %+v", vs)
	}
	if iccid := downloadOK(t, c, sim, "padded"); len(iccid) != 19 {
		t.Errorf("after reset: iccid %q", iccid)
	}
}
