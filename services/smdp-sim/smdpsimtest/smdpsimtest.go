// Package smdpsimtest starts the SM-DP+ simulator in-process for tests:
// ES2+ over mutual TLS and the control API over plain HTTP, both on
// loopback ports of their own.
package smdpsimtest

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/esimplatform/esim/libs/config"
	"github.com/esimplatform/esim/libs/devcerts"
	"github.com/esimplatform/esim/libs/telemetry"
	smdpsim "github.com/esimplatform/esim/services/smdp-sim"
	"github.com/esimplatform/esim/services/smdp-sim/control"
	"github.com/esimplatform/esim/services/smdp-sim/es2plus"
	"github.com/esimplatform/esim/services/smdp-sim/server"
)

// Options change the simulator's defaults (those of server.Config).
type Options struct {
	ProfileTypes string
	SMDPAddress  string
	// Vendors are set as PUT /control/vendor would; a reset clears them.
	Vendors []smdpsim.Vendor
}

// Sim is a running simulator.
type Sim struct {
	// ES2PlusURL is the base URL of ES2+ (https://127.0.0.1:port).
	ES2PlusURL string
	// ControlURL is the base URL of the control API (http://127.0.0.1:port)
	// and ControlToken the token it requires.
	ControlURL   string
	ControlToken string
	SMDPAddress  string
	// Certs hold the CA that signs both the simulator's certificate and
	// the client certificate it accepts.
	Certs   devcerts.Files
	Control *control.Client
	// NetworkURL is the base URL of the network API (ES2PlusURL: it
	// shares the mutual TLS port).
	NetworkURL string

	srv *server.Server
}

// NotifyOperator makes the simulator report downloads to the operator's
// ES2+ endpoint at url (https), with the client certificate of Certs and
// trusting Certs' CA for the operator's server certificate.
func (s *Sim) NotifyOperator(t testing.TB, url string) {
	t.Helper()
	n, err := es2plus.NewNotifier(es2plus.NotifierConfig{
		URL: url, CertFile: s.Certs.ClientCert, KeyFile: s.Certs.ClientKey, CAFile: s.Certs.CACert,
		RequesterID: "smdp-sim-test", Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	s.srv.Sim().SetNotifier(n)
}

// Start starts a simulator, closed when the test ends.
func Start(t testing.TB, opts Options) *Sim {
	t.Helper()
	if opts.ProfileTypes == "" {
		opts.ProfileTypes = "esim-travel:10000"
	}
	if opts.SMDPAddress == "" {
		opts.SMDPAddress = "smdp-sim.esim.invalid"
	}
	certs, err := devcerts.Generate(t.TempDir(), "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	token := rand.Text() + rand.Text() // 52 characters of base32

	cfg := server.Config{
		TLSCertFile:  certs.ServerCert,
		TLSKeyFile:   certs.ServerKey,
		ClientCAFile: certs.CACert,
		SMDPAddress:  opts.SMDPAddress,
		ProfileTypes: opts.ProfileTypes,
		ControlAPI:   true,
		ControlToken: config.NewSecret(token),
	}
	tel := &telemetry.Telemetry{Logger: slog.New(slog.DiscardHandler)}
	srv, err := server.New(context.Background(), cfg, tel)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range opts.Vendors {
		if err := srv.Sim().SetVendor(v); err != nil {
			t.Fatal(err)
		}
	}
	es2 := httptest.NewUnstartedServer(srv.ES2PlusHandler())
	es2.TLS = srv.TLSConfig()
	es2.StartTLS()
	ctl := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close() // first: a hanging call would hold the servers' Close
		es2.Close()
		ctl.Close()
	})
	return &Sim{
		ES2PlusURL:   es2.URL,
		ControlURL:   ctl.URL,
		ControlToken: token,
		SMDPAddress:  opts.SMDPAddress,
		Certs:        certs,
		Control:      &control.Client{BaseURL: ctl.URL, Token: token},
		NetworkURL:   es2.URL,
		srv:          srv,
	}
}

// State returns the simulator's state, failing the test if it cannot.
func (s *Sim) State(t testing.TB) smdpsim.State {
	t.Helper()
	st, err := s.Control.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
