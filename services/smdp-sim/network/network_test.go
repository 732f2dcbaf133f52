package network_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/services/smdp-sim/network"
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

func post(t *testing.T, c *http.Client, url, body string) (int, string) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

var seq int

// released orders a profile over ES2+ as ordering does.
func released(t *testing.T, c *http.Client, sim *smdpsimtest.Sim) string {
	t.Helper()
	call := func(function, body string) map[string]any {
		seq++
		body = fmt.Sprintf(`{"header":{"functionRequesterIdentifier":"t","functionCallIdentifier":"c%d"},%s}`, seq, body)
		req, _ := http.NewRequest(http.MethodPost, sim.ES2PlusURL+"/gsma/rsp2/es2plus/"+function, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Admin-Protocol", "gsma/rsp/v2.5.0")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return out
	}
	iccid, _ := call("downloadOrder", `"profileType":"esim-travel"`)["iccid"].(string)
	call("confirmOrder", `"iccid":"`+iccid+`","releaseFlag":true`)
	return iccid
}

// The usage feed reads what the device did, over the mutual TLS port:
// first attach (null before), bytes used, the time of the reading; an
// ICCID the network does not serve is left out.
func TestUsage(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	c := client(t, sim.Certs)
	ctx := context.Background()
	used, idle := released(t, c, sim), released(t, c, sim)
	if _, err := sim.Control.Install(ctx, used, ""); err != nil {
		t.Fatal(err)
	}
	dev, err := sim.Control.Attach(ctx, used)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Control.Use(ctx, used, 4096); err != nil {
		t.Fatal(err)
	}
	status, body := post(t, c, sim.NetworkURL+network.PathUsage, `{"iccids":["`+used+`","`+idle+`","8988000000000000000"]}`)
	var got network.UsageResponse
	if status != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || len(got.Readings) != 2 {
		t.Fatalf("usage: %d %s", status, body)
	}
	r0, r1 := got.Readings[0], got.Readings[1]
	if r0.ICCID != used || r0.FirstAttachAt == nil || !r0.FirstAttachAt.Equal(dev.AttachedAt) || r0.UsedBytes != 4096 || r0.ReadAt.Before(dev.AttachedAt) {
		t.Errorf("reading of the used profile %+v", r0)
	}
	if r1.ICCID != idle || r1.FirstAttachAt != nil || r1.UsedBytes != 0 || !strings.Contains(body, `"first_attach_at":null`) {
		t.Errorf("reading of the idle profile %+v in %s", r1, body)
	}
}

// A bundle is added once per topup_id (201, then 200 adding nothing); an
// unknown ICCID is 404 unknown_iccid, another bundle under a used
// topup_id 409, a malformed body 400: refusals that change nothing.
func TestBundles(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	c := client(t, sim.Certs)
	iccid := released(t, c, sim)
	bundle := `{"topup_id":"0197a0e0-0000-7000-8000-000000000001","iccid":"` + iccid + `","bytes":1073741824,"days":7}`
	if status, body := post(t, c, sim.NetworkURL+network.PathBundles, bundle); status != http.StatusCreated || !strings.Contains(body, `"added":true`) {
		t.Fatalf("add: %d %s", status, body)
	}
	if status, body := post(t, c, sim.NetworkURL+network.PathBundles, bundle); status != http.StatusOK || !strings.Contains(body, `"added":false`) {
		t.Fatalf("add again: %d %s", status, body)
	}
	before, _ := json.Marshal(sim.State(t))
	for _, bad := range []struct {
		path, body string
		status     int
		code       string
	}{
		{network.PathBundles, `{"topup_id":"other","iccid":"8988000000000000000","bytes":1,"days":1}`, http.StatusNotFound, network.CodeUnknownICCID},
		{network.PathBundles, strings.Replace(bundle, `"days":7`, `"days":8`, 1), http.StatusConflict, network.CodeConflict},
		{network.PathBundles, `{"topup_id":"x","iccid":"` + iccid + `","bytes":-1,"days":1}`, http.StatusBadRequest, network.CodeInvalidRequest},
		{network.PathBundles, `{"topup_id":"x","iccid":"` + iccid + `","gigabytes":1}`, http.StatusBadRequest, network.CodeInvalidRequest},
		{network.PathBundles, `not json`, http.StatusBadRequest, network.CodeInvalidRequest},
		{network.PathUsage, `{"iccids":"` + iccid + `"}`, http.StatusBadRequest, network.CodeInvalidRequest},
		{network.PathUsage, `{"iccids":[` + strings.Repeat(`"x",`, 1000) + `"x"]}`, http.StatusBadRequest, network.CodeInvalidRequest},
		{"/network/v1/nothing", `{}`, http.StatusNotFound, network.CodeInvalidRequest},
	} {
		status, body := post(t, c, sim.NetworkURL+bad.path, bad.body)
		var e network.ErrorResponse
		if status != bad.status || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != bad.code || e.Error.Message == "" {
			t.Errorf("POST %s %.60s: %d %s, want %d %s", bad.path, bad.body, status, body, bad.status, bad.code)
		}
	}
	if after, _ := json.Marshal(sim.State(t)); string(after) != string(before) {
		t.Errorf("refused calls changed the simulator:\n%s\n%s", before, after)
	}
}

// Without a client certificate of the CA, the network API is refused at
// the handshake, as ES2+ is.
func TestNetworkNeedsTheClientCertificate(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	other, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := sim.Certs.ClientTLS()
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
		resp, err := c.Post(sim.NetworkURL+network.PathUsage, "application/json", strings.NewReader(`{"iccids":[]}`))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d, want a refused handshake", name, resp.StatusCode)
		}
	}
}
