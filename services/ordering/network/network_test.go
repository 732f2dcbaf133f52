package network_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/services/ordering"
	"github.com/esimplatform/esim/services/ordering/es2plus"
	"github.com/esimplatform/esim/services/ordering/network"
	"github.com/esimplatform/esim/services/smdp-sim/smdpsimtest"
)

func clientOf(t *testing.T, url string, certs devcerts.Files, timeout time.Duration) *network.Client {
	t.Helper()
	c, err := network.New(network.Config{URL: url, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, CAFile: certs.CACert, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// released orders a profile as ordering's provider does: reserved, then
// confirmed and released.
func released(t *testing.T, sim *smdpsimtest.Sim) string {
	t.Helper()
	c, err := es2plus.New(es2plus.Config{URL: sim.ES2PlusURL, CertFile: sim.Certs.ClientCert, KeyFile: sim.Certs.ClientKey, CAFile: sim.Certs.CACert, RequesterID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	iccid, err := c.DownloadOrder(ctx, es2plus.DownloadOrderRequest{ProfileType: "esim-travel"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ConfirmOrder(ctx, es2plus.ConfirmOrderRequest{ICCID: iccid, ReleaseFlag: true}); err != nil {
		t.Fatal(err)
	}
	return iccid
}

// The client and the simulator's network, written apart, agree: usage
// reads first attach and bytes, leaving out what the network does not
// serve.
func TestUsageAgainstTheSimulator(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	c := clientOf(t, sim.NetworkURL, sim.Certs, 5*time.Second)
	ctx := context.Background()
	used, idle := released(t, sim), released(t, sim)
	if _, err := sim.Control.Install(ctx, used, ""); err != nil {
		t.Fatal(err)
	}
	dev, err := sim.Control.Attach(ctx, used)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Control.Use(ctx, used, 3<<20); err != nil {
		t.Fatal(err)
	}
	got, err := c.Usage(ctx, []string{used, idle, "8988000000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ICCID != used || !got[0].AttachedAt.Equal(dev.AttachedAt) || got[0].UsedBytes != 3<<20 || got[0].ReadAt.IsZero() ||
		got[1].ICCID != idle || !got[1].AttachedAt.IsZero() || got[1].UsedBytes != 0 {
		t.Fatalf("usage = %+v", got)
	}
	if got, err := c.Usage(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("usage of none = %+v, %v", got, err)
	}
}

// A bundle is added once per top-up id, however often it is sent; an
// unknown ICCID, or another bundle under a used id, is a definitive
// refusal (ordering.ErrProviderFailed) that adds nothing.
func TestAddBundleAgainstTheSimulator(t *testing.T) {
	sim := smdpsimtest.Start(t, smdpsimtest.Options{})
	c := clientOf(t, sim.NetworkURL, sim.Certs, 5*time.Second)
	ctx := context.Background()
	iccid := released(t, sim)
	b := ordering.Bundle{TopUpID: uuid.Must(uuid.NewV7()), ICCID: iccid, Bytes: 1 << 30, Days: 7}
	for range 2 {
		if err := c.AddBundle(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	if st := sim.State(t); len(st.Bundles) != 1 || st.Bundles[0].TopUpID != b.TopUpID.String() || st.Bundles[0].Bytes != 1<<30 || st.Bundles[0].Days != 7 {
		t.Fatalf("bundles %+v", st.Bundles)
	}
	other := b
	other.Days = 30
	unknown := ordering.Bundle{TopUpID: uuid.Must(uuid.NewV7()), ICCID: "8988000000000000000", Bytes: 1}
	for name, bad := range map[string]ordering.Bundle{"unknown ICCID": unknown, "another bundle under the id": other} {
		if err := c.AddBundle(ctx, bad); !errors.Is(err, ordering.ErrProviderFailed) {
			t.Errorf("%s: %v, want ErrProviderFailed", name, err)
		}
	}
	if st := sim.State(t); len(st.Bundles) != 1 {
		t.Errorf("refusals added bundles: %+v", st.Bundles)
	}
}

// fake is a network that answers what a test says, over the mutual TLS
// of certs: the answers the simulator never gives.
func fake(t *testing.T, certs devcerts.Files, answer func(w http.ResponseWriter, r *http.Request)) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(answer))
	cfg, err := certs.ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	ts.TLS = cfg
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts.URL
}

func certs(t *testing.T) devcerts.Files {
	t.Helper()
	f, err := devcerts.Generate(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The network's own failures, garbled answers and no answer within the
// timeout leave a bundle's outcome unknown (not ErrProviderFailed: the
// same call may be made again) and fail a usage read as a whole.
func TestUnknownOutcomes(t *testing.T) {
	pki := certs(t)
	ctx := context.Background()
	bundle := ordering.Bundle{TopUpID: uuid.Must(uuid.NewV7()), ICCID: "8988000000000000001", Bytes: 1}
	for name, answer := range map[string]func(w http.ResponseWriter, r *http.Request){
		"500": func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
		"503": func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
		"redirect": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Location", "https://elsewhere.example/")
			w.WriteHeader(http.StatusFound)
		},
		// The body read first: only then does the server notice the
		// client hanging up, which ends the request's context.
		"hang": func(_ http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body); <-r.Context().Done() },
		"lost": func(w http.ResponseWriter, _ *http.Request) { panic(http.ErrAbortHandler) },
	} {
		c := clientOf(t, fake(t, pki, answer), pki, 200*time.Millisecond)
		if err := c.AddBundle(ctx, bundle); err == nil || errors.Is(err, ordering.ErrProviderFailed) {
			t.Errorf("%s: AddBundle = %v, want an unknown outcome", name, err)
		}
		if got, err := c.Usage(ctx, []string{bundle.ICCID}); err == nil {
			t.Errorf("%s: Usage = %+v, want an error", name, got)
		}
	}
	for name, body := range map[string]string{
		"not JSON":              `<html>`,
		"no readings":           `{}`,
		"an ICCID not asked":    `{"readings":[{"iccid":"8988000000000000002","used_bytes":1,"read_at":"2026-11-29T10:00:00Z"}]}`,
		"no used_bytes":         `{"readings":[{"iccid":"8988000000000000001","read_at":"2026-11-29T10:00:00Z"}]}`,
		"negative bytes":        `{"readings":[{"iccid":"8988000000000000001","used_bytes":-1,"read_at":"2026-11-29T10:00:00Z"}]}`,
		"a bad first_attach_at": `{"readings":[{"iccid":"8988000000000000001","used_bytes":1,"read_at":"2026-11-29T10:00:00Z","first_attach_at":"yesterday"}]}`,
	} {
		c := clientOf(t, fake(t, pki, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }), pki, time.Second)
		if got, err := c.Usage(ctx, []string{bundle.ICCID}); err == nil {
			t.Errorf("%s: Usage = %+v, want an error", name, got)
		}
	}
}

// The network's certificate must be of the configured CA, and the
// client's configuration is checked when it is made.
func TestTLSAndConfig(t *testing.T) {
	ours, theirs := certs(t), certs(t)
	url := fake(t, theirs, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{"readings":[]}`) })
	c := clientOf(t, url, ours, time.Second)
	if _, err := c.Usage(context.Background(), []string{"8988000000000000001"}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a network of another CA: %v", err)
	}
	for name, cfg := range map[string]network.Config{
		"http":         {URL: "http://127.0.0.1:1", CertFile: ours.ClientCert, KeyFile: ours.ClientKey, CAFile: ours.CACert},
		"no key":       {URL: url, CertFile: ours.ClientCert, CAFile: ours.CACert},
		"no CA":        {URL: url, CertFile: ours.ClientCert, KeyFile: ours.ClientKey},
		"CA not PEM":   {URL: url, CertFile: ours.ClientCert, KeyFile: ours.ClientKey, CAFile: ours.ClientKey},
		"neg. timeout": {URL: url, CertFile: ours.ClientCert, KeyFile: ours.ClientKey, CAFile: ours.CACert, Timeout: -1},
	} {
		if _, err := network.New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
}
